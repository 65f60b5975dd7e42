"""Parsing helpers shared by CLI verbs."""

from __future__ import annotations

import json
from typing import Any

import typer


def parse_env_args(pairs: list[str]) -> dict[str, Any]:
    """`["max_steps=40", "data_dir=/x"]` → `{"max_steps": 40, "data_dir": "/x"}` (values parsed as JSON when they are)."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"expected key=value, got {pair!r}", param_hint="--env-arg")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out

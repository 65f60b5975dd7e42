"""The `proctor` command line: one module per verb group, each adding its commands to `app`."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="proctor",
    help="Process reward models for LLM agents: rollouts, per-step targets, PRM training, search.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)

from proctor.cli import (
    envs_cmd,  # noqa: F401
    prm_cmd,  # noqa: F401
    quickstart_cmd,  # noqa: F401
    rollout_cmd,  # noqa: F401
    serve_cmd,  # noqa: F401
    targets_cmd,  # noqa: F401
)


def main() -> None:
    app()

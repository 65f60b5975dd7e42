"""The `proctor` command line: one module per verb group (`*_cmd.py`), each adding its commands to the app
of `proctor.cli.root`; `proctor.cli.commands` imports them all."""

from __future__ import annotations

from typing import Any


def main() -> None:
    from proctor.cli.commands import app

    app()


def __getattr__(name: str) -> Any:
    if name == "app":
        from proctor.cli.commands import app

        return app
    raise AttributeError(f"module 'proctor.cli' has no attribute {name!r}")

"""The `proctor` command line: one module per verb group (`*_cmd.py`), each adding its commands to the app
of `proctor.cli.root`; `proctor.cli.commands` imports them all."""

from __future__ import annotations

from typing import Any


def main() -> None:
    """The `proctor` entry point; under torchrun it tears the process group down after the command."""
    from proctor.cli.commands import app
    from proctor.training.distributed import finish

    succeeded = False
    try:
        app()
        succeeded = True
    except SystemExit as e:
        succeeded = e.code in (0, None)
        raise
    finally:
        finish(wait=succeeded)


def __getattr__(name: str) -> Any:
    if name == "app":
        from proctor.cli.commands import app

        return app
    raise AttributeError(f"module 'proctor.cli' has no attribute {name!r}")

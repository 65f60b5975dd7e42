"""The `proctor` typer application; every `*_cmd.py` module adds its commands to it."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="proctor",
    help="Process reward models for LLM agents: rollouts, per-step targets, PRM training, search.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)


@app.callback()
def _root_options(
    debug: bool = typer.Option(False, "--debug", help="show the full traceback of an error instead of one line"),
) -> None:
    """Process reward models for LLM agents: rollouts, per-step targets, PRM training, search."""
    if debug:
        import os

        from proctor.cli.errors import DEBUG_ENV

        os.environ[DEBUG_ENV] = "1"

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

from proctor.cli import envs_cmd  # noqa: E402,F401
from proctor.cli import targets_cmd  # noqa: E402,F401
from proctor.cli import serve_cmd  # noqa: E402,F401
from proctor.cli import rollout_cmd  # noqa: E402,F401
from proctor.cli import prm_cmd  # noqa: E402,F401
from proctor.cli import quickstart_cmd  # noqa: E402,F401


def main() -> None:
    app()

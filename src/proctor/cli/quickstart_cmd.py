"""`proctor quickstart`: the whole AgentPRM loop on a CPU in minutes, with a results table and report.html."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from proctor.cli.options import console, fail
from proctor.cli.root import app
from proctor.cli.run_cmd import print_stage


@app.command("quickstart")
def quickstart(
    out: Annotated[Path, typer.Option("--out", help="run directory (re-run to resume)")] = Path("runs/quickstart"),
    env: Annotated[str, typer.Option("--env", help="household | twenty_questions | arithmetic")] = "household",
    seed: Annotated[int, typer.Option("--seed")] = 0,
    scale: Annotated[float, typer.Option("--scale", help="shrink every size by this factor (0-1], for a smoke run")] = 1.0,
) -> None:
    """Tiny model → expert demos → SFT π0 → rollouts → MC-Q → PRM Q0 → best-of-N and beam search → π1 (household:
    best-of-8 distilled into Q0's LM; twenty_questions and arithmetic: online DPO) → evaluation on held-out tasks;
    prints the table, writes summary.json and report.html."""
    from pydantic import ValidationError

    from proctor.pipeline.table import result_tables
    from proctor.quickstart import QuickstartConfig, run_quickstart

    try:
        cfg = QuickstartConfig(env=env, out=out, seed=seed, scale=scale)
        summary = run_quickstart(cfg, report=print_stage)
    except ValidationError as e:
        fail(e, where="options")
    except (ValueError, FileNotFoundError) as e:
        fail(e)
    for table in result_tables(summary, title=f"proctor quickstart: {env}, held-out test tasks"):
        console.print(table)
    console.print(f"summary: {out / 'summary.json'}   report: {summary['report_html']}")

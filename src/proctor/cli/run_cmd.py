"""`proctor run CONFIG.yaml`: the iterated AgentPRM loop (`proctor.pipeline`), resumable, with lineage."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from proctor.cli.options import console, fail, load_yaml_config
from proctor.cli.root import app


def print_stage(stage: str, record: dict[str, Any]) -> None:
    """One line per finished stage; the evaluation rows as they come."""
    if stage == "eval":
        lo, hi = record.get("success_ci95", [0, 0])
        console.print(f"[bold]eval[/] iteration {record['iteration']}  {record['policy']:<28} success "
                      f"{record.get('success_rate', 0):6.1%} [{lo:.1%}, {hi:.1%}]  mean steps "
                      f"{record.get('mean_steps', 0):.1f}  ({record['dir']})", highlight=False)
    elif stage == "monitor":
        console.print(f"[bold]monitor[/] iteration {record['iteration']}  success {record['success_rate']:.1%}  PRM "
                      f"score of its actions {record['prm_mean_relabelled']:.3f}, MC re-label "
                      f"{record['mc_q_mean']:.3f} ({record['relabelled']} pairs): drift {record['drift']:+.3f}",
                      highlight=False)
    elif stage == "improve" and "skipped" in record.get("result", {}):
        console.print(f"[bold yellow]improve[/] iteration {record['iteration']} skipped, the next policy is this one: "
                      f"{record['result']['skipped']}", highlight=False)
    else:
        console.print(f"[bold]{stage}[/] done in {record.get('seconds', 0):.1f} s", highlight=False)


@app.command("run")
def run_cmd(
    config: Annotated[Path, typer.Argument(help="a PipelineConfig YAML file (see `proctor.pipeline.config`)")],
    out: Annotated[Path | None, typer.Option("--out", help="run directory (overrides the config's `out`)")] = None,
) -> None:
    """Run (or resume) the iterated loop: demos → SFT → [rollouts → targets → PRM → eval → online DPO] × K."""
    from pydantic import ValidationError

    from proctor.pipeline import PipelineConfig, run_pipeline
    from proctor.pipeline.table import result_tables

    data = load_yaml_config(config)
    if out is not None:
        data["out"] = str(out)
    try:
        cfg = PipelineConfig.model_validate(data)
    except ValidationError as e:
        fail(e, where=str(config))
    try:
        summary = run_pipeline(cfg, report=print_stage)
    except (ValueError, FileNotFoundError) as e:
        fail(e)
    for table in result_tables(summary):
        console.print(table)

"""`proctor quickstart`: the AgentPRM loop in miniature (tiny model, rollouts, MC-Q targets, PRM), with tables."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from proctor.cli.root import app

console = Console()


def _print_stage(stage: str, payload: Any) -> None:
    from proctor.rollout import summary_table

    if stage == "model":
        console.print(f"[bold]1. tiny backbone[/] at {payload}")
    elif stage.startswith("rollout:"):
        console.print(summary_table(payload, title=f"2. mixed-policy rollouts, {stage.split(':')[1]} split"))
    elif stage.startswith("targets:"):
        console.print(f"[bold]3. MC-Q targets ({stage.split(':')[1]})[/]: {payload['records']} labelled steps, "
                      f"{payload.get('states', '?')} distinct states")
    elif stage == "prm":
        console.print(f"[bold]4. PRM trained[/]: loss {payload['first']:.4f} → {payload['last']:.4f}")
    elif stage == "eval":
        table = Table(title="5. PRM on held-out test trajectories (targets: MC-Q)")
        table.add_column("metric", style="bold")
        table.add_column("before training", justify="right")
        table.add_column("after training", justify="right")
        for k in payload["after"]:
            table.add_row(k, f"{payload['before'][k]:.3f}", f"{payload['after'][k]:.3f}")
        console.print(table)


@app.command("quickstart")
def quickstart(
    out: Annotated[Path, typer.Option("--out", help="run directory (re-run to resume)")] = Path("runs/quickstart"),
    train_tasks: Annotated[int, typer.Option("--train-tasks", help="household train tasks")] = 24,
    test_tasks: Annotated[int, typer.Option("--test-tasks", help="household test tasks")] = 8,
    samples: Annotated[int, typer.Option("--samples", help="rollouts per task (K)")] = 8,
    epsilon: Annotated[float, typer.Option("--epsilon", help="rate of random actions in the policy")] = 0.3,
    prm_steps: Annotated[int, typer.Option("--prm-steps", help="PRM optimisation steps")] = 150,
    seed: Annotated[int, typer.Option("--seed")] = 0,
) -> None:
    """Build a tiny model, roll out a mixed policy on `household`, label steps with MC-Q, train and test a PRM."""
    from proctor.quickstart import QuickstartConfig, run_quickstart

    cfg = QuickstartConfig(train_tasks=train_tasks, test_tasks=test_tasks, samples=samples, epsilon=epsilon,
                           prm_steps=prm_steps, seed=seed)
    run_quickstart(out, cfg, report=_print_stage)
    console.print(f"summary: {out / 'summary.json'}")

"""`proctor targets`: per-step training targets from a trajectory store (see `proctor.credit`)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from rich.console import Console
from rich.table import Table

from proctor.cli.root import app

console = Console()


def _parse_params(items: list[str]) -> dict[str, Any]:
    params = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--param")
        params[key.strip().replace("-", "_")] = yaml.safe_load(value)
    return params


def _print_summary(summary: dict[str, Any]) -> None:
    head = Table(title=f"proctor targets --method {summary['method']}", show_header=False)
    for k in ("records", "trajectories", "tasks", "states", "units", "dropped", "seconds"):
        head.add_row(k, str(summary.get(k)))
    head.add_row("splits", ", ".join(f"{k}: {v}" for k, v in summary.get("splits", {}).items()))
    console.print(head)
    visits = Table("visits", "units", title="visit histogram")
    for b, n in summary.get("visit_histogram", {}).items():
        visits.add_row(b, str(n))
    console.print(visits)
    labels = Table("label range", "records", title="label histogram")
    for row in summary.get("label_histogram", []):
        labels.add_row(f"[{row['lo']:.4g}, {row['hi']:.4g}]", str(row["count"]))
    console.print(labels)


@app.command("targets")
def targets(
    method: Annotated[str, typer.Option("--method", "-m", help="mc-q | mc-v | preference | math-shepherd | "
                                        "inverse | shaped | spa | grpo | loo | gigpo")],
    inp: Annotated[Path, typer.Option("--in", help="trajectory store, .parquet file, or saved HF dataset")],
    out: Annotated[Path, typer.Option("--out", help="output directory (targets.parquet, summary.json)")],
    param: Annotated[list[str], typer.Option("--param", "-p", help="method parameter KEY=VALUE (repeatable), "
                                             "e.g. -p gamma=0.9 -p discount=from_start")] = [],  # noqa: B006
    completions: Annotated[Path | None, typer.Option(
        "--completions", help="store of completions (math-shepherd, inverse): meta.prefix_of, meta.prefix_len")
    ] = None,
    policy: Annotated[Path | None, typer.Option("--policy", help="store of policy rollouts (inverse)")] = None,
    split: Annotated[str, typer.Option("--split", help="'task': assign splits by task (--fractions, --seed); "
                                       "'keep': keep each trajectory's split")] = "task",
    fractions: Annotated[str, typer.Option("--fractions", help="train,valid,test fractions of tasks")] = "0.8,0.1,0.1",
    seed: Annotated[int, typer.Option("--seed", help="seed of the task split")] = 0,
    write_back: Annotated[Path | None, typer.Option(
        "--write-back", help="also write a store of the trajectories with Step.targets filled")] = None,
) -> None:
    """Turn outcome-only trajectories into labelled steps and print a summary."""
    from proctor.credit import (
        CreditError,
        Sources,
        check_no_leak,
        make_config,
        run_method,
        split_tasks,
        with_splits,
    )
    from proctor.credit.io import load_trajectories, write_records
    from proctor.credit.io import write_back as fill_targets
    from proctor.credit.records import LabelledStep
    from proctor.trajectory import TrajectoryStore

    try:
        cfg = make_config(method, _parse_params(param))
        t0 = time.perf_counter()
        with console.status(f"reading {inp}"):
            trajs = load_trajectories(inp)
            comps = load_trajectories(completions) if completions else None
            pol = load_trajectories(policy) if policy else None
        if split == "task":
            fr = tuple(float(x) for x in fractions.split(","))
            tasks = [(t.env, t.task_id) for group in (trajs, comps or [], pol or []) for t in group]
            assignment = split_tasks(tasks, fr, seed)
            trajs = with_splits(trajs, assignment)
            comps = with_splits(comps, assignment) if comps is not None else None
            pol = with_splits(pol, assignment) if pol is not None else None
        elif split != "keep":
            raise typer.BadParameter(f"--split must be 'task' or 'keep', got {split!r}", param_hint="--split")
        with console.status(f"computing {method} targets for {len(trajs)} trajectories"):
            result = run_method(method, Sources(trajs, completions=comps, policy=pol), cfg)
            check_no_leak(result.records)
        seconds = time.perf_counter() - t0
        with console.status(f"writing {len(result.records)} records to {out}"):
            info = {"method": method, "params": cfg.model_dump(mode="json"), "input": str(inp),
                    "dropped": result.dropped, "seconds": round(seconds, 3), "split": split}
            summary = write_records(result.records, out, info)
            if write_back is not None:
                if not all(isinstance(r, LabelledStep) for r in result.records):
                    raise ValueError(f"--write-back needs step records; method {method!r} makes other records")
                with TrajectoryStore(write_back, meta={"targets": method}) as store:
                    store.extend(fill_targets(trajs, result.records))
    except (CreditError, ValueError, KeyError, FileNotFoundError) as e:
        console.print(f"[red]error:[/red] {e}")
        raise typer.Exit(1) from None
    _print_summary(summary)
    console.print(f"wrote {out / 'targets.parquet'}")

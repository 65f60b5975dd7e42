"""`proctor targets`: per-step training targets from a trajectory store (see `proctor.credit`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from rich.console import Console
from rich.table import Table

from proctor.cli.options import fail
from proctor.cli.root import app
from proctor.credit.registry import methods

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
    truth = summary.get("ground_truth")
    if truth:
        auroc = "n/a (" + truth.get("auroc_note", "") + ")" if truth["auroc"] is None else f"{truth['auroc']:.3f}"
        console.print(f"labels vs ground truth info[{truth['key']!r}] on {truth['n']} steps "
                      f"({truth['positives']} correct): AUROC {auroc}, accuracy {truth['accuracy']:.3f}")
    if summary.get("warning"):
        console.print(f"[yellow]warning:[/yellow] {summary['warning']}")


@app.command("targets")
def targets(
    method: Annotated[str, typer.Option("--method", "-m", help=" | ".join(methods()))],
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
    overwrite: Annotated[bool, typer.Option(
        "--overwrite", help="replace what --out and --write-back hold of another run (without it, the same run "
                            "resumes and another is refused)")] = False,
) -> None:
    """Turn outcome-only trajectories into labelled steps and print a summary.

    gigpo's step reward is the env's Step.reward (the paper's R_t; -p step_reward=outcome puts the outcome on
    the last step instead, for outcome-only data). A store whose trajectories all share one outcome gets a
    warning; a method that finds nothing to label (e.g. preference with no pair) writes empty outputs. Re-run
    into the same --out / --write-back to resume; a folder holding another run's labels is refused (a store never
    holds the labels of two runs) unless --overwrite."""
    from pydantic import ValidationError

    from proctor.cli.errors import debug_enabled
    from proctor.credit import CreditError
    from proctor.credit.stage import TargetsConfig, run_targets

    try:
        if not inp.exists():
            raise FileNotFoundError(f"--in {inp}: no such trajectory store or file")
        for flag, path in (("--completions", completions), ("--policy", policy)):
            if path is not None and not path.exists():
                raise FileNotFoundError(f"{flag} {path}: no such trajectory store or file")
        cfg = TargetsConfig(method=method, params=_parse_params(param), input=inp, out=out, completions=completions,
                            policy=policy, split=split, fractions=tuple(float(x) for x in fractions.split(",")),
                            seed=seed, write_back=write_back)
        with console.status(f"computing {method} targets from {inp}"):
            summary = run_targets(cfg, overwrite=overwrite)
    except ValidationError as e:
        if debug_enabled():
            raise
        fail(e, where="options")
    except (CreditError, ValueError, KeyError, OSError) as e:
        if debug_enabled():
            raise
        fail(e)
    _print_summary(summary)
    console.print(f"wrote {summary['records']} records to {out / 'targets.parquet'}")

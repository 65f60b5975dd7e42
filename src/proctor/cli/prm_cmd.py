"""`proctor prm ...`: train a process reward model from a YAML config, score, serve it over HTTP."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from proctor.cli.root import app

prm_app = typer.Typer(help="Process reward models: train, score, serve.", no_args_is_help=True)
app.add_typer(prm_app, name="prm")


@prm_app.command("train")
def train(
    config: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="PRM training YAML")],
    resume: str | None = typer.Option(None, help="checkpoint folder, or 'last' for the latest"),
) -> None:
    """Train a PRM with the HF Trainer as CONFIG describes; the model is saved to training.output_dir."""
    from proctor.prm.config import load_config
    from proctor.prm.trainer import train_prm

    cfg = load_config(config)
    _, result, _ = train_prm(cfg, resume_from_checkpoint=True if resume == "last" else resume)
    typer.echo(
        json.dumps(
            {
                "output_dir": cfg.training["output_dir"],
                "train_loss": result.training_loss,
                "steps": result.global_step,
            }
        )
    )


@prm_app.command("score")
def score(
    model: Annotated[Path, typer.Argument(exists=True, file_okay=False, help="PRM folder")],
    data: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="stepwise JSON/JSONL")],
    fmt: str = typer.Option("stepwise", "--format", help="stepwise|math_shepherd|prm800k|processbench"),
    batch_size: int = typer.Option(8),
) -> None:
    """Print one JSON line per example with its per-step scores (one forward pass per example)."""
    from proctor.prm.data import load_examples
    from proctor.prm.model import ProcessRewardModel
    from proctor.prm.scoring import PRMScorer

    scorer = PRMScorer(ProcessRewardModel.from_pretrained(model), batch_size=batch_size)
    examples = load_examples(data, fmt)
    for ex, s in zip(examples, scorer.score_examples(examples), strict=True):
        typer.echo(json.dumps({"id": ex.id, "scores": s}))


@prm_app.command("serve")
def serve(
    model: Annotated[Path, typer.Argument(exists=True, file_okay=False, help="PRM folder")],
    host: str = typer.Option("127.0.0.1"),
    port: int = typer.Option(8765),
    batch_size: int = typer.Option(8),
    api_key_env: str | None = typer.Option(None, help="environment variable holding the key clients send as Bearer"),
    limit: list[str] = typer.Option([], help="server bound key=value (repeatable), e.g. max_queue=32"),  # noqa: B008
) -> None:
    """HTTP scoring server: POST /score with {"trajectories": [...]} or {"examples": [{prompt, steps}]}, POST
    /score_actions with {"state": {...}, "actions": [...]}."""
    import os

    import uvicorn

    from proctor.prm.model import ProcessRewardModel
    from proctor.prm.scoring import PRMScorer
    from proctor.prm.server import make_app
    from proctor.serving.guards import ServerLimits

    api_key = os.environ.get(api_key_env) if api_key_env else None
    if api_key_env and not api_key:
        raise typer.BadParameter(f"environment variable {api_key_env} is unset or empty", param_hint="--api-key-env")
    try:
        limits = ServerLimits.from_pairs(limit)
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="--limit") from None
    scorer = PRMScorer(ProcessRewardModel.from_pretrained(model), batch_size=batch_size)
    auth = f"API key from ${api_key_env}" if api_key else "no API key"
    typer.echo(f"serving the PRM {model} on http://{host}:{port} ({auth})", err=True)
    uvicorn.run(make_app(scorer, api_key, limits), host=host, port=port)


@prm_app.command("eval")
def evaluate(
    model: Annotated[Path, typer.Option(exists=True, file_okay=False, help="PRM folder")],
    processbench: Annotated[list[Path] | None, typer.Option(
        exists=True, dir_okay=False, help="ProcessBench JSON file (repeatable), e.g. gsm8k.json")] = None,
    trajectories: Annotated[Path | None, typer.Option(
        exists=True, help="held-out trajectory store: score spread, Brier/AUROC vs --target, ranking")] = None,
    target: Annotated[str | None, typer.Option(help="trajectories: the Step.targets key (e.g. mc-q)")] = None,
    candidates: Annotated[Path | None, typer.Option(
        exists=True, help="trajectories: candidate completions (rollout start.candidates) for pairwise ranking")] = None,
    margin: Annotated[float, typer.Option(help="ranking: min MC-Q difference of a pair")] = 0.2,
    gamma: Annotated[float, typer.Option(help="ranking: the MC-Q discount")] = 0.95,
    bootstrap: Annotated[int, typer.Option(help="bootstrap resamples (over tasks) for intervals")] = 1000,
    threshold: Annotated[float, typer.Option(help="a step scored below this is predicted wrong")] = 0.5,
    limit: Annotated[int | None, typer.Option(
        help="evaluate N solutions per file, with the file's mix of erroneous and correct ones")] = None,
    batch_size: Annotated[int, typer.Option()] = 8,
    output: Annotated[Path | None, typer.Option(help="also write the JSON report (with predictions) here")] = None,
) -> None:
    """ProcessBench protocol: predict each solution's first wrong step, report accuracy on erroneous and on
    correct solutions and their harmonic mean (F1) per file: a table on stderr, the JSON on stdout.
    With --trajectories: the score spread, Brier and step AUROC against --target, and pairwise ranking
    accuracy at held-out states from --candidates, with sample sizes and 95% intervals (JSON on stdout)."""
    if trajectories is not None:
        _eval_trajectories(model, trajectories, target, candidates, margin, gamma, bootstrap, batch_size, output)
        return
    if not processbench:
        from proctor.cli.options import fail

        fail("prm eval: give --processbench FILE or --trajectories STORE")
    from rich.console import Console

    from proctor.prm.model import ProcessRewardModel
    from proctor.prm.processbench import evaluate_file, report, results_table
    from proctor.prm.scoring import PRMScorer

    scorer = PRMScorer(ProcessRewardModel.from_pretrained(model), batch_size=batch_size)
    results = [evaluate_file(scorer, f, threshold, limit) for f in processbench]
    Console(stderr=True).print(results_table(results))
    summary = {"model": str(model), **report(results)}
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        detail = {r.name: {"ids": r.ids, "labels": r.labels, "predicted": r.predicted} for r in results}
        output.write_text(json.dumps({**summary, "predictions": detail}, indent=2))
    typer.echo(json.dumps(summary))


def _eval_trajectories(model: Path, store: Path, target: str | None, candidates: Path | None, margin: float,
                       gamma: float, n_boot: int, batch_size: int, output: Path | None) -> None:
    """`prm eval --trajectories`: the report of `proctor.prm.trajectory_eval` as JSON on stdout."""
    from proctor.cli.options import fail
    from proctor.credit.montecarlo import MCConfig
    from proctor.prm.model import ProcessRewardModel
    from proctor.prm.scoring import PRMScorer
    from proctor.prm.trajectory_eval import evaluate_trajectories
    from proctor.trajectory import TrajectoryStore

    try:
        trajs = TrajectoryStore.open(store).load()
        comps = TrajectoryStore.open(candidates).load() if candidates is not None else None
        scorer = PRMScorer(ProcessRewardModel.from_pretrained(model), batch_size=batch_size)
        report = evaluate_trajectories(scorer, trajs, target=target, completions=comps, margin=margin,
                                       mc=MCConfig(gamma=gamma), n_boot=n_boot, progress=True)
    except (OSError, ValueError) as e:
        fail(e, "prm eval")
    summary = {"model": str(model), "trajectories": str(store), **report}
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(summary, indent=2))
    typer.echo(json.dumps(summary))

"""`proctor prm ...`: train a process reward model from a YAML config, score, serve it over HTTP."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from proctor.cli.root import app

prm_app = typer.Typer(help="Process reward models: train, score, serve.", no_args_is_help=True)
app.add_typer(prm_app, name="prm")

#: the help of a model's --device and --dtype (`proctor.models.loading.placement`)
DEVICE_HELP = "auto (CUDA when torch sees one, else cpu), cpu, cuda, cuda:1, ..."
DTYPE_HELP = "auto (bf16 on a CUDA GPU with bf16, else float32; never bf16 on a CPU), float32, bfloat16, ..."
DeviceOption = Annotated[str, typer.Option("--device", help=f"where the PRM runs: {DEVICE_HELP}")]
DtypeOption = Annotated[str, typer.Option("--dtype", help=f"the PRM's inference dtype: {DTYPE_HELP}")]


@prm_app.command("train")
def train(
    config: Annotated[Path, typer.Argument(help="PRM training YAML (`proctor.prm.config.PRMTrainConfig`)")],
    resume: str | None = typer.Option(None, help="continue from a checkpoint folder of output_dir, or 'last' for "
                                      "the latest (checkpoints: training_args: {save_strategy: steps, save_steps: N})"),
    overwrite: bool = typer.Option(False, "--overwrite", help="train into a non-empty output_dir, writing over "
                                   "what is there"),
    dry_run: bool = typer.Option(False, "--dry-run", help="validate the config and print it with every field "
                                 "resolved (YAML, defaults included) and the inputs it reads, each found here or "
                                 "not; trains nothing"),
) -> None:
    """Train a PRM head on the training engine as CONFIG describes; the PRM is saved to output_dir, with
    prm_train.json (the loss curve). Prints one JSON line: the folder, steps, examples, first and last loss.

    The config, the output folder (new or empty unless --overwrite or --resume), the backbone reference and every
    data row are checked before the model loads; a mistake is one error line naming the file, row or field
    (`proctor --debug prm train ...` for the traceback). --dry-run checks the config alone and prints it resolved."""
    from proctor.cli.dry_run import dry_run_text
    from proctor.cli.errors import user_errors
    from proctor.prm.config import load_config

    with user_errors("prm train"):
        cfg = load_config(config)
    if dry_run:
        typer.echo(dry_run_text("proctor prm train", config, cfg, cfg.inputs()))
        return
    from transformers.utils import logging as hf_logging

    from proctor.prm.trainer import prepare, train_prepared
    from proctor.training.distributed import is_main_process

    hf_logging.disable_progress_bar()  # loading a few dozen tensors needs no bar; training has its progress line
    with user_errors("prm train"):
        prepared = prepare(cfg, overwrite=overwrite, resume=True if resume == "last" else resume)
    result = train_prepared(prepared)
    if not is_main_process():
        return  # under torchrun one summary: the ranks' lines would interleave on a shared stdout
    losses = result.losses
    out = {"output_dir": str(result.output_dir), "steps": result.steps, "examples": result.examples,
           "loss_first": losses[0] if losses else None, "loss_last": losses[-1] if losses else None,
           **({"eval_loss": result.eval_loss} if result.eval_loss is not None else {}), **result.data_report}
    if result.data_report:
        typer.echo(f"data.unlabelled_rows={cfg.data.unlabelled_rows}: {result.data_report} (examples whose "
                   "labelled steps truncation cut away)", err=True)
    typer.echo(json.dumps(out))


@prm_app.command("train-likelihood")
def train_likelihood(
    config: Annotated[Path, typer.Argument(help="LikelihoodPRMConfig YAML (see `proctor.prm.likelihood`)")],
) -> None:
    """Train a likelihood PRM, Q(s, a) = σ(β·log π_θ(a|s) + b), from a policy checkpoint on labelled
    trajectory stores; prints the output folder, examples and the first and last loss as JSON."""
    from proctor.cli.errors import user_errors
    from proctor.cli.options import validated_config
    from proctor.prm.likelihood import LikelihoodPRMConfig, train_likelihood_prm
    from proctor.training.distributed import is_main_process

    cfg = validated_config(config, LikelihoodPRMConfig)
    with user_errors(str(config)):
        out = train_likelihood_prm(cfg)
    if not is_main_process():
        return  # under torchrun one summary: the processes' lines would interleave
    typer.echo(json.dumps({"output_dir": str(cfg.output_dir), "examples": out["examples"], "skipped": out["skipped"],
                           "loss_first": out["curve"][0]["loss"], "loss_last": out["curve"][-1]["loss"],
                           "bias": out["bias"], "wall_s": out["wall_s"]}))


SCORE_HELP = """Score every step with a trained PRM (one forward pass per example or trajectory; labels are
never needed). DATA is one of:

- a trajectory store folder (`proctor rollout --out`, `targets --write-back`): each trajectory rendered with the
  shared prompt renderer, as in training; with --write-back OUT the scores are also written onto the steps
  (Step.scores[--name]) of a new store at OUT (a store holding another run's scores, of another PRM, input or
  --name, is refused before any scoring unless --overwrite; the same run resumes);

- a JSON list or JSONL file (--format): `stepwise` records {"prompt": str, "completions": [str, ...]} (optional
  "id", and "labels", which are ignored); `processbench` (every step of every solution is scored);
  `math_shepherd`; `prm800k`.

Prints one JSON line per example: {"id": ..., "scores": [one float per step]}."""


@prm_app.command("score", help=SCORE_HELP)
def score(
    model: Annotated[Path, typer.Argument(help="PRM folder (prm train's training.output_dir)")],
    data: Annotated[Path, typer.Argument(help="trajectory store folder, or a JSON/JSONL file (see --format)")],
    fmt: str = typer.Option("stepwise", "--format", help="file format: stepwise|math_shepherd|prm800k|processbench"),
    write_back: Annotated[Path | None, typer.Option(
        "--write-back", help="trajectory store: write a copy with Step.scores[--name] filled here")] = None,
    name: Annotated[str, typer.Option("--name", help="the Step.scores key --write-back fills")] = "prm",
    overwrite: Annotated[bool, typer.Option(
        "--overwrite", help="replace what --write-back holds of another run (without it, the same run resumes and "
                            "another is refused)")] = False,
    batch_size: int = typer.Option(8),
    device: DeviceOption = "auto",
    dtype: DtypeOption = "auto",
) -> None:
    from proctor.cli.errors import user_errors
    from proctor.prm.data import DataError
    from proctor.prm.importers import read_for_scoring

    out = None
    with user_errors("prm score"):
        _check_prm_folder(model)
        store = (data / "manifest.json").is_file()
        if data.is_dir() and not store:
            raise DataError(f"{data}: a folder but not a trajectory store (no manifest.json)")
        if write_back is not None and not store:
            raise DataError("--write-back writes Step.scores onto trajectories: DATA must be a trajectory store")
        if store:
            from proctor.store import TrajectoryStore

            trajs = TrajectoryStore.open(data).load()
        else:
            examples = read_for_scoring(data, fmt)
        if write_back is not None:
            out = _scores_store(write_back, model, data, trajs, name, overwrite)
        scorer = _scorer(model, batch_size, device, dtype, trajectories=store)
    with user_errors("prm score"):
        if store:
            scores = _score_in_chunks(scorer.score_trajectories, trajs, "prm score")
            ids = [t.id for t in trajs]
        else:
            scores = _score_in_chunks(scorer.score_examples, examples, "prm score")
            ids = [ex.id if ex.id is not None else ex.meta.get("row") for ex in examples]
    for i, s in zip(ids, scores, strict=True):
        typer.echo(json.dumps({"id": i, "scores": s}))
    if out is not None:
        from proctor.prm.rendering import with_step_scores

        with out:
            stored = {t.id for t in out.load()}  # a resumed run's scores are these same scores
            out.extend(t for t in with_step_scores(trajs, scores, name) if t.id not in stored)
        typer.echo(f"wrote {len(trajs)} trajectories with Step.scores[{name!r}] to {write_back}", err=True)


def _scores_store(write_back: Path, model: Path, data: Path, trajs: list, name: str, overwrite: bool):
    """The --write-back store, claimed for this run (`proctor.outputs`): the PRM (its folder and files), the
    input (its path and trajectories) and the key."""
    from proctor.outputs import fingerprint, model_identity
    from proctor.store import open_for_run

    if write_back.resolve() == data.resolve():
        raise ValueError(f"--write-back {write_back}: the store being scored; write the scored copy to another "
                         "folder")
    identity = {"prm": model_identity(model),
                "input": {"path": str(data.resolve()), "trajectories": fingerprint(t.id for t in trajs)}, "name": name}
    return open_for_run(write_back, "scores", identity, overwrite=overwrite, what="PRM scores")[0]


def _check_prm_folder(model: Path) -> None:
    """A PRM folder must exist and hold prm_config.json (proctor) or config.json (a TRL PRM)."""
    if not model.is_dir():
        raise FileNotFoundError(f"{model}: no such PRM folder")
    if not (model / "prm_config.json").is_file() and not (model / "config.json").is_file():
        raise FileNotFoundError(f"{model}: not a PRM folder (no prm_config.json or config.json); "
                                "train one with `proctor prm train`")


def _scorer(model: Path, batch_size: int, device: str, dtype: str, trajectories: bool = False):
    """The scorer of a PRM folder on `device` in `dtype`, of agent trajectories or (`trajectories=False`) of
    stepwise text by the path `prm_reward_func` takes too (`StepwiseScorer`: a likelihood PRM reads the steps as
    a `stepwise` episode)."""
    from transformers.utils import logging as hf_logging

    from proctor.prm.ref import PRMRef
    from proctor.prm.text_scorer import StepwiseScorer

    hf_logging.disable_progress_bar()  # loading a few dozen tensors needs no bar
    scorer = PRMRef(prm=model, prm_batch=batch_size, device=device, dtype=dtype).open()
    return scorer if trajectories else StepwiseScorer(scorer)


def _not_likelihood(model: Path, what: str) -> None:
    from proctor.prm.likelihood import LIKELIHOOD_FILE, is_likelihood_prm

    if is_likelihood_prm(model):
        raise ValueError(f"{model} is a likelihood PRM ({LIKELIHOOD_FILE}): it scores the actions of agent "
                         f"trajectories (a trajectory store, search, `proctor eval`), not {what}")


def _score_in_chunks(fn, items: list, label: str, chunk: int = 64) -> list[list[float]]:
    """`fn(items)` in chunks, with a progress bar (plain lines when stderr is not a terminal)."""
    from proctor.progress import StageProgress

    out: list[list[float]] = []
    with StageProgress(label, total=len(items), unit="examples") as bar:
        for i in range(0, len(items), chunk):
            out += fn(items[i : i + chunk])
            bar.advance(len(items[i : i + chunk]))
    return out


@prm_app.command("serve")
def serve(
    model: Annotated[Path, typer.Argument(exists=True, file_okay=False, help="PRM folder")],
    host: str = typer.Option("127.0.0.1"),
    port: int = typer.Option(8765),
    batch_size: int = typer.Option(8),
    api_key_env: str | None = typer.Option(None, help="environment variable holding the key clients send as Bearer"),
    limit: list[str] = typer.Option([], help="server bound key=value (repeatable), e.g. max_queue=32"),  # noqa: B008
    device: DeviceOption = "auto",
    dtype: DtypeOption = "auto",
) -> None:
    """HTTP scoring server: POST /score with {"trajectories": [...]} or {"examples": [{prompt, steps}]}, POST
    /score_actions with {"state": {...}, "actions": [...]}."""
    import os

    import uvicorn

    from proctor.cli.errors import user_errors
    from proctor.prm.model import ProcessRewardModel
    from proctor.prm.scoring import PRMScorer
    from proctor.prm.server import make_app
    from proctor.serving.guards import ServerLimits, exposure_warning

    api_key = os.environ.get(api_key_env) if api_key_env else None
    if api_key_env and not api_key:
        raise typer.BadParameter(f"environment variable {api_key_env} is unset or empty", param_hint="--api-key-env")
    if warning := exposure_warning(host, api_key):
        typer.echo(warning, err=True)
    try:
        limits = ServerLimits.from_pairs(limit)
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="--limit") from None
    try:
        _not_likelihood(model, "the HTTP server's text and candidate requests")
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="MODEL") from None
    with user_errors("prm serve"):
        scorer = PRMScorer(ProcessRewardModel.from_pretrained(model, device=device, dtype=dtype), batch_size=batch_size)
    auth = f"API key from ${api_key_env}" if api_key else "no API key"
    typer.echo(f"serving the PRM {model} on http://{host}:{port} ({auth})", err=True)
    uvicorn.run(make_app(scorer, api_key, limits), host=host, port=port)


@prm_app.command("eval")
def evaluate(
    model: Annotated[Path, typer.Option(help="PRM folder")],
    processbench: Annotated[list[Path] | None, typer.Option(
        help="ProcessBench JSON file (repeatable), e.g. gsm8k.json")] = None,
    trajectories: Annotated[Path | None, typer.Option(
        help="held-out trajectory store: score spread, Brier/AUROC vs --target, ranking")] = None,
    target: Annotated[str | None, typer.Option(help="trajectories: the Step.targets key (e.g. mc-q)")] = None,
    candidates: Annotated[Path | None, typer.Option(
        help="trajectories: candidate completions (rollout start.candidates) for pairwise ranking")] = None,
    margin: Annotated[float, typer.Option(help="ranking: min MC-Q difference of a pair")] = 0.2,
    gamma: Annotated[float, typer.Option(help="ranking: the MC-Q discount")] = 0.95,
    bootstrap: Annotated[int, typer.Option(help="bootstrap resamples (over tasks) for intervals")] = 1000,
    threshold: Annotated[float, typer.Option(help="a step scored below this is predicted wrong")] = 0.5,
    tune_on: Annotated[Path | None, typer.Option(
        help="choose the threshold on this ProcessBench file (the F1-best of 0.01..0.99), apply it to the others")
    ] = None,
    limit: Annotated[int | None, typer.Option(
        help="evaluate N solutions per file, with the file's mix of erroneous and correct ones")] = None,
    batch_size: Annotated[int, typer.Option()] = 8,
    output: Annotated[Path | None, typer.Option(help="also write the JSON report (with predictions) here")] = None,
    device: DeviceOption = "auto",
    dtype: DtypeOption = "auto",
) -> None:
    """ProcessBench protocol: predict each solution's first wrong step, report accuracy on erroneous and on
    correct solutions and their harmonic mean (F1) per file: a table on stderr, the JSON on stdout.
    With --trajectories: the score spread, Brier and step AUROC against --target, and pairwise ranking
    accuracy at held-out states from --candidates, with sample sizes and 95% intervals (JSON on stdout)."""
    if trajectories is not None:
        _eval_trajectories(model, trajectories, target, candidates, margin, gamma, bootstrap, batch_size, output,
                           device, dtype)
        return
    from proctor.cli.errors import user_errors
    from proctor.cli.options import fail

    if not processbench:
        fail("prm eval: give --processbench FILE or --trajectories STORE")
    from rich.console import Console

    from proctor.prm.processbench import (
        evaluate_solutions,
        load_solutions,
        report,
        results_table,
        score_solutions,
        sweep_threshold,
    )
    from proctor.progress import StageProgress

    with user_errors("prm eval"):
        _check_prm_folder(model)
        solutions = {f: load_solutions(f, limit) for f in processbench}  # every file read before the model
        tuning = load_solutions(tune_on, limit) if tune_on is not None else []
        scorer = _scorer(model, batch_size, device, dtype)
    total = sum(len(v) for v in solutions.values()) + len(tuning)
    tuned: dict[str, object] = {}
    with user_errors("prm eval"), StageProgress("prm eval", total=total, unit="solutions") as bar:
        if tune_on is not None:
            threshold, curve = sweep_threshold(score_solutions(scorer, tuning, bar),
                                               [int(ex.meta["first_error"]) for ex in tuning])
            tuned = {"threshold": threshold, "tuned_on": str(tune_on), "f1_on_tuning_file": dict(curve)[threshold]}
        results = [evaluate_solutions(scorer, f.stem, ex, threshold, progress=bar) for f, ex in solutions.items()]
    Console(stderr=True).print(results_table(results))
    summary = {"model": str(model), **tuned, **report(results)}
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        detail = {r.name: {"ids": r.ids, "labels": r.labels, "predicted": r.predicted, "scores": r.scores}
                  for r in results}
        output.write_text(json.dumps({**summary, "predictions": detail}, indent=2))
    typer.echo(json.dumps(summary))


def _eval_trajectories(model: Path, store: Path, target: str | None, candidates: Path | None, margin: float,
                       gamma: float, n_boot: int, batch_size: int, output: Path | None, device: str,
                       dtype: str) -> None:
    """`prm eval --trajectories`: the report of `proctor.prm.trajectory_eval` as JSON on stdout."""
    from proctor.cli.errors import user_errors
    from proctor.credit.montecarlo import MCConfig
    from proctor.prm.trajectory_eval import evaluate_trajectories
    from proctor.store import TrajectoryStore

    with user_errors("prm eval"):
        _check_prm_folder(model)
        for flag, path in (("--trajectories", store), ("--candidates", candidates)):
            if path is not None and not (path / "manifest.json").is_file():
                raise FileNotFoundError(f"{flag} {path}: not a trajectory store (no manifest.json)")
        trajs = TrajectoryStore.open(store).load()
        comps = TrajectoryStore.open(candidates).load() if candidates is not None else None
        scorer = _scorer(model, batch_size, device, dtype, trajectories=True)
        report = evaluate_trajectories(scorer, trajs, target=target, completions=comps, margin=margin,
                                       mc=MCConfig(gamma=gamma), n_boot=n_boot, progress=True)
    summary = {"model": str(model), "trajectories": str(store), **report}
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(summary, indent=2))
    typer.echo(json.dumps(summary))

"""What the PRM quality experiments share: rolling out and labelling with the library's stages, training a PRM
with `train_prm` (the code path of `proctor prm train`), and the command-line options.

Every episode runs in the rollout engine (`proctor.rollout.run_rollout`, completions and candidate starts
included) and every label comes from `proctor.credit.stage.run_targets`; nothing here steps an env.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from proctor.credit.stage import TargetsConfig, run_targets
from proctor.prm.config import PRMTrainConfig
from proctor.prm.model import ProcessRewardModel
from proctor.prm.trainer import train_prm
from proctor.rollout import RolloutConfig, run_rollout
from proctor.store import TrajectoryStore
from proctor.trajectory import Trajectory


def roll(out: Path, **fields: Any) -> list[Trajectory]:
    """`run_rollout(RolloutConfig(out=out, **fields))` (resumes: use one `--work` folder per configuration),
    returning the store's episodes."""
    return run_rollout(RolloutConfig(out=out, **fields)).store.load()


def label(method: str, source: Path, out: Path, *, completions: Path | None = None,
          params: dict[str, Any] | None = None, write_back: bool = True) -> tuple[Path, dict[str, Any]]:
    """`run_targets` with the splits kept; returns the store of the labelled trajectories (`out/labelled`,
    with `write_back`) or the records' folder `out`, and the stage summary."""
    labelled = out / "labelled" if write_back else None
    if not (out / "summary.json").exists():
        summary = run_targets(TargetsConfig(method=method, params=params or {}, input=source, out=out,
                                            completions=completions, split="keep", write_back=labelled))
    else:
        summary = json.loads((out / "summary.json").read_text())
    return labelled or out, summary


def train(backbone: str | Path, data: Path, target: str | None, out: Path, args: argparse.Namespace,
          loss: str = "bce", trajectories: Path | None = None) -> tuple[ProcessRewardModel, dict[str, Any]]:
    """Train a scalar-head PRM on `backbone` with `train_prm`: from the trajectories in `data` (their
    `Step.targets[target]`), or, with `trajectories`, from the records `run_targets` wrote to `data` (the
    trajectories they name in that store). Returns the PRM and {train_loss, steps, seconds}."""
    if trajectories is None:
        section = {"train": str(data), "format": "trajectories", "target": target}
    else:
        section = {"train": str(data), "format": "targets", "trajectories": [str(trajectories)]}
    cfg = PRMTrainConfig.model_validate({
        "model": {"backbone": str(backbone), "head": "scalar"},
        "loss": loss,
        "seed": args.seed,
        "packing": args.packing,
        "data": section,
        "output_dir": str(out), "steps": args.max_steps, "learning_rate": args.lr, "batch_size": args.batch_size,
        "lr_scheduler_type": "cosine", "warmup_ratio": max(1, args.max_steps // 20) / args.max_steps,
        "weight_decay": 0.0, "logging_steps": 50, "device": "cpu", "progress": args.progress,
    })
    start = time.perf_counter()
    result = train_prm(cfg, overwrite=True)
    return result.prm, {"train_loss": round(sum(result.losses) / len(result.losses), 4), "steps": result.steps,
                        "seconds": round(time.perf_counter() - start, 1)}


def steps_of(store: Path) -> int:
    return sum(len(t.steps) for t in TrajectoryStore.open(store))


def add_training_args(p: argparse.ArgumentParser) -> None:
    """The backbone, PRM training and run options both experiments take."""
    p.add_argument("--backbone", type=Path, default=None, help="an existing model folder (default: build one)")
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--max-steps", type=int, default=600)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--packing", action=argparse.BooleanOptionalAction, default=True,
                   help="several examples per row (`packing: true`)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples for the intervals")
    p.add_argument("--work", type=Path, default=None, help="keep models and data here (default: a temp dir)")
    p.add_argument("--progress", action="store_true", help="show rollout progress")


def run_in_workdir(run: Callable[[argparse.Namespace, Path], dict[str, Any]], args: argparse.Namespace
                   ) -> dict[str, Any]:
    """Run the experiment in `--work` (or a temporary folder) and print its JSON result."""
    if args.work is not None:
        args.work.mkdir(parents=True, exist_ok=True)
        result = run(args, args.work)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            result = run(args, Path(tmp))
    print(json.dumps(result, indent=2))
    return result

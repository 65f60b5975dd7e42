"""PRM quality on `arithmetic`: does a PRM trained on Math-Shepherd estimates find the wrong steps?

    python experiments/prm_arithmetic.py [--train-tasks 300] [--samples 4] [--completions 8] [--max-steps 600]

1. Roll out the noisy solver (`expert:noisy`, one mistake per step with probability 0.3) on the train split
   (`run_rollout`).
2. Label every step with Math-Shepherd estimates (docs/methods.md §2): `--completions` N completions by the same
   policy from each step prefix (`run_rollout` with `start`), then `run_targets` (`math-shepherd`): hard label
   y_HE = 𝟙[any completion reaches the right answer], soft y_SE = the fraction that does (`--label`). The env's
   ground-truth labels are NOT used for training; the stage reports the labels' agreement with them.
3. Train a PRM from scratch (a tiny Llama built here; its tokenizer is trained on the default corpus with
   digits kept apart, so numbers are digit tokens) with `train_prm`, and, as the ceiling, the same PRM on the
   ground-truth labels (`Step.info["step_correct"]`, written to `Step.targets["ground_truth"]`).
4. Score held-out test-split trajectories of the same policy (`proctor.prm.trajectory_eval`): step AUROC and
   Brier against the ground truth, with bootstrap-over-tasks intervals, for both PRMs.

Prints one JSON object.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from quality_common import add_training_args, label, roll, run_in_workdir, steps_of, train

from proctor.models import build_tiny
from proctor.prm.scoring import PRMScorer
from proctor.prm.trajectory_eval import evaluate_trajectories
from proctor.store import TrajectoryStore
from proctor.trajectory import Trajectory

ENV = {"env": "arithmetic", "batch": 64}
POLICY = {"kind": "expert", "expert": "noisy"}
GT_TARGET = "ground_truth"


def digit_corpus() -> list[str]:
    """The default tiny-model corpus with a space between adjacent digits, so BPE learns no multi-digit
    tokens and every number is read digit by digit."""
    from proctor.models.corpus import default_corpus

    return [re.sub(r"(?<=\d)(?=\d)", " ", t) for t in default_corpus()]


def backbone(root: Path, hidden: int, layers: int) -> Path:
    return build_tiny(root / f"tiny-digits-{hidden}x{layers}", hidden_size=hidden, layers=layers, heads=4,
                      vocab_size=1500, max_position_embeddings=1024, corpus=digit_corpus())


def with_ground_truth(trajs: Sequence[Trajectory], out: Path) -> Path:
    """A store of `trajs` with `Step.targets[GT_TARGET]` = the env's `info["step_correct"]` (0/1)."""
    if (out / "manifest.json").exists():
        return out
    with TrajectoryStore(out, meta={"targets": GT_TARGET}) as store:
        for t in trajs:
            for i, s in enumerate(t.steps):
                if "step_correct" not in s.info:
                    raise KeyError(f"trajectory {t.id} step {i}: no info['step_correct']")
                s.targets[GT_TARGET] = float(s.info["step_correct"])
            store.append(t)
    return out


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    env = {**ENV, "progress": args.progress}
    base = args.backbone or backbone(work, args.hidden, args.layers)
    train_trajs = roll(work / "rollouts-train", **env, agent=POLICY, split="train", tasks=args.train_tasks,
                       samples=args.samples)
    test_trajs = roll(work / "rollouts-test", **env, agent=POLICY, split="test", tasks=args.test_tasks, samples=1)
    comps = roll(work / "completions", **env, agent=POLICY,
                 start={"source": work / "rollouts-train", "prefix_lengths": "steps",
                        "completions": args.completions})
    ms_data, ms_summary = label("math-shepherd", work / "rollouts-train", work / "targets-ms",
                                completions=work / "completions")
    gt_data = with_ground_truth(train_trajs, work / "train-ground-truth")
    test_data = with_ground_truth(test_trajs, work / "test-ground-truth")
    test = TrajectoryStore.open(test_data).load()
    data_s = time.perf_counter() - start
    gt = [s.targets[GT_TARGET] for t in test for s in t.steps]
    result: dict[str, Any] = {
        "env": "arithmetic", "policy": "expert:noisy (rate 0.3)",
        "train": {"tasks": args.train_tasks, "trajectories": len(train_trajs), "steps": steps_of(ms_data),
                  "completions": len(comps), "success": sum(t.success for t in train_trajs) / len(train_trajs)},
        "test": {"tasks": args.test_tasks, "trajectories": len(test), "steps": len(gt),
                 "wrong_step_fraction": 1 - sum(gt) / len(gt)},
        "math_shepherd_labels": {"label": args.label, "n": args.completions,
                                 "vs_ground_truth": ms_summary.get("ground_truth")},
        "data_seconds": round(data_s, 1),
    }
    for name, data, target in (("math_shepherd", ms_data, f"math-shepherd:{args.label}"),
                               ("ground_truth", gt_data, GT_TARGET)):
        prm, info = train(base, data, target, work / f"prm-{name}", args)
        report = evaluate_trajectories(PRMScorer(prm, batch_size=32), test, target=GT_TARGET,
                                       n_boot=args.bootstrap, seed=args.seed)
        result[f"prm_{name}"] = {**info, "vs_ground_truth": report["targets"], "score_spread": report["score_spread"]}
    result["seconds"] = round(time.perf_counter() - start, 1)
    return result


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--train-tasks", type=int, default=300)
    p.add_argument("--samples", type=int, default=4, help="rollouts per train task")
    p.add_argument("--test-tasks", type=int, default=200)
    p.add_argument("--completions", type=int, default=8, help="Math-Shepherd N")
    p.add_argument("--label", choices=("hard", "soft"), default="hard")
    add_training_args(p)
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    return run_in_workdir(run, parse(argv))


if __name__ == "__main__":
    main()

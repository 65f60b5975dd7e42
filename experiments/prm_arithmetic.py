"""PRM quality on `arithmetic`: does a PRM trained on Math-Shepherd estimates find the wrong steps?

    python experiments/prm_arithmetic.py [--train-tasks 300] [--samples 4] [--completions 8] [--max-steps 600]

1. Roll out the noisy solver (`expert:noisy`, one mistake per step with probability 0.3) on the train split.
2. Label every step with Math-Shepherd estimates (docs/methods.md §2): `--completions` N completions by the
   same policy from each step prefix; hard label y_HE = 𝟙[any completion reaches the right answer], soft
   y_SE = the fraction that does (`--label`). The env's ground-truth labels are NOT used for training.
3. Train a PRM from scratch (a tiny Llama built here; its tokenizer is trained on the default corpus with
   digits kept apart, so numbers are digit tokens) with proctor's trainer, and, as the ceiling, the same PRM
   on the ground-truth labels (`Step.info["step_correct"]`).
4. Score held-out test-split trajectories of the same policy and report step AUROC (and accuracy at 0.5)
   against the ground truth, for both PRMs, plus how well the Math-Shepherd labels match the ground truth.

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

from quality_common import add_training_args, complete, run_in_workdir, shepherd_starts, train_on_examples

from proctor.agents.experts import ExpertAgent
from proctor.prompts.render import PromptConfig
from proctor.credit.registry import Sources, run_method
from proctor.envs.registry import EnvSpec
from proctor.models import build_tiny, load_tokenizer
from proctor.prm.data import from_trajectories
from proctor.prm.metrics import auroc, step_accuracy
from proctor.prm.scoring import PRMScorer
from proctor.rollout import rollout
from proctor.trajectory import Trajectory

ENV = EnvSpec("arithmetic", {})
#: the PRM reads problem and steps only: no system turn
PROMPT = PromptConfig(system="", show_admissible=False)
MS_TARGET, GT_TARGET = "math_shepherd", "ground_truth"


def digit_corpus() -> list[str]:
    """The default tiny-model corpus with a space between adjacent digits, so BPE learns no multi-digit
    tokens and every number is read digit by digit."""
    from proctor.models.corpus import default_corpus

    return [re.sub(r"(?<=\d)(?=\d)", " ", t) for t in default_corpus()]


def backbone(root: Path, hidden: int, layers: int) -> Path:
    return build_tiny(root / f"tiny-digits-{hidden}x{layers}", hidden_size=hidden, layers=layers, heads=4,
                      vocab_size=1500, max_position_embeddings=1024, corpus=digit_corpus())


def ground_truth(trajs: Sequence[Trajectory]) -> list[float]:
    """Every step's `info["step_correct"]` as 0/1, in trajectory order; a step without it is an error."""
    out = []
    for t in trajs:
        for i, s in enumerate(t.steps):
            if "step_correct" not in s.info:
                raise KeyError(f"trajectory {t.id} step {i}: no info['step_correct']")
            out.append(float(s.info["step_correct"]))
    return out


def label_math_shepherd(trajs: Sequence[Trajectory], completions: Sequence[Trajectory], label: str) -> None:
    """Write Step.targets[MS_TARGET] (y_HE or y_SE) and Step.targets[GT_TARGET] on every step, in place."""
    records = run_method("math-shepherd", Sources(trajs, completions=completions)).records
    by_step = {(r.trajectory_id, r.step): r.extra[label] for r in records}
    for t in trajs:
        for i, s in enumerate(t.steps):
            s.targets[MS_TARGET] = by_step[(t.id, i)]
            s.targets[GT_TARGET] = float(s.info["step_correct"])


def label_quality(trajs: Sequence[Trajectory]) -> dict[str, float]:
    """How the Math-Shepherd labels of the training steps agree with the ground truth."""
    ms = [s.targets[MS_TARGET] for t in trajs for s in t.steps]
    gt = ground_truth(trajs)
    return {"auroc": auroc(ms, gt), "accuracy": step_accuracy(ms, gt)}


def evaluate(prm: Any, test: Sequence[Trajectory]) -> dict[str, float]:
    scores = [x for s in PRMScorer(prm, batch_size=32).score_trajectories(test, PROMPT) for x in s]
    gt = ground_truth(test)
    return {"auroc": auroc(scores, gt), "step_accuracy": step_accuracy(scores, gt)}


def roll(split: str, tasks: int, samples: int, out: Path, progress: bool) -> list[Trajectory]:
    env = ENV.make()
    ids = env.task_ids(split)[:tasks]
    return rollout(ENV, ExpertAgent("noisy"), ids, out / f"rollouts-{split}", split=split,
                   samples_per_task=samples, batch_size=64, progress=progress).load()


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    base = args.backbone or backbone(work, args.hidden, args.layers)
    train = roll("train", args.train_tasks, args.samples, work, args.progress)
    test = roll("test", args.test_tasks, 1, work, args.progress)
    comps = complete(ENV, ExpertAgent("noisy"), shepherd_starts(train), args.completions)
    label_math_shepherd(train, comps, args.label)
    data_s = time.perf_counter() - start
    tok = load_tokenizer(base)
    result: dict[str, Any] = {
        "env": "arithmetic", "policy": "expert:noisy (rate 0.3)",
        "train": {"tasks": args.train_tasks, "trajectories": len(train),
                  "steps": sum(len(t.steps) for t in train), "completions": len(comps),
                  "success": sum(t.success for t in train) / len(train)},
        "test": {"tasks": args.test_tasks, "trajectories": len(test), "steps": sum(len(t.steps) for t in test),
                 "wrong_step_fraction": 1 - sum(ground_truth(test)) / len(ground_truth(test))},
        "math_shepherd_labels": {"label": args.label, "n": args.completions, **label_quality(train)},
        "data_seconds": round(data_s, 1),
    }
    for name, target in (("math_shepherd", MS_TARGET), ("ground_truth", GT_TARGET)):
        examples = from_trajectories(tok, train, target, PROMPT)
        prm, info = train_on_examples(examples, base, work / f"prm-{name}", max_steps=args.max_steps,
                                      learning_rate=args.lr, batch_size=args.batch_size, seed=args.seed)
        result[f"prm_{name}"] = {**evaluate(prm, test), **info}
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

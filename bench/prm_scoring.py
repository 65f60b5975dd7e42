"""PRM scoring speed: one forward pass per trajectory vs one pass per step prefix, and shared-prefix
best-of-N (KV cache of the history reused) vs scoring each full candidate sequence.

    python bench/prm_scoring.py [--steps 16] [--candidates 16] [--model DIR]

Prints one JSON object; the ratios are measured in the same run on the same model.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

import torch

from proctor.prm.data import StepwiseExample
from proctor.prm.model import ProcessRewardModel
from proctor.prm.scoring import PRMScorer


def timed(fn, repeats: int = 3) -> float:
    fn()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - start) / repeats


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--candidates", type=int, default=16)
    ap.add_argument("--model", default=None, help="backbone folder (default: a tiny Llama built here)")
    args = ap.parse_args()
    torch.set_num_threads(max(1, torch.get_num_threads()))
    if args.model is None:
        from proctor.models import build_tiny

        args.model = str(build_tiny(tempfile.mkdtemp() + "/tiny", hidden_size=256, layers=4, heads=4))
    prm = ProcessRewardModel.build(args.model, "scalar").eval()
    scorer = PRMScorer(prm, batch_size=args.steps)
    obs = "You are in the kitchen. You see a fridge, a counter, a drawer and a stove. "
    ex = StepwiseExample(
        prompt="Task: put a clean mug in the coffee machine. ",
        completions=[f"{obs}go to drawer {k}" for k in range(args.steps)],
        labels=[None] * args.steps,
    )
    prefixes = [
        ex.model_copy(update={"completions": ex.completions[: k + 1], "labels": ex.labels[: k + 1]})
        for k in range(args.steps)
    ]
    one = timed(lambda: scorer.score_examples([ex]))
    per_prefix = timed(lambda: [scorer.score_examples([p]) for p in prefixes])

    tok = prm.tokenizer
    history = prm.tokenize(ex)["input_ids"]
    suffixes = [
        tok(f"{obs}take mug {k} from drawer<|step|>", add_special_tokens=False)["input_ids"]
        for k in range(args.candidates)
    ]
    full = [
        {
            "input_ids": history + s,
            "step_mask": [0] * (len(history) + len(s) - 1) + [1],
            "labels": [-100] * (len(history) + len(s)),
        }
        for s in suffixes
    ]
    naive_scorer = PRMScorer(prm, batch_size=args.candidates)
    shared = timed(lambda: scorer.score_candidates(history, suffixes))
    naive = timed(lambda: naive_scorer.score_features(full))
    a = [s[-1] for s in scorer.score_candidates(history, suffixes)]
    b = [s[-1] for s in naive_scorer.score_features(full)]
    print(
        json.dumps(
            {
                "device": str(prm.device),
                "threads": torch.get_num_threads(),
                "steps": args.steps,
                "trajectory_tokens": len(history),
                "one_pass_s": round(one, 4),
                "per_prefix_s": round(per_prefix, 4),
                "one_pass_speedup": round(per_prefix / one, 2),
                "candidates": args.candidates,
                "suffix_tokens": len(suffixes[0]),
                "shared_prefix_bon_s": round(shared, 4),
                "naive_bon_s": round(naive, 4),
                "shared_prefix_speedup": round(naive / shared, 2),
                "max_abs_diff_shared_vs_naive": max(abs(x - y) for x, y in zip(a, b, strict=True)),
            }
        )
    )


if __name__ == "__main__":
    main()

"""Machine efficiency of PRM training: achieved training FLOP/s divided by the FLOP/s of a plain torch matmul
of the model's width on this machine.

    python bench/prm_flops.py [--hidden 256] [--layers 4] [--steps 20] [--batch 8] [--length 256]

The PRM (tiny Llama, scalar head, soft BCE, packed batches) trains through `proctor.prm.trainer` (the
training engine, optimizer step included; the time includes saving the tiny model) on synthetic stepwise examples. Training FLOPs per token use the standard
estimate 6·N (N = non-embedding parameters; forward 2N, backward 4N) plus the attention scores,
6·2·layers·hidden·context/2 per token for causal attention (context = mean example length). The matmul
reference is [tokens, hidden] @ [hidden, hidden] in float32, best of several runs, same thread count.
Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path

import torch

WORDS = ["open", "the", "drawer", "take", "key", "go", "north", "unlock", "door", "look", "mug", "table"]


def matmul_flops(tokens: int, hidden: int, repeats: int = 10) -> float:
    """Best FLOP/s of [tokens, hidden] @ [hidden, hidden] (2·tokens·hidden² FLOPs)."""
    a, b = torch.randn(tokens, hidden), torch.randn(hidden, hidden)
    a @ b
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - start)
    return 2 * tokens * hidden * hidden / best


def synthetic_examples(n: int, length: int, seed: int):
    from proctor.prm.data import StepwiseExample

    rng = random.Random(seed)
    out = []
    for i in range(n):
        steps = [" ".join(rng.choices(WORDS, k=max(1, length // 8 - 1))) for _ in range(6)]
        labels = [rng.random() < 0.5 for _ in steps]
        out.append(StepwiseExample(prompt="Task: escape. ", completions=steps, labels=labels, id=str(i)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--length", type=int, default=256, help="approximate tokens per example")
    args = ap.parse_args()

    from proctor.models import build_tiny
    from proctor.prm.config import PRMTrainConfig
    from proctor.prm.data import write_stepwise
    from proctor.prm.trainer import prepare, train_prepared

    work = Path(tempfile.mkdtemp(prefix="prm_flops_"))
    model = build_tiny(work / "model", hidden_size=args.hidden, layers=args.layers, heads=4)
    write_stepwise(synthetic_examples(args.steps * args.batch, args.length, 0), work / "train.jsonl")
    cfg = PRMTrainConfig.model_validate(
        {
            "model": {"backbone": str(model), "head": "scalar"},
            "data": {"train": str(work / "train.jsonl")},
            "packing": True,
            "output_dir": str(work / "out"),
            "steps": args.steps,
            "batch_size": args.batch,
            "learning_rate": 1e-4,
            "device": "cpu",
            "progress": False,
        }
    )
    prepared = prepare(cfg)
    result = train_prepared(prepared)
    prm = result.prm
    lengths = [len(f["input_ids"]) for f in prepared.train]
    tokens = sum(lengths[: args.steps * args.batch])
    context = sum(lengths) / len(lengths)
    embed = prm.hf_model.get_input_embeddings().weight.numel()
    n_params = sum(p.numel() for p in prm.parameters()) - embed
    per_token = 6 * n_params + 6 * 2 * args.layers * args.hidden * context / 2
    achieved = per_token * tokens / result.seconds
    reference = matmul_flops(args.batch * int(context), args.hidden)
    print(
        json.dumps(
            {
                "hidden": args.hidden,
                "layers": args.layers,
                "non_embedding_params": n_params,
                "tokens": tokens,
                "mean_example_tokens": context,
                "train_runtime_s": result.seconds,
                "tokens_per_s": tokens / result.seconds,
                "train_flops_per_token": per_token,
                "achieved_train_flop_per_s": achieved,
                "matmul_flop_per_s": reference,
                "efficiency": achieved / reference,
                "torch_threads": torch.get_num_threads(),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()

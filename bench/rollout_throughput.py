"""Rollout throughput: env steps/s of `household` with a tiny local HF model, batched vs one env at a time.

    python bench/rollout_throughput.py [--batch 16] [--episodes 32] [--sequential-episodes 4] [--max-steps 8]
                                       [--hidden-size 64] [--layers 2] [--history K] [--device cpu|cuda]
                                       [--threads N]

Builds (or reuses) a tiny model with `proctor.models.build_tiny`, then runs `proctor.rollout.rollout` twice
in this process on the same household test tasks and the same sampling settings: once with `--batch`
envs stepped together (one `generate` call per step for all of them) and once with batch 1. Steps per
second is the number of env steps taken divided by the wall time of the rollout (model load excluded).
Prints one JSON object with both runs and the ratio batched / sequential.

What batching buys depends on where the agent's time goes. On a GPU, or on a CPU with a model small enough
that each decoding step costs mostly fixed overhead (the default here: hidden 64, 2 layers), one call for
16 envs costs about as much as one call for 1 env. On a 2-core CPU with a larger model (e.g.
`--hidden-size 256 --layers 4`, ~4M parameters) the prompt prefill is compute-bound and batching gains
little: the run reports what it measures either way.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from proctor.envs.base import EnvSpec
from proctor.rollout import rollout, select_tasks, summarize


def timed_rollout(agent: Any, spec: EnvSpec, tasks: list[str], batch: int, out: Path) -> dict[str, Any]:
    start = time.perf_counter()
    store = rollout(spec, agent, tasks, out, batch_size=batch, seed=0, progress=False)
    seconds = time.perf_counter() - start
    trajs = store.load()
    steps = sum(len(t.steps) for t in trajs)
    summary = summarize(trajs)
    return {"batch": batch, "episodes": len(trajs), "env_steps": steps, "seconds": round(seconds, 3),
            "env_steps_per_s": round(steps / seconds, 2), "success_rate": summary.success_rate,
            "invalid_action_rate": round(summary.invalid_action_rate, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--episodes", type=int, default=32, help="episodes of the batched run")
    parser.add_argument("--sequential-episodes", type=int, default=4, help="episodes of the batch-1 run")
    parser.add_argument("--max-steps", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--hidden-size", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--model-dir", default=None, help="default: a cache folder per model size in the temp dir")
    parser.add_argument("--history", type=int, default=None, help="prompt keeps the last K steps (default all)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    args = parser.parse_args()

    import torch

    from proctor.agents.hf import HFAgent
    from proctor.models.tiny import build_tiny

    if args.threads:
        torch.set_num_threads(args.threads)
    model_dir = build_tiny(
        args.model_dir or os.path.join(tempfile.gettempdir(), f"proctor-bench-tiny-{args.hidden_size}x{args.layers}"),
        hidden_size=args.hidden_size, layers=args.layers, heads=max(1, args.hidden_size // 32))
    agent = HFAgent(str(model_dir), prompt={"history": args.history}, temperature=1.0, seed=0,
                    max_new_tokens=args.max_new_tokens, device=args.device)
    params = sum(p.numel() for p in agent.model.parameters())
    spec = EnvSpec("household", {"max_steps": args.max_steps})
    tasks = select_tasks(spec, "test", max(args.episodes, args.sequential_episodes))
    with tempfile.TemporaryDirectory() as tmp:
        batched = timed_rollout(agent, spec, tasks[:args.episodes], args.batch, Path(tmp) / "batched")
        sequential = timed_rollout(agent, spec, tasks[:args.sequential_episodes], 1, Path(tmp) / "sequential")
    print(json.dumps({
        "bench": "rollout_throughput",
        "env": "household",
        "model": {"dir": str(model_dir), "parameters": params, "device": str(agent.model.device),
                  "max_new_tokens": args.max_new_tokens, "temperature": 1.0, "prompt_history": args.history},
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "batched": batched,
        "sequential": sequential,
        "speedup_batched_vs_sequential": round(batched["env_steps_per_s"] / sequential["env_steps_per_s"], 2),
    }, indent=2))


if __name__ == "__main__":
    main()

"""Rollout throughput: env steps/s of `household` with a tiny local HF model, batched vs one env at a time.

    python bench/rollout_throughput.py [--batch 16] [--episodes 32] [--sequential-episodes 4] [--max-steps 8]
                                       [--hidden-size 64] [--layers 2] [--history K] [--prefix-cache N]
                                       [--rounds R] [--device cpu|cuda] [--threads N] [--profile]

Builds (or reuses) a tiny model with `proctor.models.build_tiny`, then runs `proctor.rollout.rollout` in this
process on the same household test tasks with one `HFAgent` (so identical sampling, prompt and cache
settings): with `--batch` envs stepped together (one `generate` call per step for all of them) and with
batch 1, alternating the two `--rounds` times so that both see the same machine load. Steps per second is
the number of env steps taken divided by the wall time of the rollout (model load excluded); each arm
reports its median over the rounds, and the ratio is of the medians. Prints one JSON object.

What batching buys depends on where the agent's time goes. On a GPU, or on a CPU with a model small enough
that each decoding step costs mostly fixed overhead (the default here: hidden 64, 2 layers), one call for
16 envs costs about as much as one call for 1 env. On a 2-core CPU with a larger model (e.g.
`--hidden-size 256 --layers 4`, ~4M parameters) the prompt prefill is compute-bound and batching gains
little: the run reports what it measures either way.

`--profile` runs each arm once more with timers around the agent's `act`, the model's `generate` and every
forward pass (prefill: more than one new position; decode: one), and reports where an env step's time goes:
env and loop, prompt preparation (render, tokenize, prefix cache), `generate`'s own per-token work (sampling,
stopping, cache bookkeeping), prefill and decode forwards; plus decode steps per `generate` call (a batch
decodes until its longest answer ends) and rows per call.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from proctor.envs.registry import EnvSpec
from proctor.rollout import rollout, select_tasks, summarize


def timed_rollout(agent: Any, spec: EnvSpec, tasks: list[str], batch: int, out: Path) -> dict[str, Any]:
    start = time.perf_counter()
    store = rollout(spec, agent, tasks, out, batch_size=batch, seed=0, progress=False)
    seconds = time.perf_counter() - start
    trajs = store.load()
    steps = sum(len(t.steps) for t in trajs)
    summary = summarize(trajs)
    metas = [s.info.get("candidate_meta", {}) for t in trajs for s in t.steps]
    prompt_tokens = sum(m.get("prompt_tokens", 0) for m in metas)
    reused = sum(m.get("reused_prompt_tokens", 0) for m in metas)
    return {"batch": batch, "episodes": len(trajs), "env_steps": steps, "seconds": round(seconds, 3),
            "env_steps_per_s": round(steps / seconds, 2), "success_rate": summary.success_rate,
            "invalid_action_rate": round(summary.invalid_action_rate, 3),
            "mean_prompt_tokens": round(prompt_tokens / max(steps, 1), 1),
            "prompt_tokens_reused": round(reused / max(prompt_tokens, 1), 3)}


class StageTimer:
    """Wall time of an agent's `act`, its model's `generate` and forward passes (see module docstring)."""

    def __init__(self, agent: Any):
        self.agent, self.model = agent, agent.model
        self.seconds = {"act": 0.0, "generate": 0.0, "prefill": 0.0, "decode": 0.0}
        self.counts = {"generate_calls": 0, "rows": 0, "decode_steps": 0, "prefill_tokens": 0}
        self._start = 0.0
        self._kind = "decode"
        self._hooks = [self.model.register_forward_pre_hook(self._pre, with_kwargs=True),
                       self.model.register_forward_hook(self._post)]
        agent.act = self._timed(agent.act, "act")
        self.model.generate = self._timed(self.model.generate, "generate")

    def _timed(self, fn: Any, key: str) -> Any:
        def call(*a: Any, **kw: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                self.seconds[key] += time.perf_counter() - t
                if key == "generate":
                    self.counts["generate_calls"] += 1
                    self.counts["rows"] += kw["input_ids"].shape[0]

        return call

    def _pre(self, module: Any, args: Any, kwargs: dict[str, Any]) -> None:
        ids = kwargs.get("input_ids", args[0] if args else None)
        width = ids.shape[1] if ids is not None else 1
        self._kind = "prefill" if width > 1 else "decode"
        if width > 1:
            self.counts["prefill_tokens"] += int(ids.numel())
        else:
            self.counts["decode_steps"] += 1
        self._start = time.perf_counter()

    def _post(self, module: Any, args: Any, output: Any) -> None:
        self.seconds[self._kind] += time.perf_counter() - self._start

    def remove(self) -> None:
        for h in self._hooks:
            h.remove()
        del self.agent.act, self.model.generate

    def report(self, total_s: float, env_steps: int) -> dict[str, Any]:
        s, c = self.seconds, self.counts
        parts = {"env_and_loop": total_s - s["act"], "prompt_prep": s["act"] - s["generate"],
                 "generate_overhead": s["generate"] - s["prefill"] - s["decode"],
                 "prefill_forward": s["prefill"], "decode_forward": s["decode"]}
        calls = max(c["generate_calls"], 1)
        return {"ms_per_env_step": {k: round(1000 * v / env_steps, 2) for k, v in parts.items()},
                "share": {k: round(v / total_s, 3) for k, v in parts.items()},
                "generate_calls": c["generate_calls"], "rows_per_call": round(c["rows"] / calls, 2),
                "decode_steps_per_call": round(c["decode_steps"] / calls, 2),
                "prefill_tokens_per_call": round(c["prefill_tokens"] / calls, 1),
                "ms_per_decode_step": round(1000 * (s["decode"] + parts["generate_overhead"])
                                            / max(c["decode_steps"], 1), 2)}


def profiled_rollout(agent: Any, spec: EnvSpec, tasks: list[str], batch: int, out: Path) -> dict[str, Any]:
    timer = StageTimer(agent)
    try:
        run = timed_rollout(agent, spec, tasks, batch, out)
    finally:
        timer.remove()
    return {"env_steps": run["env_steps"], "seconds": run["seconds"],
            **timer.report(run["seconds"], run["env_steps"])}


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median steps/s (the lower middle one for an even count), plus every round's rate."""
    ranked = sorted(runs, key=lambda r: r["env_steps_per_s"])
    return {**ranked[(len(ranked) - 1) // 2], "rounds_env_steps_per_s": [r["env_steps_per_s"] for r in runs]}


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
    parser.add_argument("--model", default=None, help="an existing model folder instead (e.g. an SFT policy that "
                        "acts: the untrained tiny model's answers are all invalid and run to --max-new-tokens)")
    parser.add_argument("--prompt", default=None, help="PromptConfig as JSON (default: {\"history\": --history});"
                        " use the one the --model policy was trained with")
    parser.add_argument("--preset", default=None, help="household size preset (default: the env's)")
    parser.add_argument("--history", type=int, default=None, help="prompt keeps the last K steps (default all)")
    parser.add_argument("--prefix-cache", type=int, default=64,
                        help="episodes whose KV cache the agent keeps between steps (0: off)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating batched/sequential rounds")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument("--profile", action="store_true", help="one more timed run per arm: where a step's "
                        "time goes (see module docstring)")
    args = parser.parse_args()

    import torch

    from proctor.agents.hf import HFAgent
    from proctor.models.tiny import build_tiny

    if args.threads:
        torch.set_num_threads(args.threads)
    model_dir = Path(args.model) if args.model else build_tiny(
        args.model_dir or os.path.join(tempfile.gettempdir(), f"proctor-bench-tiny-{args.hidden_size}x{args.layers}"),
        hidden_size=args.hidden_size, layers=args.layers, heads=max(1, args.hidden_size // 32))
    prompt = json.loads(args.prompt) if args.prompt else {"history": args.history}
    agent = HFAgent(str(model_dir), prompt=prompt, temperature=1.0, seed=0,
                    max_new_tokens=args.max_new_tokens, device=args.device, prefix_cache=args.prefix_cache)
    params = sum(p.numel() for p in agent.model.parameters())
    spec = EnvSpec("household", {"max_steps": args.max_steps, **({"preset": args.preset} if args.preset else {})})
    tasks = select_tasks(spec, "test", max(args.episodes, args.sequential_episodes))
    runs: dict[str, list[dict[str, Any]]] = {"batched": [], "sequential": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            runs["batched"].append(timed_rollout(agent, spec, tasks[:args.episodes], args.batch,
                                                 Path(tmp) / f"batched{r}"))
            runs["sequential"].append(timed_rollout(agent, spec, tasks[:args.sequential_episodes], 1,
                                                    Path(tmp) / f"sequential{r}"))
        profile = {"batched": profiled_rollout(agent, spec, tasks[:args.episodes], args.batch, Path(tmp) / "pb"),
                   "sequential": profiled_rollout(agent, spec, tasks[:args.sequential_episodes], 1,
                                                  Path(tmp) / "ps")} if args.profile else None
    batched, sequential = median_run(runs["batched"]), median_run(runs["sequential"])
    print(json.dumps({
        "bench": "rollout_throughput",
        "env": "household",
        "model": {"dir": str(model_dir), "parameters": params, "device": str(agent.model.device),
                  "max_new_tokens": args.max_new_tokens, "temperature": 1.0, "prompt": prompt, "preset": args.preset,
                  "prefix_cache": args.prefix_cache},
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "batched": batched,
        "sequential": sequential,
        "speedup_batched_vs_sequential": round(batched["env_steps_per_s"] / sequential["env_steps_per_s"], 2),
        **({"profile": profile} if profile else {}),
    }, indent=2))


if __name__ == "__main__":
    main()

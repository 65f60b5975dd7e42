"""The `hf` agent with a real model (SmolLM2-135M-Instruct) on `household` (preset small): env steps/s and
generated tokens/s by batch size, prompt history, prefix cache and dtype, against the memory-bandwidth bound.

    python bench/hf_agent_realmodel.py [--model ../shared/models/smollm2-135m-instruct] [--batch 8]
                                       [--max-steps 6] [--b1-episodes 2] [--max-new-tokens 24] [--no-bf16] [--threads N]

The agent is built through the agent registry (`make_agent({"kind": "hf", ...})`, greedy, temperature 0)
and played with the rollout engine (`proctor.rollout.rollout`) on the first household test tasks, each
episode capped at `--max-steps` env steps. Arms (one run each, all in this process, model load excluded):

- `b1`: batch 1, `--b1-episodes` episodes one at a time, full history, prefix cache on, float32 (the reference arm);
- `b8`: `--batch` episodes stepped together (one `generate` call per step for all of them);
- `b1_no_cache`, `b1_last2`, `b1_last2_no_cache`: history last 2 steps (`PromptConfig.history=2`) and/or
  prefix cache off (`prefix_cache=0`);
- `b1_bf16`: the reference arm with the weights in bfloat16 (on a CPU without bf16 matmuls this is slow;
  reported as measured).

The physical anchor: each decoding step of batch 1 reads every weight once (parameter count x bytes per
parameter), so memory bandwidth / weight bytes bounds decode tokens/s. Bandwidth is measured here as the
best of a few copies of a 256 MiB array (bytes read + bytes written per second); decode tokens/s is measured
by `model.generate` on a short prompt with a fixed number of new tokens (N minus 1 new tokens, time
difference, so prefill is excluded). Ratios are of arms of this one run. Prints one JSON object; prints
`{"skipped": ...}` and exits 0 when the model is absent.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

DEFAULT_MODEL = "../shared/models/smollm2-135m-instruct"


def timed_rollout(agent: Any, spec: Any, tasks: list[str], batch: int, out: Path) -> dict[str, Any]:
    from proctor.rollout import rollout, summarize

    start = time.perf_counter()
    store = rollout(spec, agent, tasks, out, batch_size=batch, seed=0, progress=False)
    seconds = time.perf_counter() - start
    trajs = store.load()
    steps = [s for t in trajs for s in t.steps]
    tokens = sum(len(s.token_ids or []) for s in steps)
    metas = [s.info.get("candidate_meta", {}) for s in steps]
    prompt_tokens = sum(m.get("prompt_tokens", 0) for m in metas)
    reused = sum(m.get("reused_prompt_tokens", 0) for m in metas)
    summary = summarize(trajs)
    return {"batch": batch, "episodes": len(trajs), "env_steps": len(steps), "seconds": round(seconds, 2),
            "env_steps_per_s": round(len(steps) / seconds, 3), "generated_tokens": tokens,
            "generated_tokens_per_s": round(tokens / seconds, 2),
            "mean_prompt_tokens": round(prompt_tokens / max(len(steps), 1), 1),
            "prompt_tokens_reused": round(reused / max(prompt_tokens, 1), 3),
            "invalid_action_rate": round(summary.invalid_action_rate, 3), "success_rate": summary.success_rate}


def memory_bandwidth(mib: int = 256, repeats: int = 5) -> float:
    """Bytes per second of the best of `repeats` copies of a `mib` MiB float32 array (read + write)."""
    import numpy as np

    src = np.ones(mib * 2**20 // 4, dtype=np.float32)
    dst = np.empty_like(src)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - start)
    return 2 * src.nbytes / best


def decode_tokens_per_s(model: Any, tokenizer: Any, new_tokens: int = 48) -> float:
    """Batch-1 greedy decode tokens/s: (time for `new_tokens` new tokens - time for 1) / (new_tokens - 1)."""
    import torch

    ids = tokenizer("The kitchen has a table and", return_tensors="pt", add_special_tokens=False)["input_ids"]
    ids = ids.to(model.device)

    def run(n: int) -> float:
        start = time.perf_counter()
        with torch.inference_mode():
            model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=n,
                           min_new_tokens=n, do_sample=False, pad_token_id=tokenizer.pad_token_id)
        return time.perf_counter() - start

    run(2)  # warm-up
    long = min(run(new_tokens) for _ in range(2))
    short = min(run(1) for _ in range(2))
    return (new_tokens - 1) / max(long - short, 1e-9)


def anchor(agent: Any, bandwidth: float) -> dict[str, Any]:
    params = sum(p.numel() for p in agent.model.parameters())
    weight_bytes = sum(p.numel() * p.element_size() for p in agent.model.parameters())
    bound = bandwidth / weight_bytes
    decode = decode_tokens_per_s(agent.model, agent.tokenizer)
    return {"parameters": params, "dtype": str(next(agent.model.parameters()).dtype).removeprefix("torch."),
            "weight_bytes_per_decode_step": weight_bytes, "decode_tokens_per_s_bound": round(bound, 1),
            "decode_tokens_per_s_b1": round(decode, 1), "achieved_over_bound": round(decode / bound, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=DEFAULT_MODEL, help="GGUF folder or converted model folder")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--max-steps", type=int, default=6, help="env steps per episode")
    parser.add_argument("--b1-episodes", type=int, default=2, help="episodes of each batch-1 arm")
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--no-bf16", action="store_true", help="skip the bfloat16 arm")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    args = parser.parse_args()

    if not Path(args.model).exists():
        print(json.dumps({"bench": "hf_agent_realmodel", "skipped": f"model not found: {args.model}"}))
        return

    import torch

    from proctor.agents.prefix_cache import PrefixCache
    from proctor.agents.registry import make_agent
    from proctor.envs.registry import EnvSpec
    from proctor.prompts.render import PromptConfig
    from proctor.rollout import select_tasks

    if args.threads:
        torch.set_num_threads(args.threads)
    spec = EnvSpec("household", {"preset": "small", "max_steps": args.max_steps})
    tasks = select_tasks(spec, "test", max(args.batch, args.b1_episodes))
    bandwidth = memory_bandwidth()

    def build(dtype: str) -> tuple[Any, float]:
        start = time.perf_counter()
        agent = make_agent({"kind": "hf", "model": args.model, "temperature": 0.0, "seed": 0,
                            "max_new_tokens": args.max_new_tokens, "device": args.device, "dtype": dtype,
                            "prefix_cache": 64})
        return agent, time.perf_counter() - start

    def configure(agent: Any, history: int | None, cache: bool) -> None:
        agent.prompt = PromptConfig(history=history)
        agent.prefix_cache = PrefixCache(64) if cache else None

    arms: dict[str, dict[str, Any]] = {}
    agent, load_s = build("float32")
    anchors = {"float32": anchor(agent, bandwidth)}
    with tempfile.TemporaryDirectory() as tmp:
        # warm-up (first-call overheads) on a task none of the timed arms uses
        configure(agent, None, True)
        timed_rollout(agent, EnvSpec("household", {"preset": "small", "max_steps": 1}),
                      select_tasks(spec, "train", 1), 1, Path(tmp) / "warmup")
        for name, history, cache, batch in [("b1", None, True, 1), ("b8", None, True, args.batch),
                                            ("b1_no_cache", None, False, 1), ("b1_last2", 2, True, 1),
                                            ("b1_last2_no_cache", 2, False, 1)]:
            configure(agent, history, cache)
            arms[name] = {"history": history, "prefix_cache": cache, "dtype": "float32",
                          **timed_rollout(agent, spec, tasks[:batch if batch > 1 else args.b1_episodes], batch,
                                        Path(tmp) / name)}
        del agent
        if not args.no_bf16:
            agent, _ = build("bfloat16")
            anchors["bfloat16"] = anchor(agent, bandwidth)
            configure(agent, None, True)
            arms["b1_bf16"] = {"history": None, "prefix_cache": True, "dtype": "bfloat16",
                               **timed_rollout(agent, spec, tasks[:args.b1_episodes], 1, Path(tmp) / "b1_bf16")}

    def ratio(a: str, b: str, key: str = "env_steps_per_s") -> float | None:
        if a not in arms or b not in arms:
            return None
        return round(arms[a][key] / arms[b][key], 2)

    print(json.dumps({
        "bench": "hf_agent_realmodel",
        "env": "household", "env_kwargs": spec.kwargs,
        "model": {"path": args.model, "load_seconds": round(load_s, 1), "max_new_tokens": args.max_new_tokens,
                  "temperature": 0.0, "device": args.device},
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "memory_bandwidth_gb_per_s": round(bandwidth / 1e9, 2),
        "anchor": anchors,
        "arms": arms,
        "ratios": {
            "b8_vs_b1_env_steps_per_s": ratio("b8", "b1"),
            "b8_vs_b1_generated_tokens_per_s": ratio("b8", "b1", "generated_tokens_per_s"),
            "cache_vs_no_cache_full_history": ratio("b1", "b1_no_cache"),
            "cache_vs_no_cache_last2": ratio("b1_last2", "b1_last2_no_cache"),
            "last2_vs_full_no_cache": ratio("b1_last2_no_cache", "b1_no_cache"),
            "last2_vs_full_cache": ratio("b1_last2", "b1"),
            "bf16_vs_f32": ratio("b1_bf16", "b1"),
        },
    }, indent=2))


if __name__ == "__main__":
    main()

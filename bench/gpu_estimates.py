"""Estimated GPU time and memory of one AgentPRM iteration on ALFWorld for 1.5B, 3B and 8B models.

    python bench/gpu_estimates.py                 # one JSON object: the inputs, then per model and stage
    python bench/gpu_estimates.py --markdown      # the tables of docs/guides/gpu-node.md
    python bench/gpu_estimates.py --inputs my.json   # other inputs (the keys of INPUTS, merged over them)

These are ESTIMATES, not measurements: nothing here ran on a GPU. Each number is the arithmetic below applied to
stated inputs (`INPUTS`, each with its source):

- **Workload.** The stages of `examples/alfworld/smollm2.yaml` (SFT, π0's rollouts, the head PRM, the evaluation
  rows, best-of-8 distillation, π1's rows), with the episode and call counts measured by the tiny ALFWorld loop
  (`docs/results/2026-11-28-alfworld-tiny.md`) and the tokens per state measured by `bench/alfworld_tokens.py`
  (SmolLM2's tokenizer; Llama-3's larger vocabulary gives somewhat fewer tokens). A per-state count grows with
  the step t as a + b·t; a stage's states are taken at the mean t of an episode of `episode_steps` steps.
- **FLOPs.** Training: 6·N per token (forward 2·N, backward 4·N) plus causal attention, 6·layers·hidden·context
  per token; a forward pass (the `choice` policy's scoring, PRM scoring): 2·N plus 2·layers·hidden·context.
  N counts the weights that multiply each token (every layer and the output head, not the input embedding).
- **Time.** FLOPs / (the GPU's dense bf16 peak × an assumed utilisation), on 1 GPU (today's `proctor run`: every
  stage in one process) and on 8 (each stage's GPU work split evenly, as data-parallel stages would be). ALFWorld
  itself runs on the CPU: its core-seconds (measured on 2 cores) over the env workers, added to each stage.
- **Memory.** bf16 weights 2 B/param for inference; full fine-tuning with float32 master weights, float32
  gradients and AdamW's two moments 16 B/param, plus activations ≈ 34·hidden bytes per token per layer without
  gradient checkpointing (bf16, attention by SDPA) or 2·hidden with it, and the float32 logits and their gradient,
  8·vocab bytes per token; ZeRO-3 / FSDP over G GPUs divides the 16 B/param by G.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

RESULTS = "docs/results/2026-11-28-alfworld-tiny.md"
TOKENS = "bench/alfworld_tokens.py --games 12 (12 held-out train games, 273 expert states, SmolLM2's tokenizer)"

INPUTS: dict[str, Any] = {
    "models": {  # the shapes of each model's config.json
        "Qwen2.5-1.5B-Instruct": {"hidden": 1536, "layers": 28, "heads": 12, "kv_heads": 2, "head_dim": 128,
                                  "intermediate": 8960, "vocab": 151936, "tied": True, "qkv_bias": True},
        "Llama-3.2-3B-Instruct": {"hidden": 3072, "layers": 28, "heads": 24, "kv_heads": 8, "head_dim": 128,
                                  "intermediate": 8192, "vocab": 128256, "tied": True, "qkv_bias": False},
        "Llama-3.1-8B-Instruct": {"hidden": 4096, "layers": 32, "heads": 32, "kv_heads": 8, "head_dim": 128,
                                  "intermediate": 14336, "vocab": 128256, "tied": False, "qkv_bias": False},
    },
    "gpu": {"name": "H100 SXM (H200: the same compute, 141 GB)", "bf16_peak_flops": 989e12, "memory_gb": 80,
            "h200_memory_gb": 141, "source": "NVIDIA's datasheets, dense bf16 without sparsity"},
    "utilisation": {"train": 0.35, "forward": 0.30,
                    "source": "assumed: HF Trainer / in-process forward passes at 1-8B with padded batches of "
                              "short sequences; the GPU check's SmolLM2 step times (scripts/gpu_check.sh) are "
                              "the first measurement to replace it"},
    "env": {"workers": 32, "reset_core_s": 1.5, "step_core_s": 0.05, "demo_core_s_per_game": 10.4,
            "source": f"{RESULTS} and bench/alfworld_workers.py on 2 cores: 3,163 s for 611 demonstration games "
                      "with 2 workers; a reset 1.5 s, a step 0.05 s; the workers on a GPU node are assumed"},
    "tokens": {  # per state, a + b·t (bench/alfworld_tokens.py)
        "policy_prompt": [174.02, 4.132], "choice_replies": [176.37, 2.723], "prm_prefix": [261.88, 42.63],
        "prm_suffix": [10.47, 0.0], "sft_example": [181.49, 4.123], "expert_steps": 18.1, "source": TOKENS},
    "cpu_check": {  # SmolLM2-135M-Instruct, measured on 2 CPU cores: does the token count account for the time?
        "model": {"hidden": 576, "layers": 30, "heads": 9, "kv_heads": 3, "head_dim": 64, "intermediate": 1536,
                  "vocab": 49152, "tied": True, "qkv_bias": False},
        "sft_s_per_step": 8.7, "choice_s_per_state": 1.6,
        "source": f"{RESULTS}, 'SmolLM2-135M-Instruct: not run' (SFT steps of 8; choice states with 2 env workers, "
                  "game loads included)"},
    "workload": {  # examples/alfworld/smollm2.yaml, one iteration, with the tiny loop's measured counts
        "demo_games": 761, "demo_steps": 13808,
        "sft_steps": 400, "sft_batch": 8,
        "rollout_episodes": 192, "episode_steps": 33.5,
        "prm_steps": 150, "prm_batch": 8,
        "eval_games": 134, "prm_candidates_per_state": 2.02,
        "beam_games": 24, "beam_steps_per_episode": 87.5, "beam_replayed_steps": 11927,
        "distill_states": 500, "distill_epochs": 2,
        "source": f"smollm2.yaml's sections; {RESULTS}: best-of-8 episodes 33.5 steps with 67.8 PRM calls "
                  "(2.02 distinct candidates a state), beam 87.5 steps and 11,927 replayed steps, 13,808 expert "
                  "steps in 761 games; every policy episode is taken as long as best-of-8's"},
}


def param_counts(m: dict[str, Any]) -> dict[str, float]:
    """Parameters of a Llama/Qwen2-style decoder: total, and N, the weights each token multiplies."""
    h, q, kv = m["hidden"], m["heads"] * m["head_dim"], m["kv_heads"] * m["head_dim"]
    attention = h * q + 2 * h * kv + q * h + ((q + 2 * kv) if m["qkv_bias"] else 0)
    layer = attention + 3 * h * m["intermediate"] + 2 * h
    embedding = m["vocab"] * h
    total = m["layers"] * layer + h + embedding * (1 if m["tied"] else 2)
    return {"total": total, "per_token": m["layers"] * layer + embedding}


def at_mean_step(fit: list[float], steps: float) -> float:
    """A per-state count a + b·t at the mean step of an episode of `steps` steps."""
    return fit[0] + fit[1] * (steps - 1) / 2


def stage_work(inputs: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Per stage: tokens trained on (`train`, with their mean context), tokens run forward (`forward`, with
    theirs), and ALFWorld core-seconds (`env_core_s`)."""
    w, tok, env = inputs["workload"], inputs["tokens"], inputs["env"]
    steps = w["episode_steps"]
    policy = at_mean_step(tok["policy_prompt"], steps) + at_mean_step(tok["choice_replies"], steps)
    prm = at_mean_step(tok["prm_prefix"], steps) + w["prm_candidates_per_state"] * tok["prm_suffix"][0]
    sft_example = at_mean_step(tok["sft_example"], tok["expert_steps"])
    prm_example = tok["prm_prefix"][0] + tok["prm_prefix"][1] * (steps - 1) + tok["prm_suffix"][0]
    episode_env = env["reset_core_s"] + env["step_core_s"] * steps
    eval_states = w["eval_games"] * steps
    beam_states = w["beam_games"] * w["beam_steps_per_episode"]

    def stage(train: float = 0, train_ctx: float = 0, forward: float = 0, forward_ctx: float = 0,
              env_core_s: float = 0) -> dict[str, float]:
        return {"train_tokens": train, "train_context": train_ctx, "forward_tokens": forward,
                "forward_context": forward_ctx, "env_core_s": env_core_s}

    policy_row = stage(forward=eval_states * policy, forward_ctx=policy, env_core_s=w["eval_games"] * episode_env)
    bon_row = stage(forward=eval_states * (policy + prm), forward_ctx=(policy + prm) / 2,
                    env_core_s=w["eval_games"] * episode_env)
    return {
        "demos (expert)": stage(env_core_s=w["demo_games"] * env["demo_core_s_per_game"]),
        "SFT → π0": stage(train=w["sft_steps"] * w["sft_batch"] * sft_example, train_ctx=sft_example),
        "π0 rollouts": stage(forward=w["rollout_episodes"] * steps * policy, forward_ctx=policy,
                             env_core_s=w["rollout_episodes"] * episode_env),
        "PRM Q0 (head)": stage(train=w["prm_steps"] * w["prm_batch"] * prm_example, train_ctx=prm_example),
        "eval π0": policy_row,
        "eval best-of-8(π0, Q0)": bon_row,
        "eval beam 2×2": stage(forward=beam_states * (policy + prm), forward_ctx=(policy + prm) / 2,
                               env_core_s=w["beam_games"] * env["reset_core_s"]
                               + (beam_states + w["beam_replayed_steps"]) * env["step_core_s"]),
        "π1: best-of-8 distillation": stage(
            train=w["distill_epochs"] * w["distill_states"] * sft_example, train_ctx=sft_example,
            forward=w["distill_states"] * (policy + prm), forward_ctx=(policy + prm) / 2),
        "eval π1": policy_row,
        "eval best-of-8(π1, Q0)": bon_row,
    }


def flops(work: dict[str, float], n: float, m: dict[str, Any]) -> float:
    """Training 6·N + 6·layers·hidden·context per token; forward 2·N + 2·layers·hidden·context."""
    attention = m["layers"] * m["hidden"]
    return (work["train_tokens"] * (6 * n + 6 * attention * work["train_context"])
            + work["forward_tokens"] * (2 * n + 2 * attention * work["forward_context"]))


def memory_gb(m: dict[str, Any], total: float, tokens: float, gpus: int = 1, checkpointing: bool = False,
              logits: bool = True) -> float:
    """Full fine-tuning's memory on one of `gpus` GPUs (ZeRO-3 / FSDP shards the 16 B/param) for a micro-batch
    of `tokens` tokens on it; `logits`: an LM loss (a scalar-head PRM computes none)."""
    per_layer = (2 if checkpointing else 34) * m["hidden"]
    activations = tokens * (m["layers"] * per_layer + (8 * m["vocab"] if logits else 0))
    return (16 * total / gpus + activations) / 1e9


def cpu_check(inputs: dict[str, Any]) -> dict[str, float]:
    """The FLOP/s that the measured SmolLM2 times imply under this file's token counts and FLOP arithmetic."""
    c, w = inputs["cpu_check"], inputs["workload"]
    n = param_counts(c["model"])["per_token"]
    sft = stage_work({**inputs, "workload": {**w, "sft_steps": 1}})["SFT → π0"]
    state = stage_work({**inputs, "workload": {**w, "eval_games": 1 / w["episode_steps"]}})["eval π0"]
    return {"sft_step_flops": flops(sft, n, c["model"]), "choice_state_flops": flops(state, n, c["model"]),
            "sft_implied_flop_per_s": flops(sft, n, c["model"]) / c["sft_s_per_step"],
            "choice_implied_flop_per_s": flops(state, n, c["model"]) / c["choice_s_per_state"]}


def estimate(inputs: dict[str, Any]) -> dict[str, Any]:
    """Per model: parameters, memory, and per stage the FLOPs and the hours on 1 and 8 GPUs."""
    gpu, util, w = inputs["gpu"], inputs["utilisation"], inputs["workload"]
    work = stage_work(inputs)
    sft_batch_tokens = w["sft_batch"] * at_mean_step(inputs["tokens"]["sft_example"], inputs["tokens"]["expert_steps"])
    prm_batch_tokens = w["prm_batch"] * (inputs["tokens"]["prm_prefix"][0]
                                         + inputs["tokens"]["prm_prefix"][1] * (w["episode_steps"] - 1))
    out: dict[str, Any] = {"estimate": True, "inputs": inputs, "cpu_check": cpu_check(inputs), "models": {}}
    for name, m in inputs["models"].items():
        counts = param_counts(m)
        stages = {}
        for stage, s in work.items():
            f = flops(s, counts["per_token"], m)
            train_f = flops({**s, "forward_tokens": 0}, counts["per_token"], m)
            gpu_s = train_f / (gpu["bf16_peak_flops"] * util["train"]) + (f - train_f) / (
                gpu["bf16_peak_flops"] * util["forward"])
            env_s = s["env_core_s"] / inputs["env"]["workers"]
            stages[stage] = {"flops": f, "gpu_s_1": gpu_s, "env_s": env_s, "hours_1_gpu": (gpu_s + env_s) / 3600,
                             "hours_8_gpus": (gpu_s / 8 + env_s) / 3600}
        out["models"][name] = {
            "params_total": counts["total"], "params_per_token": counts["per_token"],
            "memory_gb": {
                "bf16_weights": 2 * counts["total"] / 1e9,
                "full_ft_states": 16 * counts["total"] / 1e9,
                "sft_1_gpu": memory_gb(m, counts["total"], sft_batch_tokens),
                "prm_1_gpu": memory_gb(m, counts["total"], prm_batch_tokens, logits=False),
                "prm_1_gpu_checkpointing": memory_gb(m, counts["total"], prm_batch_tokens, checkpointing=True,
                                                     logits=False),
                "prm_8_gpus_zero3": memory_gb(m, counts["total"], prm_batch_tokens / 8, gpus=8, logits=False),
            },
            "stages": stages,
            "total_hours_1_gpu": sum(s["hours_1_gpu"] for s in stages.values()),
            "total_hours_8_gpus": sum(s["hours_8_gpus"] for s in stages.values()),
        }
    return out


def markdown(result: dict[str, Any]) -> str:
    """The two tables of docs/guides/gpu-node.md: minutes per stage, and memory."""
    models = result["models"]
    short = [name.split("-Instruct")[0] for name in models]
    lines = ["| stage | " + " | ".join(f"{s}: 1 GPU / 8 GPUs (min)" for s in short) + " |",
             "|---|" + "---|" * len(models)]
    for stage in next(iter(models.values()))["stages"]:
        cells = [f"{60 * m['stages'][stage]['hours_1_gpu']:.1f} / {60 * m['stages'][stage]['hours_8_gpus']:.1f}"
                 for m in models.values()]
        lines.append(f"| {stage} | " + " | ".join(cells) + " |")
    totals = [f"**{60 * m['total_hours_1_gpu']:.0f} / {60 * m['total_hours_8_gpus']:.0f}**" for m in models.values()]
    lines.append("| **one iteration** | " + " | ".join(totals) + " |")
    header = ("| model | parameters | bf16 weights | full fine-tuning states (16 B/param) | SFT, 1 GPU | PRM head, "
              "1 GPU | the same, gradient checkpointing | the same, ZeRO-3 over 8 GPUs (per GPU) |")
    lines += ["", header, "|---|---|---|---|---|---|---|---|"]
    keys = ("bf16_weights", "full_ft_states", "sft_1_gpu", "prm_1_gpu", "prm_1_gpu_checkpointing", "prm_8_gpus_zero3")
    for s, m in zip(short, models.values(), strict=True):
        cells = " | ".join(f"{m['memory_gb'][k]:.0f} GB" for k in keys)
        lines.append(f"| {s} | {m['params_total'] / 1e9:.2f} B | {cells} |")
    return "\n".join(lines)


def merged(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """`base` with `override`'s keys replaced, nested dicts merged key by key."""
    out = dict(base)
    for key, value in override.items():
        out[key] = merged(base[key], value) if isinstance(value, dict) and isinstance(base.get(key), dict) else value
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inputs", type=Path, help="a JSON file of inputs merged over INPUTS")
    ap.add_argument("--markdown", action="store_true", help="print the doc's tables instead of JSON")
    args = ap.parse_args(argv)
    inputs = merged(INPUTS, json.loads(args.inputs.read_text())) if args.inputs else INPUTS
    result = estimate(inputs)
    print(markdown(result) if args.markdown else json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()

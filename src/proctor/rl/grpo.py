"""GRPO and GiGPO over multi-turn agent trajectories, with PPO-style clipping (ALGORITHMS.md §3, §9).

One iteration k = 1..K, readable top to bottom in `train_grpo`:

1. rollouts: K = `group_size` episodes of the current policy per task (`run_rollout`); every step keeps the
   token ids the policy generated (`Step.token_ids`);
2. advantages (`proctor.rl.advantages` on `proctor.rl.groups.group_batch`): GRPO's episode advantage
   A^E = (R − mean)/std over each task's group, given to every step of the episode; or GiGPO's
   A = A^E + ω·A^S, with A^S the step advantage within anchor-state groups (same observation in the group);
3. samples: one per step, the one renderer's prompt for that state and the step's own generated ids as the
   completion (never a re-tokenization; a step without ids is an error), its advantage on every token; steps
   with A = 0 carry no gradient and are left out;
4. old log-probs: recomputed once with the weights that sampled (in eval mode, the same forward pass that
   training runs, so the first ratio is exactly 1); the sampling log-probs stored on the step are compared
   with them and the largest gap is reported (`logprob_drift`);
5. `ppo_epochs` passes in minibatches of the clipped surrogate (`ppo_clip`, ε_low/ε_high, token-mean), plus
   `kl_coef`·KL(π‖π_ref) per token (estimator `k3` by default) to the starting policy when kl_coef > 0;
6. the iterate is saved (`iter-k/policy`) with `iter-k/metrics.json`.

With the `choice` agent the policy is the LM restricted to the admissible actions; the gradient is the
token-level one of the chosen reply, as for generated actions.
"""

from __future__ import annotations

import copy
import logging
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch
from pydantic import Field

from proctor.agents.registry import AgentConfig
from proctor.models.sequences import completion_logprobs
from proctor.progress import StageProgress
from proctor.rl.advantages import gigpo_advantages, grpo_advantages
from proctor.rl.groups import group_batch
from proctor.rl.iteration_log import record_iteration, stage_seconds, write_summary
from proctor.rl.on_policy import OnPolicyConfig, make_sampler, rollout_policy
from proctor.rl.policy_losses import KL_PENALTIES, Aggregation, aggregate, ppo_clip_loss
from proctor.rl.online_config import start_run
from proctor.training.policy import save_policy, trainable_parameters
from proctor.rl.step_rows import StepRow, fill_logprobs, right_aligned, step_row
from proctor.trajectory import Trajectory

log = logging.getLogger(__name__)

class GRPOConfig(OnPolicyConfig):
    """GRPO / GiGPO over multi-turn trajectories (see module docstring); one YAML for `proctor train grpo`."""

    policy: str = Field(description="the starting policy: a model folder or hub name")
    output_dir: Path = Field(description="a new or empty folder")
    env: str
    env_kwargs: dict[str, Any] = Field(default_factory=dict)
    env_module: str | None = None
    split: str = "train"
    tasks: int | list[str] | None = Field(default=None, description="first N tasks of the split, ids, or all")
    group_size: int = Field(default=4, ge=2, description="rollouts per task (the group)")
    batch: int = Field(default=8, ge=1, description="envs stepped together")
    workers: int = Field(default=0, ge=0)
    agent: AgentConfig = Field(description="the policy's agent config; its `model` is filled in (default hf)")
    # advantages
    advantage: Literal["grpo", "gigpo"] = "grpo"
    outcome: Literal["success", "score"] = "success"
    normalize: bool = Field(default=True, description="divide by the group's std")
    omega: float = Field(default=1.0, description="GiGPO: weight of the step advantage")
    gamma: float = Field(default=0.95, gt=0, le=1, description="GiGPO: discount of the return to go")
    step_reward: Literal["outcome", "env"] = "outcome"
    similarity: float | None = Field(default=None, gt=0, le=1, description="GiGPO: anchor similarity threshold")
    # optimisation
    iterations: int = Field(default=1, ge=1)
    ppo_epochs: int = Field(default=1, ge=1, description="passes over each iteration's samples")
    minibatch_size: int = Field(default=16, ge=1, description="steps per optimizer step")
    clip_low: float = Field(default=0.2, gt=0)
    clip_high: float | None = Field(default=None, gt=0, description="None: clip_low (symmetric)")
    aggregation: Aggregation = "token-mean"
    kl_coef: float = Field(default=0.0, ge=0, description="weight of KL(π‖π_ref) to the starting policy")
    kl_estimator: Literal["k1", "k2", "k3", "abs"] = "k3"
    learning_rate: float = Field(default=1e-6, gt=0)
    weight_decay: float = Field(default=0.0, ge=0)
    max_grad_norm: float | None = Field(default=1.0, gt=0)
    lora: dict[str, Any] | None = None
    dtype: str | None = None
    device: str | None = "auto"
    seed: int = 0
    progress: bool = True


@dataclass
class GRPOResult:
    policy_dir: Path
    iterations: list[dict[str, Any]] = field(default_factory=list)


def train_grpo(cfg: GRPOConfig) -> GRPOResult:
    """Run `cfg.iterations` iterations of GRPO / GiGPO (see module docstring); returns the last iterate."""
    policy, tokenizer, _ = start_run(cfg)
    reference = frozen_copy(policy) if cfg.kl_coef > 0 else None
    optimizer = torch.optim.AdamW(trainable_parameters(policy), lr=cfg.learning_rate, weight_decay=cfg.weight_decay)
    pad = tokenizer.pad_token_id
    current, history = cfg.policy, []
    for k in range(1, cfg.iterations + 1):
        folder = cfg.output_dir / f"iter-{k}"
        clock = {"start": time.monotonic()}
        # 1. K rollouts per task with the current policy
        sampler = make_sampler(cfg.agent, policy, tokenizer, current)
        trajs, rollout = rollout_policy(cfg, k, sampler, current, folder / "rollouts", cfg.group_size)
        sampler.close()
        clock["rollout"] = time.monotonic()
        # 2-3. group advantages, one sample per step with A ≠ 0
        samples, adv_stats = step_samples(cfg, trajs, tokenizer)
        if not samples:
            log.warning("iteration %d: every group had equal returns; no gradient this iteration", k)
        # 4. old (and reference) log-probs with the weights that sampled
        drift = fill_logprobs(policy, reference, samples, pad, cfg.minibatch_size)
        clock["advantages"] = time.monotonic()
        # 5. clipped policy-gradient epochs
        steps = optimise(cfg, k, policy, reference, optimizer, samples, pad)
        clock["train"] = time.monotonic()
        # 6. save the iterate
        current = str(save_policy(policy, tokenizer, folder / "policy"))
        clock["save"] = time.monotonic()
        metrics = {"iteration": k, "rollout": rollout, **adv_stats, "samples": len(samples),
                   "logprob_drift": drift, "train": summarize_steps(steps),
                   "wall_s": stage_seconds(clock)}
        record_iteration(folder, metrics, history)
    write_summary(cfg, current, history)
    return GRPOResult(Path(current), history)


# -- the stages, in the order train_grpo runs them -----------------------------------------------------
def frozen_copy(model: torch.nn.Module) -> torch.nn.Module:
    """An eval-mode copy of `model` without gradients (the KL reference)."""
    ref = copy.deepcopy(model).eval()
    for p in ref.parameters():
        p.requires_grad_(False)
    return ref


def step_samples(cfg: GRPOConfig, trajs: Sequence[Trajectory], tokenizer: Any
                 ) -> tuple[list[StepRow], dict[str, Any]]:
    """One `StepRow` per step with a non-zero advantage (see module docstring), and advantage statistics."""
    gb = group_batch(trajs, cfg.outcome, cfg.gamma, cfg.step_reward, cfg.similarity)
    episode = grpo_advantages(gb.returns, gb.groups, cfg.normalize)
    per_step = episode[gb.step_rollout]
    if cfg.advantage == "gigpo":
        per_step, _ = gigpo_advantages(per_step, gb.step_returns, gb.anchors, cfg.omega, cfg.normalize)
    samples = []
    for i, t, a in zip(gb.step_rollout.tolist(), gb.step_index.tolist(), per_step.tolist(), strict=True):
        row = step_row(tokenizer, gb.trajectories[i], t, cfg.prompt)  # a step without token ids is an error
        if a != 0.0:
            row.advantage = float(a)
            samples.append(row)
    stats = {"rollouts": len(gb.trajectories), "steps": int(gb.step_rollout.numel()),
             "mean_return": float(gb.returns.mean()),
             "groups_with_signal": int(sum(float(episode[gb.groups == g].abs().sum()) > 0
                                           for g in gb.groups.unique()))}
    return samples, stats


def optimise(cfg: GRPOConfig, k: int, policy: torch.nn.Module, reference: torch.nn.Module | None,
             optimizer: torch.optim.Optimizer, samples: Sequence[StepRow], pad_id: int) -> list[dict[str, Any]]:
    """`ppo_epochs` shuffled passes of clipped policy-gradient steps over `samples`; one stats dict per step."""
    policy.train()
    rng = random.Random(cfg.seed * 1_000_003 + k)
    kl_fn = KL_PENALTIES.get(cfg.kl_estimator)
    per_epoch = -(-len(samples) // cfg.minibatch_size)
    steps: list[dict[str, Any]] = []
    with StageProgress("grpo train", total=cfg.ppo_epochs * per_epoch, unit="steps", enabled=cfg.progress) as bar:
        for epoch in range(cfg.ppo_epochs):
            order = list(range(len(samples)))
            rng.shuffle(order)
            for start in range(0, len(order), cfg.minibatch_size):
                chunk = [samples[i] for i in order[start:start + cfg.minibatch_size]]
                logps, mask = completion_logprobs(policy, [(s.prompt_ids, s.completion_ids) for s in chunk], pad_id)
                width, dev = mask.shape[1], logps.device
                old = right_aligned([s.old_logprobs for s in chunk], width, dev)
                adv = torch.tensor([s.advantage for s in chunk], device=dev)[:, None].expand_as(logps)
                loss, stats = ppo_clip_loss(logps, old, adv, mask, cfg.clip_low, cfg.clip_high, cfg.aggregation)
                if reference is not None:
                    ref = right_aligned([s.ref_logprobs for s in chunk], width, dev)
                    kl = aggregate(kl_fn(logps, ref), mask, cfg.aggregation)
                    loss = loss + cfg.kl_coef * kl
                    stats["kl"] = float(kl.detach())
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                norm = torch.nn.utils.clip_grad_norm_(trainable_parameters(policy),
                                                      cfg.max_grad_norm or float("inf"))
                optimizer.step()
                steps.append({"epoch": epoch, "loss": loss.item(), "grad_norm": float(norm), **stats})
                bar.advance(1, stats=f"loss {steps[-1]['loss']:.4f}, clipfrac {stats['clipfrac']:.2f}")
    policy.eval()
    return steps


def summarize_steps(steps: Sequence[dict[str, Any]]) -> dict[str, Any]:
    if not steps:
        return {"steps": 0, "log": []}
    keys = ("loss", "clipfrac", "approx_kl", "ratio")
    return {"steps": len(steps), **{f"mean_{k}": sum(s[k] for s in steps) / len(steps) for k in keys},
            "log": list(steps)}

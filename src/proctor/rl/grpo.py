"""GRPO and GiGPO over multi-turn agent trajectories, with PPO-style clipping (docs/methods.md §3, §9).

One iteration k = 1..K, readable top to bottom in `train_grpo`:

1. rollouts: K = `rollouts_per_task` (`group_size`) episodes of the current policy per task (`run_rollout`, on
   the main process, broadcast to every process); every step keeps the token ids the policy generated
   (`Step.token_ids`);
2. advantages (`proctor.rl.advantages` on `proctor.rl.groups.group_batch`): GRPO's episode advantage
   A^E = (R − mean)/std over each task's group, given to every step of the episode; or GiGPO's
   A = A^E + ω·A^S, with A^S the step advantage within anchor-state groups (same observation in the group);
3. samples: one per step, the one renderer's prompt for that state and the step's own generated ids as the
   completion (never a re-tokenization; a step without ids is an error), its advantage on every token; steps
   with A = 0 carry no gradient and are left out;
4. old log-probs: recomputed once with the weights that sampled (in eval mode, the same forward pass and
   autocast that training runs, so the first ratio is exactly 1); the sampling log-probs stored on the step are
   compared with them and the largest gap is reported (`logprob_drift`); with kl_coef > 0 also the reference
   log-probs of the starting policy (`KLReference`: the base model under LoRA, else the starting checkpoint
   loaded once for inference; kl_coef = 0 loads no reference);
5. `ppo_epochs` passes in minibatches of `minibatch_size` rows (the global batch; order from the trainer's own
   generator) on the engine (`proctor.training.fit`, one optimizer step per minibatch): the clipped surrogate
   (`ppo_clip`, ε_low/ε_high) plus `kl_coef`·KL(π‖π_ref) per token (estimator `k3` by default), averaged by
   `aggregation` (token-mean: over the minibatch's tokens) whatever the processes and accumulation steps;
6. the iterate is saved by the main process (`iter-k/policy`) with `iter-k/metrics.json`.

With the `choice` agent the policy is the LM restricted to the admissible actions; the gradient is the
token-level one of the chosen reply, as for generated actions.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch
from pydantic import AliasChoices, Field

from proctor.rl.advantages import gigpo_advantages, grpo_advantages
from proctor.rl.groups import group_batch
from proctor.rl.iteration_log import record_iteration, stage_seconds, write_summary
from proctor.rl.on_policy import sample_rollouts
from proctor.rl.online_config import OnlineConfig, start_run
from proctor.rl.served_policy import generation_server
from proctor.rl.step_rows import ClippedPolicyGradient, KLReference, StepRow, fill_logprobs, step_row
from proctor.training.engine import FitResult, RowLoss, fit, shuffled, shuffled_batches
from proctor.training.policy import save_trained
from proctor.trajectory import Trajectory

log = logging.getLogger(__name__)

class GRPOConfig(OnlineConfig, ClippedPolicyGradient):
    """GRPO / GiGPO over multi-turn trajectories (see module docstring); one YAML for `proctor train grpo`. The
    policy, env, rollout and optimiser fields are `OnlineConfig`'s, the clipped surrogate's
    `ClippedPolicyGradient`'s."""

    rollouts_per_task: int = Field(default=4, ge=2, validation_alias=AliasChoices("rollouts_per_task", "group_size"),
                                   description="rollouts per task per iteration: the group (also `group_size`)")
    # advantages
    advantage: Literal["grpo", "gigpo"] = Field(default="grpo", description="grpo: the episode advantage A^E on "
                                                "every step; gigpo: A^E + ω·A^S")
    outcome: Literal["success", "score"] = Field(default="success", description="the return R of an episode")
    normalize: bool = Field(default=True, description="divide by the group's std")
    omega: float = Field(default=1.0, description="GiGPO: weight of the step advantage")
    gamma: float = Field(default=0.95, gt=0, le=1, description="GiGPO: discount of the return to go")
    step_reward: Literal["outcome", "env"] = Field(default="outcome", description="GiGPO: the rewards of the "
                                                   "return to go: R on the last step, or the env's step rewards")
    similarity: float | None = Field(default=None, gt=0, le=1, description="GiGPO: anchor similarity threshold "
                                     "(None: exact observations)")


@dataclass
class GRPOResult:
    policy_dir: Path
    iterations: list[dict[str, Any]] = field(default_factory=list)


def train_grpo(cfg: GRPOConfig) -> GRPOResult:
    """Run `cfg.iterations` iterations of GRPO / GiGPO (see module docstring); returns the last iterate."""
    policy, tokenizer, device = start_run(cfg)
    reference = KLReference(policy, cfg.policy, device) if cfg.kl_coef > 0 else None
    loss = cfg.policy_loss(tokenizer.pad_token_id)
    current, history = cfg.policy, []
    with generation_server(cfg, policy) as served:
        for k in range(1, cfg.iterations + 1):
            folder = cfg.output_dir / f"iter-{k}"
            clock = {"start": time.monotonic()}
            # 1. K rollouts per task with the current policy (main process)
            trajs, rollout = sample_rollouts(cfg, k, policy, tokenizer, current, folder / "rollouts",
                                             served=served)
            clock["rollout"] = time.monotonic()
            # 2-3. group advantages, one sample per step with A ≠ 0
            samples, adv_stats = step_samples(cfg, trajs, tokenizer)
            if not samples:
                log.warning("iteration %d: every group had equal returns; no gradient this iteration", k)
            # 4. old (and reference) log-probs with the weights that sampled
            drift = fill_logprobs(policy, reference, samples, tokenizer.pad_token_id, cfg.minibatch_size,
                                  cfg.precision)
            clock["advantages"] = time.monotonic()
            # 5. clipped policy-gradient epochs on the engine
            result = train_rows(cfg, k, policy, samples, loss, folder / "trainer", "grpo train")
            clock["train"] = time.monotonic()
            # 6. save the iterate
            current = str(save_trained(policy, tokenizer, folder / "policy", cfg.save_dtype,
                                       result.trainer if result is not None else None))
            clock["save"] = time.monotonic()
            metrics = {"iteration": k, "rollout": rollout, **adv_stats, "samples": len(samples),
                       "logprob_drift": drift, "train": summarize_steps(result),
                       "wall_s": stage_seconds(clock)}
            record_iteration(folder, metrics, history)
    write_summary(cfg, current, history)
    return GRPOResult(Path(current), history)


# -- the stages, in the order train_grpo runs them (shared with ppo) ---------------------------------
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


def train_rows(cfg: Any, k: int, model: torch.nn.Module, rows: Sequence[StepRow], loss: RowLoss, output_dir: Path,
               label: str, opt: Any = None) -> FitResult | None:
    """`cfg.ppo_epochs` passes over `rows` in minibatches of `cfg.minibatch_size` (`shuffled_batches`, iteration
    k's order), one optimizer step each, on the engine with `opt` (default `cfg`); None when there is no step."""
    opt = opt or cfg
    batches, epochs = shuffled_batches(rows, cfg.minibatch_size, cfg.ppo_epochs,
                                       shuffled(random.Random(cfg.seed * 1_000_003 + k)), opt)
    return fit(model, batches, loss, opt, output_dir, label=label, epochs=epochs) if batches else None


def summarize_steps(result: FitResult | None) -> dict[str, Any]:
    """The engine's per-step curve (global means over each step's items, with its epoch), and the means of the
    loss and the PPO statistics over the steps."""
    if result is None or not result.curve:
        return {"steps": 0, "log": []}
    steps = result.curve
    keys = ("loss", "clipfrac", "approx_kl", "ratio")
    return {"steps": len(steps), **{f"mean_{k}": sum(s[k] for s in steps) / len(steps) for k in keys},
            "log": steps}

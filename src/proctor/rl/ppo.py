"""PPO with step-level rewards over multi-turn agent trajectories (SPA-RL; AgentPRM's alternative;
docs/methods.md §9), readable top to bottom in `train_ppo`.

One iteration k = 1..K:

1. rollouts: `rollouts_per_task` episodes of the current policy per task; every step keeps the policy's
   generated token ids;
2. turn rewards r_k (`turn_rewards`): the env's `Step.reward` (`env`), the PRM's score of step k (`prm`,
   AgentPRM's process reward), or SPA's r_k = α·ĉ_k + β·g_k with ĉ_k a progress estimator's score and g_k
   the action's validity (`spa`, `proctor.credit.spa.compose_rewards`); plus w·R on the last step
   (`outcome_weight`, R the outcome). Not SPA's released quirks: the progress scores are used, there is no
   (T−1−k) multiplier, and the data is on-policy;
3. rows: one per step (the state's prompt, the generated ids), with the old log-probs (and, when kl_coef > 0,
   the reference's: `proctor.rl.grpo`'s step 4); the critic (a separate model: the policy's backbone, or
   `critic`, with a scalar head, float32 weights) gives V at every action token;
4. token-level GAE (`trajectory_gae`): a trajectory's action tokens in order, each turn's reward on its last
   token, observation tokens (the prompt of the next turn) skipped, so they are masked out of both losses;
   the last value is V(s_T) when the episode was truncated (step limit) and 0 when it terminated; advantages
   are whitened over the iteration's tokens;
5. `ppo_epochs` passes in minibatches of `minibatch_size` rows on the engine (`proctor.training.fit`), one call
   per model over the same minibatches: the policy's clipped surrogate (`ppo_clip`) plus `kl_coef`·KL(π‖π_ref)
   to the starting policy (`PolicyGradientLoss`), then the critic's clipped value loss (`ValueLoss`) with its
   own optimizer, learning rate (`critic_learning_rate`) and gradient clipping. The two losses share no
   parameter, so this is the interleaved per-minibatch update of each model;
6. the iterate is saved by the main process (`iter-k/policy`, `iter-k/critic`, `iter-k/metrics.json`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Literal

import torch
from pydantic import Field, model_validator

from proctor.credit.outcome import outcome
from proctor.credit.spa import compose_rewards
from proctor.models.sequences import collate_completions
from proctor.prm.model import ProcessRewardModel
from proctor.prm.protocol import StepScorer
from proctor.prm.ref import PRMRef, PRMServer
from proctor.prompts import PromptConfig, prefix_at
from proctor.rl.advantages import gae, whiten
from proctor.rl.grpo import summarize_steps, train_rows
from proctor.rl.iteration_log import record_iteration, stage_seconds, write_summary
from proctor.rl.on_policy import sample_rollouts
from proctor.rl.online_config import OnlineConfig, start_run
from proctor.rl.pairs import prompt_ids
from proctor.rl.policy_losses import LossAggregation, aggregate_loss_sum, value_loss_tokens
from proctor.rl.served_policy import generation_server
from proctor.rl.step_rows import (
    ClippedPolicyGradient,
    KLReference,
    StepRow,
    aggregation_weight,
    fill_logprobs,
    right_aligned,
    step_row,
)
from proctor.training.distributed import barrier, is_main_process, on_main_then_broadcast
from proctor.training.policy import save_trained
from proctor.training.precision import autocast, weights_dtype
from proctor.trajectory import Trajectory


class PPOConfig(OnlineConfig, ClippedPolicyGradient):
    """Step-reward PPO (see module docstring); one YAML for `proctor train ppo`. The policy, env, rollout and
    optimiser fields are `OnlineConfig`'s (`learning_rate` is the policy's), the clipped surrogate's
    `ClippedPolicyGradient`'s (two epochs by default; `aggregation` averages the value loss too)."""

    rollouts_per_task: int = Field(default=4, ge=1, description="episodes per task per iteration")
    # rewards
    reward: Literal["env", "prm", "spa"] = Field(default="env", description="turn rewards: the env's, the PRM's "
                                                 "step scores, or SPA's α·progress + β·validity")
    prm: Path | None = Field(default=None, description="PRM (reward prm) or progress estimator (reward spa)")
    prm_server: PRMServer = None
    prm_prompt: PromptConfig | None = Field(default=None, description="the PRM's prompt config (None: its own)")
    alpha: float = Field(default=1.0, description="spa: weight of the progress score")
    beta: float = Field(default=0.5, description="spa: weight of the validity bonus g_k")
    outcome: Literal["success", "score"] = Field(default="success", description="the outcome R of an episode")
    outcome_weight: float = Field(default=0.0, description="w: w·R added to the last step's reward")
    # critic, GAE, PPO
    critic: str | None = Field(default=None, description="critic backbone (None: the policy's)")
    critic_learning_rate: float = Field(default=1e-5, gt=0, description="peak learning rate of the critic's AdamW")
    gamma: float = Field(default=0.99, ge=0, le=1, description="GAE's discount γ")
    lam: float = Field(default=0.95, ge=0, le=1, description="GAE's λ")
    whiten_advantages: bool = Field(default=True, description="whiten the advantages over the iteration's tokens")
    ppo_epochs: int = ClippedPolicyGradient.field_with("ppo_epochs", default=2)
    value_clip: float | None = Field(default=0.2, gt=0, description="ε of the clipped value loss (None: unclipped)")

    @model_validator(mode="after")
    def _prm_when_needed(self) -> PPOConfig:
        if self.reward in ("prm", "spa") and self.prm is None:
            raise ValueError(f"reward {self.reward!r} needs `prm` (a PRM / progress estimator folder)")
        return self


@dataclass
class PPOResult:
    policy_dir: Path
    critic_dir: Path
    iterations: list[dict[str, Any]] = field(default_factory=list)


def train_ppo(cfg: PPOConfig) -> PPOResult:
    """Run `cfg.iterations` iterations of step-reward PPO (see module docstring); returns the last iterate."""
    policy, tokenizer, device = start_run(cfg)
    critic = ProcessRewardModel.build(cfg.critic or cfg.policy, head="scalar", sigmoid=False,
                                      dtype=weights_dtype(cfg.precision),
                                      gradient_checkpointing=cfg.gradient_checkpointing).to(device)
    scorer = PRMRef(prm=cfg.prm, prm_server=cfg.prm_server, device=device).open() if cfg.prm else None
    reference = KLReference(policy, cfg.policy, device) if cfg.kl_coef > 0 else None
    pad = tokenizer.pad_token_id
    policy_loss = cfg.policy_loss(pad)
    critic_loss = ValueLoss(pad, cfg.value_clip, cfg.aggregation)
    # the critic's checkpointing is the PRM's own (`build`): the Trainer's needs a transformers model
    critic_opt = cfg.model_copy(update={"learning_rate": cfg.critic_learning_rate, "gradient_checkpointing": False})
    current, history = cfg.policy, []
    with generation_server(cfg, policy) as served:
        for k in range(1, cfg.iterations + 1):
            folder = cfg.output_dir / f"iter-{k}"
            clock = {"start": time.monotonic()}
            # 1. rollouts of the current policy (main process)
            trajs, rollout = sample_rollouts(cfg, k, policy, tokenizer, current, folder / "rollouts",
                                             served=served)
            clock["rollout"] = time.monotonic()
            # 2. per-turn rewards (main process: the PRM scores once)
            rewards = on_main_then_broadcast(partial(turn_rewards, cfg, trajs, scorer))
            # 3. one row per step; old log-probs, reference log-probs and old values
            rows = [[step_row(tokenizer, t, i, cfg.prompt) for i in range(len(t.steps))] for t in trajs]
            flat = [r for rs in rows for r in rs]
            drift = fill_logprobs(policy, reference, flat, pad, cfg.minibatch_size, cfg.precision)
            fill_values(critic, flat, pad, cfg.minibatch_size, cfg.precision)
            bootstrap = final_values(critic, tokenizer, trajs, cfg.prompt)
            # 4. token-level GAE over each trajectory's action tokens, whitened
            trajectory_gae(rows, rewards, bootstrap, cfg.gamma, cfg.lam)
            if cfg.whiten_advantages:
                whiten_rows(flat)
            clock["advantages"] = time.monotonic()
            # 5. PPO epochs on the engine: the policy, then the critic over the same minibatches
            trained = train_rows(cfg, k, policy, flat, policy_loss, folder / "trainer", "ppo policy")
            fitted = train_rows(cfg, k, critic, flat, critic_loss, folder / "critic-trainer", "ppo critic",
                                critic_opt)
            clock["train"] = time.monotonic()
            # 6. save the iterate and the critic
            current = str(save_trained(policy, tokenizer, folder / "policy", cfg.save_dtype,
                                       trained.trainer if trained is not None else None))
            critic_dir = folder / "critic"
            if is_main_process():
                critic.save_pretrained(critic_dir)
            barrier()
            clock["save"] = time.monotonic()
            metrics = {"iteration": k, "rollout": rollout, "steps": len(flat), "logprob_drift": drift,
                       "mean_turn_reward": sum(map(sum, rewards)) / len(flat),
                       "train": summarize_ppo(trained, fitted), "wall_s": stage_seconds(clock)}
            record_iteration(folder, metrics, history)
    write_summary(cfg, current, history)
    return PPOResult(Path(current), critic_dir, history)


# -- the stages, in the order train_ppo runs them ------------------------------------------------------
def turn_rewards(cfg: PPOConfig, trajs: Sequence[Trajectory], scorer: StepScorer | None) -> list[list[float]]:
    """r_k for every step of every trajectory (see module docstring, step 2)."""
    scores = scorer.score_trajectories(trajs, cfg.prm_prompt) if scorer is not None else None
    out = []
    for i, t in enumerate(trajs):
        r = outcome(t, cfg.outcome)
        if cfg.reward == "spa":
            out.append(compose_rewards(scores[i], [s.valid for s in t.steps], r, cfg.alpha, cfg.beta,
                                       cfg.outcome_weight))
            continue
        base = [s.reward for s in t.steps] if cfg.reward == "env" else list(scores[i])
        base[-1] += cfg.outcome_weight * r
        out.append(base)
    return out


def critic_values(critic: ProcessRewardModel, pairs: Sequence[tuple[list[int], list[int]]], pad_id: int
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """(V before each completion token [B, K] right-aligned, mask [B, K]): the critic's output at the position
    that predicts the token (the state the token is chosen in)."""
    batch = collate_completions(pairs, pad_id)
    dev = next(critic.parameters()).device
    out = critic(batch.input_ids.to(dev), attention_mask=batch.attention_mask.to(dev),
                 position_ids=batch.position_ids.to(dev)).logits.float()
    k = batch.completion_mask.shape[1]
    return out[:, -k - 1:-1], batch.completion_mask.to(dev)


@torch.no_grad()
def fill_values(critic: ProcessRewardModel, rows: Sequence[StepRow], pad_id: int, batch_size: int,
                precision: str = "fp32") -> None:
    """Set every row's `old_values` (V at each completion token), in eval mode under the engine's autocast of
    `precision`."""
    critic.eval()
    with autocast(precision, str(critic.device)):
        for i in range(0, len(rows), batch_size):
            chunk = rows[i:i + batch_size]
            values, mask = critic_values(critic, [(r.prompt_ids, r.completion_ids) for r in chunk], pad_id)
            for b, r in enumerate(chunk):
                r.old_values = values[b][mask[b].bool()].float().cpu().tolist()


@torch.no_grad()
def final_values(critic: ProcessRewardModel, tokenizer: Any, trajs: Sequence[Trajectory], cfg: PromptConfig
                 ) -> list[float]:
    """V(s_T) of each trajectory's final state when it was truncated (the step limit), 0 when it terminated."""
    out = [0.0] * len(trajs)
    truncated = [i for i, t in enumerate(trajs) if not t.steps[-1].terminated]
    critic.eval()
    for i in truncated:
        ids = prompt_ids(tokenizer, prefix_at(trajs[i], len(trajs[i].steps)), cfg)
        logits = critic(torch.tensor([ids], device=critic.device)).logits
        out[i] = float(logits[0, -1])
    return out


def trajectory_gae(rows: Sequence[Sequence[StepRow]], rewards: Sequence[Sequence[float]],
                   bootstrap: Sequence[float], gamma: float, lam: float) -> None:
    """Set `token_advantages` and `returns` of every row: GAE over each trajectory's action tokens in order,
    turn k's reward on its last token, V(s_T) = `bootstrap` after the last token (see module docstring)."""
    lengths = [sum(len(r.completion_ids) for r in rs) for rs in rows]
    width = max(lengths)
    r_t = torch.zeros((len(rows), width), dtype=torch.float64)
    v_t = torch.zeros((len(rows), width), dtype=torch.float64)
    mask = torch.zeros((len(rows), width), dtype=torch.bool)
    for i, (rs, rw) in enumerate(zip(rows, rewards, strict=True)):
        if len(rs) != len(rw):
            raise ValueError(f"trajectory {i}: {len(rs)} rows but {len(rw)} turn rewards")
        at = 0
        for row, reward in zip(rs, rw, strict=True):
            n = len(row.completion_ids)
            if len(row.old_values) != n:
                raise ValueError(f"row {row.where}: {len(row.old_values)} values for {n} tokens")
            v_t[i, at:at + n] = torch.tensor(row.old_values, dtype=torch.float64)
            r_t[i, at + n - 1] = reward
            at += n
        mask[i, :at] = True
    adv, ret = gae(r_t, v_t, mask, gamma, lam, torch.tensor(list(bootstrap), dtype=torch.float64))
    for i, rs in enumerate(rows):
        at = 0
        for row in rs:
            n = len(row.completion_ids)
            row.token_advantages = adv[i, at:at + n].tolist()
            row.returns = ret[i, at:at + n].tolist()
            at += n


def whiten_rows(rows: Sequence[StepRow]) -> None:
    """Whiten the token advantages over all rows (`proctor.rl.advantages.whiten`)."""
    flat = torch.tensor([a for r in rows for a in r.token_advantages], dtype=torch.float64)
    white = whiten(flat, torch.ones_like(flat, dtype=torch.bool)).tolist()
    at = 0
    for r in rows:
        r.token_advantages = white[at:at + len(r.token_advantages)]
        at += len(r.token_advantages)


class ValueLoss:
    """The engine's `RowLoss` of the critic: the clipped value loss (`value_loss_tokens`, against the rows'
    `returns` and `old_values`) summed over the aggregation's items, which the weight counts (as
    `PolicyGradientLoss`)."""

    def __init__(self, pad_id: int, clip: float | None, aggregation: LossAggregation):
        self.pad_id, self.clip, self.aggregation = pad_id, clip, aggregation

    def weight(self, rows: Sequence[StepRow]) -> float:
        return aggregation_weight(rows, self.aggregation)

    def __call__(self, critic: torch.nn.Module, rows: Sequence[StepRow]) -> tuple[torch.Tensor, dict[str, Any]]:
        values, mask = critic_values(critic, [(r.prompt_ids, r.completion_ids) for r in rows], self.pad_id)
        width, dev = mask.shape[1], values.device
        loss = value_loss_tokens(values, right_aligned([r.returns for r in rows], width, dev),
                                 right_aligned([r.old_values for r in rows], width, dev), self.clip)
        return aggregate_loss_sum(loss, mask, self.aggregation), {}


def summarize_ppo(trained: Any, fitted: Any) -> dict[str, Any]:
    """`summarize_steps` of the policy, each step with the critic's `value_loss` on the same minibatch."""
    out = summarize_steps(trained)
    if fitted is not None and fitted.curve:
        for step, critic_step in zip(out["log"], fitted.curve, strict=True):
            step["value_loss"] = critic_step["loss"]
        out["value_loss_first"] = fitted.curve[0]["loss"]
        out["value_loss_last"] = fitted.curve[-1]["loss"]
    return out

"""PPO with step-level rewards over multi-turn agent trajectories (SPA-RL; AgentPRM's alternative;
ALGORITHMS.md §9), readable top to bottom in `train_ppo`.

One iteration k = 1..K:

1. rollouts: `rollouts_per_task` episodes of the current policy per task; every step keeps the policy's
   generated token ids;
2. turn rewards r_k (`turn_rewards`): the env's `Step.reward` (`env`), the PRM's score of step k (`prm`,
   AgentPRM's process reward), or SPA's r_k = α·ĉ_k + β·g_k with ĉ_k a progress estimator's score and g_k
   the action's validity (`spa`, `proctor.credit.progress.compose_rewards`); plus w·R on the last step
   (`outcome_weight`, R the outcome). Not SPA's released quirks: the progress scores are used, there is no
   (T−1−k) multiplier, and the data is on-policy;
3. rows: one per step (the state's prompt, the generated ids); the critic (a separate model: the policy's
   backbone, or `critic`, with a scalar head) gives V at every action token;
4. token-level GAE (`trajectory_gae`): a trajectory's action tokens in order, each turn's reward on its last
   token, observation tokens (the prompt of the next turn) skipped, so they are masked out of both losses;
   the last value is V(s_T) when the episode was truncated (step limit) and 0 when it terminated; advantages
   are whitened over the iteration's tokens;
5. `ppo_epochs` passes in minibatches: the clipped surrogate (`ppo_clip`) plus `kl_coef`·KL(π‖π_ref) to the
   starting policy for the policy, the clipped value loss for the critic (each with its own optimizer);
6. the iterate is saved (`iter-k/policy`, `iter-k/critic`, `iter-k/metrics.json`).
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch
from pydantic import Field, model_validator

from proctor.credit.outcome import outcome
from proctor.credit.progress import compose_rewards
from proctor.models.sequences import collate_completions, completion_logprobs
from proctor.prm.likelihood import open_scorer
from proctor.prm.model import ProcessRewardModel
from proctor.prm.scoring import PRMScorer
from proctor.progress import StageProgress
from proctor.prompts import PromptConfig, prefix_at
from proctor.rl.advantages import gae, whiten
from proctor.rl.grpo import frozen_copy, summarize_steps
from proctor.rl.iteration_log import record_iteration, stage_seconds, write_summary
from proctor.rl.on_policy import make_sampler, rollout_policy
from proctor.rl.online_config import OnlineConfig
from proctor.rl.pairs import prompt_ids
from proctor.rl.policy_losses import KL_PENALTIES, Aggregation, aggregate, ppo_clip_loss, value_loss
from proctor.rl.online_config import start_run
from proctor.training.policy import save_policy, trainable_parameters
from proctor.rl.step_rows import StepRow, fill_logprobs, right_aligned, step_row
from proctor.trajectory import Trajectory


class PPOConfig(OnlineConfig):
    """Step-reward PPO (see module docstring); one YAML for `proctor train ppo`. The policy, env, rollout and
    optimiser fields are `OnlineConfig`'s."""

    rollouts_per_task: int = Field(default=4, ge=1)
    # rewards
    reward: Literal["env", "prm", "spa"] = "env"
    prm: Path | None = Field(default=None, description="PRM (reward prm) or progress estimator (reward spa)")
    prm_prompt: PromptConfig | None = None
    alpha: float = Field(default=1.0, description="spa: weight of the progress score")
    beta: float = Field(default=0.5, description="spa: weight of the validity bonus g_k")
    outcome: Literal["success", "score"] = "success"
    outcome_weight: float = Field(default=0.0, description="w: w·R added to the last step's reward")
    # critic, GAE, PPO
    critic: str | None = Field(default=None, description="critic backbone (None: the policy's)")
    critic_learning_rate: float = Field(default=1e-5, gt=0)
    gamma: float = Field(default=0.99, ge=0, le=1)
    lam: float = Field(default=0.95, ge=0, le=1)
    whiten_advantages: bool = True
    ppo_epochs: int = Field(default=2, ge=1)
    minibatch_size: int = Field(default=16, ge=1, description="steps per optimizer step")
    clip_low: float = Field(default=0.2, gt=0)
    clip_high: float | None = Field(default=None, gt=0)
    value_clip: float | None = Field(default=0.2, gt=0)
    aggregation: Aggregation = "token-mean"
    kl_coef: float = Field(default=0.0, ge=0)
    kl_estimator: Literal["k1", "k2", "k3", "abs"] = "k3"

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
    critic = ProcessRewardModel.build(cfg.critic or cfg.policy, head="scalar", sigmoid=False, dtype=cfg.dtype)
    critic.to(device or "cpu")
    scorer = open_scorer(cfg.prm, device=device) if cfg.prm else None
    reference = frozen_copy(policy) if cfg.kl_coef > 0 else None
    opt_policy = torch.optim.AdamW(trainable_parameters(policy), lr=cfg.learning_rate, weight_decay=cfg.weight_decay)
    opt_critic = torch.optim.AdamW(trainable_parameters(critic), lr=cfg.critic_learning_rate)
    pad = tokenizer.pad_token_id
    current, history = cfg.policy, []
    for k in range(1, cfg.iterations + 1):
        folder = cfg.output_dir / f"iter-{k}"
        clock = {"start": time.monotonic()}
        # 1. rollouts of the current policy
        sampler = make_sampler(cfg.agent, policy, tokenizer, current)
        trajs, rollout = rollout_policy(cfg, k, sampler, current, folder / "rollouts", cfg.rollouts_per_task)
        sampler.close()
        clock["rollout"] = time.monotonic()
        # 2. per-turn rewards
        rewards = turn_rewards(cfg, trajs, scorer)
        # 3. one row per step; old log-probs, reference log-probs and old values
        rows = [[step_row(tokenizer, t, i, cfg.prompt) for i in range(len(t.steps))] for t in trajs]
        flat = [r for rs in rows for r in rs]
        drift = fill_logprobs(policy, reference, flat, pad, cfg.minibatch_size)
        fill_values(critic, flat, pad, cfg.minibatch_size)
        bootstrap = final_values(critic, tokenizer, trajs, cfg.prompt, pad)
        # 4. token-level GAE over each trajectory's action tokens, whitened
        trajectory_gae(rows, rewards, bootstrap, cfg.gamma, cfg.lam)
        if cfg.whiten_advantages:
            whiten_rows(flat)
        clock["advantages"] = time.monotonic()
        # 5. PPO epochs for the policy and the critic
        steps = optimise(cfg, k, policy, critic, reference, opt_policy, opt_critic, flat, pad)
        clock["train"] = time.monotonic()
        # 6. save the iterate and the critic
        current = str(save_policy(policy, tokenizer, folder / "policy"))
        critic_dir = critic.save_pretrained(folder / "critic")
        clock["save"] = time.monotonic()
        metrics = {"iteration": k, "rollout": rollout, "steps": len(flat), "logprob_drift": drift,
                   "mean_turn_reward": sum(map(sum, rewards)) / len(flat), "train": summarize_ppo(steps),
                   "wall_s": stage_seconds(clock)}
        record_iteration(folder, metrics, history)
    write_summary(cfg, current, history)
    return PPOResult(Path(current), Path(critic_dir), history)


# -- the stages, in the order train_ppo runs them ------------------------------------------------------
def turn_rewards(cfg: PPOConfig, trajs: Sequence[Trajectory], scorer: PRMScorer | None) -> list[list[float]]:
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
    dev = critic.device
    out = critic(batch.input_ids.to(dev), attention_mask=batch.attention_mask.to(dev),
                 position_ids=batch.position_ids.to(dev)).logits.float()
    k = batch.completion_mask.shape[1]
    return out[:, -k - 1:-1], batch.completion_mask.to(dev)


@torch.no_grad()
def fill_values(critic: ProcessRewardModel, rows: Sequence[StepRow], pad_id: int, batch_size: int) -> None:
    critic.eval()
    for i in range(0, len(rows), batch_size):
        chunk = rows[i:i + batch_size]
        values, mask = critic_values(critic, [(r.prompt_ids, r.completion_ids) for r in chunk], pad_id)
        for b, r in enumerate(chunk):
            r.old_values = values[b][mask[b].bool()].cpu().tolist()


@torch.no_grad()
def final_values(critic: ProcessRewardModel, tokenizer: Any, trajs: Sequence[Trajectory], cfg: PromptConfig,
                 pad_id: int) -> list[float]:
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


def optimise(cfg: PPOConfig, k: int, policy: torch.nn.Module, critic: ProcessRewardModel,
             reference: torch.nn.Module | None, opt_policy: torch.optim.Optimizer, opt_critic: torch.optim.Optimizer,
             rows: Sequence[StepRow], pad_id: int) -> list[dict[str, Any]]:
    """`ppo_epochs` shuffled passes; each minibatch updates the policy (clipped surrogate + KL) and the critic
    (clipped value loss). One stats dict per minibatch."""
    policy.train()
    critic.train()
    rng = random.Random(cfg.seed * 1_000_003 + k)
    kl_fn = KL_PENALTIES.get(cfg.kl_estimator)
    per_epoch = -(-len(rows) // cfg.minibatch_size)
    steps: list[dict[str, Any]] = []
    with StageProgress("ppo train", total=cfg.ppo_epochs * per_epoch, unit="steps", enabled=cfg.progress) as bar:
        for epoch in range(cfg.ppo_epochs):
            order = list(range(len(rows)))
            rng.shuffle(order)
            for start in range(0, len(order), cfg.minibatch_size):
                chunk = [rows[i] for i in order[start:start + cfg.minibatch_size]]
                pairs = [(r.prompt_ids, r.completion_ids) for r in chunk]
                logps, mask = completion_logprobs(policy, pairs, pad_id)
                width, dev = mask.shape[1], logps.device
                old = right_aligned([r.old_logprobs for r in chunk], width, dev)
                adv = right_aligned([r.token_advantages for r in chunk], width, dev)
                loss, stats = ppo_clip_loss(logps, old, adv, mask, cfg.clip_low, cfg.clip_high, cfg.aggregation)
                if reference is not None:
                    kl = aggregate(kl_fn(logps, right_aligned([r.ref_logprobs for r in chunk], width, dev)), mask,
                                   cfg.aggregation)
                    loss = loss + cfg.kl_coef * kl
                    stats["kl"] = float(kl.detach())
                opt_policy.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(trainable_parameters(policy), cfg.max_grad_norm or float("inf"))
                opt_policy.step()
                values, vmask = critic_values(critic, pairs, pad_id)
                vdev = values.device
                vloss = value_loss(values, right_aligned([r.returns for r in chunk], width, vdev), vmask,
                                   right_aligned([r.old_values for r in chunk], width, vdev), cfg.value_clip,
                                   cfg.aggregation)
                opt_critic.zero_grad(set_to_none=True)
                vloss.backward()
                torch.nn.utils.clip_grad_norm_(trainable_parameters(critic), cfg.max_grad_norm or float("inf"))
                opt_critic.step()
                steps.append({"epoch": epoch, "loss": loss.item(), "value_loss": vloss.item(), **stats})
                bar.advance(1, stats=f"loss {steps[-1]['loss']:.4f}, value loss {steps[-1]['value_loss']:.4f}")
    policy.eval()
    critic.eval()
    return steps


def summarize_ppo(steps: Sequence[dict[str, Any]]) -> dict[str, Any]:
    out = summarize_steps(steps)
    if steps:
        out["value_loss_first"] = steps[0]["value_loss"]
        out["value_loss_last"] = steps[-1]["value_loss"]
    return out

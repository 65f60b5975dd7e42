"""ArCHer (Zhou et al. 2024, arXiv 2402.19446; docs/methods.md §9): an off-policy utterance-level critic and a
token-level policy gradient, readable top to bottom in `train_archer`; online CHAI is the same loop with a
frozen LM acting through the critic (`proctor.rl.chai`).

One iteration k = 1..K:

1. rollouts: `rollouts_per_task` episodes per task of the current policy (every step keeps the generated ids and
   their sampling log-probs), or, with `candidates` = K > 1, of the best of K policy samples by the critic's
   min(Q₁, Q₂) (CHAI);
2. the steps go into the replay buffer (`proctor.rl.replay`, columnar, saved as `replay.parquet`);
3. `critic_updates` TD steps on uniform replay minibatches (`proctor.rl.critic.critic_loss`): Q_i towards
   r + γ(1 − d)·V̄(s') with d = 1 only at termination (a truncated episode bootstraps), V_i towards Q̄(s, a);
   after each step the target critic follows by Polyak averaging, ψ̄ ← τψ + (1 − τ)ψ̄;
4. after `warmup_iterations` critic-only iterations, `actor_epochs` passes of the token-level policy gradient
   on this iteration's steps (on-policy samples; ArCHer's code draws fresh actions at replay states instead):
   ℓ = −A·Σ_h log π(a^h | s, a^{<h}) with A = min(Q₁, Q₂)(s, a) − min(V₁, V₂)(s) from the critic (optionally
   whitened over the iteration's steps, `whiten_advantages`), on the stored generated ids (`aggregation`
   seq-mean-token-sum; `logprob_drift` compares the sampling log-probs). `baseline: expected` replaces the
   learned V by V^π(s) = Σ_a π(a|s)·min(Q₁, Q₂)(s, a) over the admissible actions (`proctor.rl.expected_baseline`);
   `kl_coef` adds kl_coef·KL(π‖π₀) per token to the starting policy (estimator `kl_estimator`, as GRPO's);
   `actor_loss: ppo-clip` replaces −A·log π by PPO's clipped surrogate against the sampling policy (a trust
   region per iteration; ArCHer's actor is the plain policy gradient);
5. the iterate is saved: `iter-k/policy` (when the actor trained), `iter-k/critic`, `iter-k/metrics.json`.

Every optimizer step runs on the training engine (`proctor.training.fit`): per iteration one `fit` of the critic
over its `critic_updates` replay minibatches (its own learning rate, `critic_parameter_groups`; the Polyak update
follows each optimizer step, `polyak_after_each_step`) and one `fit` of the actor over the shuffled minibatches
of its `actor_epochs` passes; the AdamW state starts afresh with each `fit`. Under torchrun the main process
rolls out and its trajectories are broadcast (`sample_rollouts`); every process trains on its share of each
minibatch, and only the main process writes. The KL reference π₀ is `KLReference`: the policy with its LoRA
adapters off, or, without LoRA, the starting policy loaded once (frozen).
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Literal

import torch
from pydantic import Field, model_validator

from proctor.rl.advantages import whiten
from proctor.rl.critic import CriticChoiceAgent, UtteranceCritic, check_same_tokenizer, critic_loss
from proctor.rl.expected_baseline import expected_baselines
from proctor.rl.iteration_log import record_iteration, stage_seconds, write_summary
from proctor.rl.likelihood_critic import LikelihoodCritic
from proctor.rl.on_policy import sample_rollouts
from proctor.rl.online_config import OnlineConfig, start_run
from proctor.rl.policy_losses import LossAggregation
from proctor.rl.replay import ReplayBuffer, ReplayTransition, transitions
from proctor.rl.served_policy import generation_server
from proctor.rl.step_rows import (
    ClippedPolicyGradient,
    KLEstimator,
    KLReference,
    PolicyGradientLoss,
    StepRow,
    fill_logprobs,
)
from proctor.rl.td import archer_advantage, polyak_update
from proctor.training.distributed import is_main_process
from proctor.training.engine import fit, shuffled, shuffled_batches
from proctor.training.policy import frozen_copy, save_trained, trainable_parameters
from proctor.training.precision import weights_dtype

REPLAY_FILE = "replay.parquet"
Critic = UtteranceCritic | LikelihoodCritic


class ArCHerConfig(OnlineConfig):
    """ArCHer (see module docstring); one YAML for `proctor train archer`. Its actor's `minibatch_size`,
    `aggregation` (ArCHer's −A·Σ_h log π per step by default) and KL fields are `ClippedPolicyGradient`'s."""

    # critic
    critic: str | None = Field(default=None, description="critic backbone (None: the policy's); same tokenizer")
    critic_kind: Literal["head", "likelihood"] = Field(
        default="head", description="head: a [Q₁, Q₂, V₁, V₂] head on the backbone (`proctor.rl.critic`); "
        "likelihood: Q through the backbone's LM likelihood, e.g. from a likelihood PRM "
        "(`proctor.rl.likelihood_critic`)")
    critic_learning_rate: float = Field(default=1e-5, gt=0, description="peak learning rate of the critic's AdamW")
    critic_head_learning_rate: float | None = Field(
        default=None, gt=0, description="likelihood critic: of its Q biases and V head (None: critic_learning_rate)")
    gamma: float = Field(default=0.95, ge=0, le=1, description="discount γ of the TD targets")
    tau: float = Field(default=0.1, gt=0, le=1, description="Polyak rate of the target critic")
    target_heads: Literal["min", "per-head"] = Field(
        default="min", description="min: min of the target's heads (paper); per-head: head i ← head i (code)")
    buffer_capacity: int = Field(default=10_000, ge=1, description="transitions kept (oldest overwritten)")
    critic_updates: int = Field(default=16, ge=0, description="critic gradient steps per iteration")
    critic_batch_size: int = Field(default=16, ge=1, description="replay transitions per critic step (the global "
                                   "batch, drawn uniformly with replacement)")
    warmup_iterations: int = Field(default=0, ge=0, description="first iterations train the critic only")
    # actor
    train_actor: bool = Field(default=True, description="False: the LM stays frozen (CHAI)")
    actor_epochs: int = Field(default=1, ge=1, description="passes over each iteration's steps")
    minibatch_size: int = ClippedPolicyGradient.field_with("minibatch_size")
    aggregation: LossAggregation = ClippedPolicyGradient.field_with("aggregation", default="seq-mean-token-sum")
    whiten_advantages: bool = Field(default=False, description="A ← (A − mean)/std over the iteration's steps "
                                    "(PPO's normalisation; ArCHer: off)")
    baseline: Literal["value", "expected"] = Field(
        default="value", description="value: the critic's min(V₁, V₂)(s) (ArCHer); expected: Σ_a π(a|s)·min Q(s, a) "
        "over the admissible actions (needs critic_kind: likelihood and the choice agent)")
    kl_coef: float = ClippedPolicyGradient.field_with("kl_coef")
    kl_estimator: KLEstimator = ClippedPolicyGradient.field_with("kl_estimator")
    actor_loss: Literal["pg", "ppo-clip"] = Field(
        default="pg", description="pg: −A·log π (ArCHer); ppo-clip: PPO's clipped ratio to the sampling policy")
    clip: float = Field(default=0.2, gt=0, description="ppo-clip: ε, the ratio is clipped to [1 − ε, 1 + ε]")
    # acting
    candidates: int = Field(default=1, ge=1, description="K > 1: act with the best of K samples by the critic")
    logprob_weight: float = Field(default=0.0, description="α: the critic's choice maximises Q + α·log π")

    @model_validator(mode="after")
    def _head_rate(self) -> ArCHerConfig:
        if self.critic_head_learning_rate is not None and self.critic_kind != "likelihood":
            raise ValueError("critic_head_learning_rate is for critic_kind: likelihood (a head critic has one rate)")
        if self.baseline == "expected" and (self.critic_kind != "likelihood" or self.agent.kind != "choice"):
            raise ValueError("baseline: expected needs critic_kind: likelihood and agent kind choice (it sums the "
                             f"critic's Q over the admissible actions), got {self.critic_kind} and {self.agent.kind}")
        return self



@dataclass
class ArCHerResult:
    policy_dir: Path
    critic_dir: Path
    iterations: list[dict[str, Any]] = field(default_factory=list)


def train_archer(cfg: ArCHerConfig) -> ArCHerResult:
    """Run `cfg.iterations` iterations of ArCHer (or online CHAI); returns the last policy and critic."""
    policy, tokenizer, device = start_run(cfg)
    critic = build_critic(cfg).to(device)
    check_same_tokenizer(critic, tokenizer)
    target = frozen_copy(critic)
    reference = KLReference(policy, cfg.policy, device) if cfg.kl_coef > 0 and cfg.train_actor else None
    buffer = ReplayBuffer(cfg.buffer_capacity)
    generator = torch.Generator().manual_seed(cfg.seed)
    pad = tokenizer.pad_token_id
    current, history = cfg.policy, []
    with generation_server(cfg, policy) as served:
        for k in range(1, cfg.iterations + 1):
            folder = cfg.output_dir / f"iter-{k}"
            clock = {"start": time.monotonic()}
            # 1. rollouts of the current policy (CHAI: the critic's best of K samples), on the main process
            chai = (partial(CriticChoiceAgent, critic=critic.eval(), tokenizer=tokenizer, prompt=cfg.prompt,
                            k=cfg.candidates, alpha=cfg.logprob_weight) if cfg.candidates > 1 else None)
            trajs, rollout = sample_rollouts(cfg, k, policy, tokenizer, current, folder / "rollouts", chai,
                                             served)
            clock["rollout"] = time.monotonic()
            # 2. the steps into the replay buffer
            slots = buffer.add(transitions(tokenizer, trajs, cfg.prompt, iteration=k))
            # 3. TD updates of the critic on replay minibatches, Polyak-averaged target
            critic_log = update_critic(cfg, critic, target, buffer, generator)
            clock["critic"] = time.monotonic()
            # 4. after the warm-up: token-level policy gradient with A = min Q − min V on this iteration's steps
            actor_log, drift = [], None
            if cfg.train_actor and k > cfg.warmup_iterations:
                rows = buffer.take(slots)
                samples = [StepRow(t.prompt_ids, t.action_ids, sampling_logprobs=t.logprobs) for t in rows]
                drift = fill_logprobs(policy, reference, samples, pad, cfg.minibatch_size, cfg.precision)
                baseline = (expected_baselines(policy, critic, tokenizer, trajs, rows, cfg.prompt,
                                               cfg.agent.temperature, progress=cfg.progress)
                            if cfg.baseline == "expected" else None)
                actor_log, trainer = update_actor(cfg, k, policy, critic, samples, pad, baseline)
                current = str(save_trained(policy, tokenizer, folder / "policy", cfg.save_dtype, trainer))
            clock["actor"] = time.monotonic()
            # 5. save the critic, the buffer and the metrics (the main process writes)
            critic_dir = folder / "critic"
            if is_main_process():
                critic.save_pretrained(critic_dir)
                buffer.save(cfg.output_dir / REPLAY_FILE)
            clock["save"] = time.monotonic()
            metrics = {"iteration": k, "rollout": rollout, "transitions": len(slots), "buffer": len(buffer),
                       "mean_return": sum(t.total_reward for t in trajs) / len(trajs), "logprob_drift": drift,
                       "critic": summarize(critic_log, "loss"), "train": summarize(actor_log, "loss"),
                       "wall_s": stage_seconds(clock)}
            record_iteration(folder, metrics, history)
    write_summary(cfg, current, history)
    return ArCHerResult(Path(current), critic_dir, history)


# -- the stages, in the order train_archer runs them -----------------------------------------------------
def build_critic(cfg: ArCHerConfig) -> Critic:
    """The critic of `cfg.critic_kind` on `cfg.critic` (None: the policy), its weights in float32 (bf16 for
    `precision: bf16-pure`)."""
    kind = LikelihoodCritic if cfg.critic_kind == "likelihood" else UtteranceCritic
    return kind.build(cfg.critic or cfg.policy, dtype=weights_dtype(cfg.precision))


def critic_parameter_groups(cfg: ArCHerConfig, critic: Critic) -> list[dict[str, Any]]:
    """The critic's optimiser groups: a likelihood critic's small heads may take `critic_head_learning_rate`;
    the others train at `critic_learning_rate`, the rate of the critic's `fit`. No group sets a weight decay:
    the critic's AdamW keeps torch's default (0.01)."""
    if not isinstance(critic, LikelihoodCritic):
        return [{"params": trainable_parameters(critic)}]
    heads = [critic.q_bias, *critic.value_head.parameters()]
    return [{"params": [p for p in critic.lm.parameters() if p.requires_grad]},
            {"params": heads, "lr": cfg.critic_head_learning_rate or cfg.critic_learning_rate}]


class TDCriticLoss:
    """`critic_loss` as the engine's `RowLoss` over replay transitions: its weight is the number of
    transitions (the loss is a mean over them per head), the call returns B·(loss, stats)."""

    def __init__(self, target: Critic, gamma: float, heads: str):
        self.target, self.gamma, self.heads = target, gamma, heads

    def weight(self, rows: Sequence[ReplayTransition]) -> float:
        return len(rows)

    def __call__(self, model: torch.nn.Module, rows: Sequence[ReplayTransition]) -> tuple[torch.Tensor, dict[str, Any]]:
        loss, stats = critic_loss(model, self.target, rows, self.gamma, self.heads)
        return loss * len(rows), {k: v * len(rows) for k, v in stats.items()}


@contextlib.contextmanager
def polyak_after_each_step(target: Critic, critic: Critic, tau: float) -> Iterator[None]:
    """Within the block, every optimizer step that updates `critic`'s parameters is followed by the Polyak
    update of the target, ψ̄ ← τψ + (1 − τ)ψ̄ (`polyak_update`); a step skipped by the fp16 loss scaler is not."""
    from torch.optim.optimizer import register_optimizer_step_post_hook

    first = next(p for p in critic.parameters() if p.requires_grad)

    def hook(optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        if any(p is first for g in optimizer.param_groups for p in g["params"]):
            polyak_update(target.parameters(), critic.parameters(), tau)

    handle = register_optimizer_step_post_hook(hook)
    try:
        yield
    finally:
        handle.remove()


def update_critic(cfg: ArCHerConfig, critic: Critic, target: Critic, buffer: ReplayBuffer,
                  generator: torch.Generator) -> list[dict[str, Any]]:
    """`critic_updates` TD steps on uniform replay minibatches of `critic_batch_size` (one `fit`), each followed
    by the Polyak target update; the per-step log."""
    if cfg.critic_updates == 0:
        return []
    batches = [buffer.sample(cfg.critic_batch_size, generator) for _ in range(cfg.critic_updates)]
    opt = cfg.model_copy(update={"learning_rate": cfg.critic_learning_rate})
    with polyak_after_each_step(target, critic, cfg.tau):
        result = fit(critic, batches, TDCriticLoss(target, cfg.gamma, cfg.target_heads), opt,
                     cfg.output_dir / "trainer", label="archer critic",
                     optimizer_groups=lambda model: critic_parameter_groups(cfg, model))
    return result.curve


@torch.no_grad()
def advantages(critic: Critic, rows: Sequence[StepRow], batch_size: int,
               baseline: Sequence[float] | None = None) -> list[float]:
    """A = min(Q₁, Q₂)(s, a) − min(V₁, V₂)(s) of every row from the critic, or min(Q₁, Q₂)(s, a) − `baseline`."""
    critic.eval()
    out: list[float] = []
    for i in range(0, len(rows), batch_size):
        chunk = rows[i:i + batch_size]
        q, v = critic([r.prompt_ids for r in chunk], [r.completion_ids for r in chunk])
        if baseline is not None:
            v = torch.tensor(baseline[i:i + batch_size], dtype=q.dtype, device=q.device)[:, None].expand_as(q)
        out += archer_advantage(q, v).cpu().tolist()
    return out


def update_actor(cfg: ArCHerConfig, k: int, policy: torch.nn.Module, critic: Critic, rows: Sequence[StepRow],
                 pad_id: int, baseline: Sequence[float] | None = None) -> tuple[list[dict[str, Any]], Any]:
    """`actor_epochs` shuffled passes of `PolicyGradientLoss` over `rows` (one `fit`), with the critic's advantages
    computed once; (the per-step log, the Trainer; None without a batch)."""
    adv = advantages(critic, rows, cfg.minibatch_size, baseline)
    if cfg.whiten_advantages:
        adv = whiten(torch.tensor(adv, dtype=torch.float64), torch.ones(len(adv))).tolist()
    for r, a in zip(rows, adv, strict=True):
        r.advantage = a
    batches, epochs = shuffled_batches(rows, cfg.minibatch_size, cfg.actor_epochs,
                                       shuffled(random.Random(cfg.seed * 1_000_003 + k)), cfg)
    if not batches:
        return [], None
    loss = PolicyGradientLoss(pad_id, cfg.aggregation, cfg.actor_loss, cfg.clip, cfg.clip, cfg.kl_coef,
                              cfg.kl_estimator)
    result = fit(policy, batches, loss, cfg, cfg.output_dir / "trainer", label="archer actor", epochs=epochs)
    return result.curve, result.trainer


def summarize(steps: Sequence[dict[str, Any]], key: str) -> dict[str, Any]:
    """Step count, first/last/mean of `key`, and the log."""
    if not steps:
        return {"steps": 0, "log": []}
    values = [s[key] for s in steps]
    return {"steps": len(steps), f"{key}_first": values[0], f"{key}_last": values[-1],
            f"mean_{key}": sum(values) / len(values), "log": list(steps)}

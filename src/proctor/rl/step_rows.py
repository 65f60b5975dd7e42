"""Agent steps as policy-gradient training rows: the state's prompt (the one renderer, as the agent saw it) and
the token ids the policy generated for its action (`Step.token_ids`, never a re-tokenization), with per-token
quantities filled in before the updates (old, reference and sampling log-probs; advantages; values).

Right-aligned [B, K] tensors are the layout of `proctor.models.sequences.completion_logprobs`: each row's tokens
occupy its last len(completion) columns.

The rows train on the engine (`proctor.training.fit`, in the global batches of `shuffled_batches`), and
`PolicyGradientLoss` is the clipped surrogate or the plain policy gradient (+ KL to `KLReference`) as its
`RowLoss`; `ClippedPolicyGradient` is its config part in GRPO's and PPO's configs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from pydantic import Field

from proctor.models.sequences import completion_logprobs
from proctor.parts import Part
from proctor.prompts import PromptConfig, prefix_at
from proctor.rl.pairs import prompt_ids
from proctor.rl.policy_losses import KL_PENALTIES, LossAggregation, aggregate_loss_sum, ppo_clip_tokens
from proctor.trajectory import Trajectory


@dataclass
class StepRow:
    """One agent step as a training row (see module docstring)."""

    prompt_ids: list[int]
    completion_ids: list[int]
    advantage: float = 0.0
    sampling_logprobs: list[float] | None = None
    old_logprobs: list[float] = field(default_factory=list)
    ref_logprobs: list[float] = field(default_factory=list)
    token_advantages: list[float] = field(default_factory=list)
    returns: list[float] = field(default_factory=list)
    old_values: list[float] = field(default_factory=list)
    where: tuple[str, int] = ("", 0)

    def advantages(self) -> list[float]:
        """A per completion token: `token_advantages` (PPO's GAE) or the row's `advantage` on every token."""
        return self.token_advantages or [self.advantage] * len(self.completion_ids)


def step_row(tokenizer: Any, traj: Trajectory, t: int, cfg: PromptConfig | None) -> StepRow:
    """Step t of `traj` as a row; a step without the policy's token ids is an error."""
    step = traj.steps[t]
    if not step.token_ids:
        raise ValueError(f"trajectory {traj.id} step {t}: no token_ids; policy-gradient training needs the ids "
                         "the policy generated (roll out with an hf or choice agent)")
    return StepRow(prompt_ids(tokenizer, prefix_at(traj, t), cfg), list(step.token_ids),
                   sampling_logprobs=step.logprobs, where=(traj.id, t))


def right_aligned(values: Sequence[Sequence[float]], k: int, device: Any = None) -> torch.Tensor:
    """Rows of different lengths as a right-aligned float tensor [len(values), k] (zeros on the left)."""
    out = torch.zeros((len(values), k), dtype=torch.float32)
    for b, v in enumerate(values):
        if v:
            out[b, k - len(v):] = torch.tensor(list(v), dtype=torch.float32)
    return out if device is None else out.to(device)


class KLReference:
    """π_ref of a KL penalty, the starting policy, without a copy of the trained weights: with LoRA the policy
    with its adapters disabled (`adapters_disabled`); without, the starting checkpoint `name_or_path` loaded
    once for inference (frozen, eval mode, in the inference precision: bf16 on a CUDA device with bf16)."""

    def __init__(self, policy: torch.nn.Module, name_or_path: str, device: str):
        from proctor.models.loading import load
        from proctor.training.policy import is_peft
        from proctor.training.precision import inference_dtype

        self.policy, self.frozen = policy, None
        if not is_peft(policy):
            self.frozen, _ = load(name_or_path, dtype=inference_dtype("auto", device), device=device)
            self.frozen.eval().requires_grad_(False)

    @contextlib.contextmanager
    def model(self) -> Iterator[torch.nn.Module]:
        from proctor.training.policy import adapters_disabled

        if self.frozen is not None:
            yield self.frozen
        else:
            with adapters_disabled(self.policy) as base:
                yield base


@torch.no_grad()
def set_logprobs(model: torch.nn.Module, rows: Sequence[StepRow], attr: str, pad_id: int, batch_size: int) -> None:
    """Set `attr` of every row to its completion's per-token log-probs under `model`."""
    for i in range(0, len(rows), batch_size):
        chunk = rows[i:i + batch_size]
        logps, mask = completion_logprobs(model, [(r.prompt_ids, r.completion_ids) for r in chunk], pad_id)
        for b, r in enumerate(chunk):
            setattr(r, attr, logps[b][mask[b].bool()].float().cpu().tolist())


def fill_logprobs(policy: torch.nn.Module, reference: KLReference | None, rows: Sequence[StepRow], pad_id: int,
                  batch_size: int, precision: str = "fp32") -> float | None:
    """Set every row's old (and reference) per-token log-probs, computed by the training forward pass in eval
    mode (under the engine's autocast of `precision`, so the first ratio is 1); returns the largest
    |sampling − old| gap over rows that stored sampling log-probs (None: none did)."""
    from proctor.training.precision import autocast

    policy.eval()
    with autocast(precision, str(next(policy.parameters()).device)):
        set_logprobs(policy, rows, "old_logprobs", pad_id, batch_size)
        if reference is not None:
            with reference.model() as ref:
                set_logprobs(ref, rows, "ref_logprobs", pad_id, batch_size)
    gaps = [max(abs(a - b) for a, b in zip(r.sampling_logprobs, r.old_logprobs, strict=True)) for r in rows
            if r.sampling_logprobs and len(r.sampling_logprobs) == len(r.old_logprobs)]
    return max(gaps) if gaps else None


def aggregation_weight(rows: Sequence[StepRow], aggregation: LossAggregation) -> float:
    """A `RowLoss` weight: the items `aggregate_loss` averages over (`loss_aggregation_items`), known before the
    forward pass: the rows' completion tokens (`token-mean`) or the rows (`seq-mean-*`; every completion has a
    token)."""
    return float(sum(len(r.completion_ids) for r in rows) if aggregation == "token-mean" else len(rows))


class PolicyGradientLoss:
    """The engine's `RowLoss` of a token-level policy gradient over `StepRow`s: per token ℓ_h = PPO's clipped
    surrogate against the rows' `old_logprobs` (`ppo-clip`, `ppo_clip_tokens`, ε_low/ε_high) or −A·log π(a^h |
    s, a^{<h}) (`pg`, ArCHer's actor), plus `kl_coef`·KL(π‖π_ref)_h (`KL_PENALTIES[kl_estimator]` against the
    rows' `ref_logprobs`), aggregated by `aggregation`: the call returns Σ over the aggregation's items
    (`aggregate_loss_sum`: tokens, or rows for `seq-mean-*`) and the weight counts them, so a step's loss is exactly
    `aggregate_loss` over its global batch. Stats over the same items: `kl` aggregated as the loss; `advantage` and
    PPO's `clipfrac`, `approx_kl`, `ratio` as each item's token mean."""

    def __init__(self, pad_id: int, aggregation: LossAggregation, surrogate: Literal["ppo-clip", "pg"] = "ppo-clip",
                 clip_low: float = 0.2, clip_high: float | None = None, kl_coef: float = 0.0,
                 kl_estimator: str = "k3"):
        self.pad_id, self.aggregation, self.surrogate = pad_id, aggregation, surrogate
        self.clip_low, self.clip_high = clip_low, clip_high
        self.kl_coef, self.kl = kl_coef, KL_PENALTIES[kl_estimator] if kl_coef > 0 else None
        self.per_item: LossAggregation = "token-mean" if aggregation == "token-mean" else "seq-mean-token-mean"

    def weight(self, rows: Sequence[StepRow]) -> float:
        return aggregation_weight(rows, self.aggregation)

    def __call__(self, model: torch.nn.Module, rows: Sequence[StepRow]) -> tuple[torch.Tensor, dict[str, Any]]:
        logps, mask = completion_logprobs(model, [(r.prompt_ids, r.completion_ids) for r in rows], self.pad_id)
        width, dev = mask.shape[1], logps.device
        adv = right_aligned([r.advantages() for r in rows], width, dev)
        if self.surrogate == "ppo-clip":
            old = right_aligned([r.old_logprobs for r in rows], width, dev)
            tokens, per_token = ppo_clip_tokens(logps, old, adv, self.clip_low, self.clip_high)
        else:
            tokens, per_token = -adv * logps, {}
        stats = {k: aggregate_loss_sum(v.detach(), mask, self.per_item) for k, v in per_token.items()}
        stats["advantage"] = aggregate_loss_sum(adv, mask, self.per_item)
        total = aggregate_loss_sum(tokens, mask, self.aggregation)
        if self.kl is not None:
            kl = self.kl(logps, right_aligned([r.ref_logprobs for r in rows], width, dev))
            total = total + self.kl_coef * aggregate_loss_sum(kl, mask, self.aggregation)
            stats["kl"] = aggregate_loss_sum(kl.detach(), mask, self.aggregation)
        return total, stats


#: the per-token KL estimators (`proctor.rl.policy_losses.KL_PENALTIES`)
KLEstimator = Literal["k1", "k2", "k3", "abs"]


class ClippedPolicyGradient(Part):
    """The clipped policy gradient of GRPO and PPO (a config part): `ppo_epochs` passes over an iteration's rows
    in minibatches, PPO's clipped surrogate (ε_low/ε_high) plus a KL penalty to the starting policy, aggregated by
    `aggregation` (`PolicyGradientLoss`)."""

    ppo_epochs: int = Field(default=1, ge=1, description="passes over each iteration's rows (one per step)")
    minibatch_size: int = Field(default=16, ge=1, description="steps per optimizer step (the global batch, split "
                                "between the processes and the gradient accumulation steps)")
    clip_low: float = Field(default=0.2, gt=0, description="ε_low: the ratio is clipped below at 1 − ε_low")
    clip_high: float | None = Field(default=None, gt=0, description="ε_high: clipped above at 1 + ε_high (None: "
                                    "clip_low, symmetric)")
    aggregation: LossAggregation = Field(default="token-mean", description="token-mean | seq-mean-token-mean | "
                                         "seq-mean-token-sum (`proctor.rl.policy_losses`)")
    kl_coef: float = Field(default=0.0, ge=0, description="weight of KL(π‖π_ref) per token to the starting policy "
                           "(0: no reference)")
    kl_estimator: KLEstimator = Field(default="k3", description="per-token KL estimator: k1 | k2 | k3 | abs "
                                      "(`proctor.rl.policy_losses.KL_PENALTIES`)")

    def policy_loss(self, pad_id: int) -> PolicyGradientLoss:
        """The clipped surrogate (+ KL) of these fields, as the engine's `RowLoss`."""
        return PolicyGradientLoss(pad_id, self.aggregation, "ppo-clip", self.clip_low, self.clip_high, self.kl_coef,
                                  self.kl_estimator)

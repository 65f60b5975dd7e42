"""Policy-gradient losses, value losses and KL penalty estimators as pure tensor functions.

Token-level tensors are [B, T] with a 0/1 `mask` of the tokens that count (the policy's own tokens; prompt,
observation and padding tokens are 0). `aggregate_loss` turns a per-token loss into a scalar by its
`LossAggregation` (not to be confused with the step-score aggregation of search, `proctor.search.aggregate`):
`token-mean` (Σ ℓ·m / Σ m over the batch, DAPO's choice, arXiv 2503.14476), `seq-mean-token-mean` (the mean
over sequences of each sequence's token mean, the original GRPO) or `seq-mean-token-sum`; `aggregate_loss_sum`
and `loss_aggregation_items` are its numerator and denominator, for a loss summed over micro-batches (the
engine).

Registered in `POLICY_LOSSES`:
- `ppo_clip` (Schulman et al. 2017, arXiv 1707.06347, eq. 7): ρ_t = exp(log π − log π_old),
  ℓ_t = −min(ρ_t·A_t, clip(ρ_t, 1 − ε_low, 1 + ε_high)·A_t) (ε_high = ε_low unless given: DAPO's clip-higher).
- `pg` (REINFORCE, Williams 1992): ℓ_t = −A_t·log π_t (ArCHer's actor, filtered BC with A = 1).

`value_loss` (PPO2 baselines / verl): ℓ_t = ½·max((V − R)², (V_old + clip(V − V_old, −ε, ε) − R)²), or
½·(V − R)² without clipping.

Registered in `KL_PENALTIES` (Schulman 2020, "Approximating KL divergence", http://joschu.net/blog/kl-approx.html),
per token with x = log π_ref − log π (samples from π): `k1` = −x, `k2` = ½x², `k3` = eˣ − x − 1 (unbiased,
non-negative, verl's low_var_kl), `abs` = |x|.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import torch

from proctor.registry import Registry

POLICY_LOSSES = Registry[Callable[..., Any]]("policy loss")
KL_PENALTIES = Registry[Callable[..., Any]]("KL penalty estimator")

LossAggregation = Literal["token-mean", "seq-mean-token-mean", "seq-mean-token-sum"]


def _check_same_shape(**tensors: torch.Tensor) -> None:
    shapes = {name: tuple(t.shape) for name, t in tensors.items()}
    if len(set(shapes.values())) != 1:
        raise ValueError(f"shapes differ: {shapes}")


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Σ x·m / Σ m (0 when the mask is empty)."""
    m = mask.to(x.dtype)
    return (x * m).sum() / m.sum().clamp(min=1.0)


def loss_aggregation_items(mask: torch.Tensor, mode: LossAggregation = "token-mean") -> torch.Tensor:
    """What `aggregate_loss` averages over: the tokens (`token-mean`) or the rows with tokens
    (`seq-mean-*`)."""
    m = mask.float()
    return m.sum() if mode == "token-mean" else (m.sum(dim=1) > 0).sum().float()


def aggregate_loss_sum(loss: torch.Tensor, mask: torch.Tensor, mode: LossAggregation = "token-mean"
                       ) -> torch.Tensor:
    """Σ over `loss_aggregation_items` of each item's loss: a token's ℓ (`token-mean`), a row's token mean or
    token sum (`seq-mean-*`), so that `aggregate_loss` = aggregate_loss_sum / loss_aggregation_items. The engine's
    `RowLoss` sums this over micro-batches and divides by the step's items."""
    _check_same_shape(loss=loss, mask=mask)
    m = mask.to(loss.dtype)
    if mode == "token-mean":
        return (loss * m).sum()
    per_row = (loss * m).sum(dim=1)
    if mode == "seq-mean-token-mean":
        per_row = per_row / m.sum(dim=1).clamp(min=1.0)
    elif mode != "seq-mean-token-sum":
        raise ValueError(f"unknown aggregation {mode!r}; use token-mean, seq-mean-token-mean or seq-mean-token-sum")
    return per_row.sum()


def aggregate_loss(loss: torch.Tensor, mask: torch.Tensor, mode: LossAggregation = "token-mean") -> torch.Tensor:
    """A scalar from a per-token loss [B, T] (see module docstring); rows without tokens do not count."""
    return aggregate_loss_sum(loss, mask, mode) / loss_aggregation_items(mask, mode).clamp(min=1.0)


def ppo_clip_tokens(logprobs: torch.Tensor, old_logprobs: torch.Tensor, advantages: torch.Tensor,
                    clip_low: float = 0.2, clip_high: float | None = None
                    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Per token: PPO's clipped surrogate ℓ_t (see module docstring) and detached statistics `clipfrac` (1 where
    the clipped term was the minimum and differs), `approx_kl` (k3 between π_old and π) and `ratio` ρ_t."""
    _check_same_shape(logprobs=logprobs, old_logprobs=old_logprobs, advantages=advantages)
    if clip_low <= 0 or (clip_high is not None and clip_high <= 0):
        raise ValueError(f"clip ranges must be > 0, got clip_low={clip_low}, clip_high={clip_high}")
    high = clip_low if clip_high is None else clip_high
    log_ratio = logprobs - old_logprobs
    ratio = torch.exp(log_ratio)
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1.0 - clip_low, 1.0 + high) * advantages
    with torch.no_grad():
        stats = {"clipfrac": (clipped < unclipped).to(ratio.dtype),
                 "approx_kl": torch.exp(-log_ratio) + log_ratio - 1.0, "ratio": ratio.detach()}
    return -torch.minimum(unclipped, clipped), stats


@POLICY_LOSSES.register("ppo_clip")
def ppo_clip_loss(logprobs: torch.Tensor, old_logprobs: torch.Tensor, advantages: torch.Tensor,
                  mask: torch.Tensor, clip_low: float = 0.2, clip_high: float | None = None,
                  aggregation: LossAggregation = "token-mean") -> tuple[torch.Tensor, dict[str, float]]:
    """`ppo_clip_tokens` aggregated, and its statistics as means over the tokens."""
    _check_same_shape(logprobs=logprobs, mask=mask)
    loss, stats = ppo_clip_tokens(logprobs, old_logprobs, advantages, clip_low, clip_high)
    return aggregate_loss(loss, mask, aggregation), {k: float(masked_mean(v, mask)) for k, v in stats.items()}


@POLICY_LOSSES.register("pg")
def pg_loss(logprobs: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor,
            aggregation: LossAggregation = "token-mean") -> tuple[torch.Tensor, dict[str, float]]:
    """REINFORCE: aggregate_loss(−A·log π) (advantages are constants: detached)."""
    _check_same_shape(logprobs=logprobs, advantages=advantages, mask=mask)
    loss = aggregate_loss(-advantages.detach() * logprobs, mask, aggregation)
    return loss, {"logprob": float(masked_mean(logprobs.detach(), mask))}


def value_loss_tokens(values: torch.Tensor, returns: torch.Tensor, old_values: torch.Tensor | None = None,
                      clip: float | None = None) -> torch.Tensor:
    """Per token ½·max((V − R)², (V_old + clip(V − V_old, −ε, ε) − R)²); ½·(V − R)² when `clip` is None."""
    _check_same_shape(values=values, returns=returns)
    loss = (values - returns.detach()) ** 2
    if clip is not None:
        if old_values is None:
            raise ValueError("value clipping needs old_values")
        clipped = old_values + torch.clamp(values - old_values, -clip, clip)
        loss = torch.maximum(loss, (clipped - returns.detach()) ** 2)
    return 0.5 * loss


def value_loss(values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor,
               old_values: torch.Tensor | None = None, clip: float | None = None,
               aggregation: LossAggregation = "token-mean") -> torch.Tensor:
    """`value_loss_tokens` aggregated."""
    return aggregate_loss(value_loss_tokens(values, returns, old_values, clip), mask, aggregation)


@KL_PENALTIES.register("k1")
def kl_k1(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """log π − log π_ref per token (unbiased, can be negative)."""
    return logprobs - ref_logprobs


@KL_PENALTIES.register("k2")
def kl_k2(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """½·(log π − log π_ref)² per token."""
    return 0.5 * (logprobs - ref_logprobs) ** 2


@KL_PENALTIES.register("k3")
def kl_k3(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """e^x − x − 1 with x = log π_ref − log π, per token (x clamped to [−20, 20] for stability)."""
    x = torch.clamp(ref_logprobs - logprobs, -20.0, 20.0)
    return torch.exp(x) - x - 1.0


@KL_PENALTIES.register("abs")
def kl_abs(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """|log π − log π_ref| per token."""
    return (logprobs - ref_logprobs).abs()

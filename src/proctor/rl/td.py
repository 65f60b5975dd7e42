"""The math of ArCHer's utterance-level critic, online CHAI and online filtered BC, as pure tensor functions.

ArCHer (Zhou et al. 2024, arXiv 2402.19446, §4 and Algorithm 1; docs/methods.md §9): a critic with two Q heads
and two V heads, and a target copy of it (bars) updated by Polyak averaging. With d = 1 only when the episode
*terminated* (a truncated episode, cut by the step limit, bootstraps from its next state):

- `q_targets`: y_i = r + γ·(1 − d)·V̄(s'), for both Q heads i = 1, 2;
- `v_targets`: z_i = E_{a ~ π(·|s)} Q̄(s, a), estimated by the mean over the K sampled actions;
- `polyak_update`: ψ̄ ← τ·ψ + (1 − τ)·ψ̄ (τ = 0.1 in the paper);
- `archer_advantage`: A(s, a) = min(Q₁, Q₂)(s, a) − min(V₁, V₂)(s), the utterance-level advantage that
  weighs every token of the action in the token-level policy gradient.

How the target's two heads combine (`TARGET_HEADS`): `min` (the paper's clipped double estimate, the default:
V̄ = min(V̄₁, V̄₂) and Q̄ = min(Q̄₁, Q̄₂), the same target for both heads) or `per-head` (ArCHer's released code:
head i regresses on the target's head i).

CHAI (Verma et al. 2022, "CHAI: A CHatbot AI for Task-Oriented Dialogue with Offline Reinforcement Learning",
NAACL; online as in ArCHer's baselines): `chai_select` acts with the best of K samples of the LM by the
critic's Q, optionally plus α·log π(a|s) (α = 0: CHAI).

Filtered BC (ArCHer's online baseline; docs/methods.md §9): `TRAJECTORY_FILTERS` keep the trajectories whose
return R is high enough: `percentile` (R ≥ the q-th percentile of a pool, e.g. all returns so far; ArCHer's
q = 90), `top-fraction` (R ≥ the ⌈f·N⌉-th highest return of the batch) or `threshold` (R ≥ c).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import torch

from proctor.registry import Registry

TARGET_HEADS = Registry[Callable[..., Any]]("target heads rule")
TRAJECTORY_FILTERS = Registry[Callable[..., Any]]("trajectory filter")


def _check_heads(x: torch.Tensor, name: str) -> None:
    if x.shape[-1] != 2:
        raise ValueError(f"{name}: the last dimension holds the two heads, got shape {tuple(x.shape)}")


@TARGET_HEADS.register("min")
def min_heads(values: torch.Tensor) -> torch.Tensor:
    """[..., 2] → [..., 2]: min of the two heads, the same value for both."""
    _check_heads(values, "values")
    return values.min(dim=-1, keepdim=True).values.expand_as(values)


@TARGET_HEADS.register("per-head")
def per_head(values: torch.Tensor) -> torch.Tensor:
    """[..., 2] → [..., 2] unchanged: head i's target comes from the target's head i."""
    _check_heads(values, "values")
    return values


def q_targets(rewards: torch.Tensor, next_values: torch.Tensor, terminated: torch.Tensor, gamma: float,
              heads: str = "min") -> torch.Tensor:
    """y = r + γ·(1 − d)·V̄(s') per Q head, [B, 2]. `rewards` [B]; `next_values` [B, 2] the target critic's
    V̄₁, V̄₂ at s'; `terminated` [B] (true only at termination: truncated steps bootstrap)."""
    _check_heads(next_values, "next_values")
    if rewards.shape != terminated.shape or rewards.shape != next_values.shape[:-1]:
        raise ValueError(f"shapes differ: rewards {tuple(rewards.shape)}, terminated {tuple(terminated.shape)}, "
                         f"next_values {tuple(next_values.shape)}")
    alive = 1.0 - terminated.to(next_values.dtype)
    return rewards[:, None].to(next_values.dtype) + gamma * alive[:, None] * TARGET_HEADS[heads](next_values)


def v_targets(target_q: torch.Tensor, heads: str = "min") -> torch.Tensor:
    """z = mean over the K sampled actions of the target's Q̄(s, a_k), [B, 2], from `target_q` [B, K, 2]."""
    if target_q.ndim != 3:
        raise ValueError(f"target_q must be [B, K, 2], got shape {tuple(target_q.shape)}")
    return TARGET_HEADS[heads](target_q).mean(dim=1)


@torch.no_grad()
def polyak_update(target: Iterable[torch.Tensor], online: Iterable[torch.Tensor], tau: float) -> None:
    """ψ̄ ← τ·ψ + (1 − τ)·ψ̄ in place, parameter by parameter (τ = 1 copies)."""
    if not 0.0 <= tau <= 1.0:
        raise ValueError(f"tau must be in [0, 1], got {tau}")
    target, online = list(target), list(online)
    if len(target) != len(online):
        raise ValueError(f"{len(target)} target tensors but {len(online)} online ones")
    for t, p in zip(target, online, strict=True):
        t.mul_(1.0 - tau).add_(p.detach().to(t.dtype), alpha=tau)


def archer_advantage(q: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """A = min(Q₁, Q₂) − min(V₁, V₂), [B] from `q`, `v` [B, 2]."""
    _check_heads(q, "q")
    _check_heads(v, "v")
    return q.min(dim=-1).values - v.min(dim=-1).values


def expected_value(q: torch.Tensor, probs: torch.Tensor) -> torch.Tensor:
    """V^π(s) = Σ_a π(a|s)·Q(s, a), [B] from `q` and `probs` [B, M] (M actions per state, padded rows with
    probability 0). The baseline of the expected-value / mean actor-critic form (Sutton et al. 2000; Allen et al.
    2017, arXiv 1709.00503): where π's support is a listed set of actions it replaces ArCHer's learned V."""
    if q.shape != probs.shape or q.dim() != 2:
        raise ValueError(f"q and probs must both be [B, M], got {tuple(q.shape)} and {tuple(probs.shape)}")
    if (probs < 0).any() or not torch.allclose(probs.sum(-1), torch.ones(probs.shape[0], dtype=probs.dtype),
                                               atol=1e-4):
        raise ValueError(f"each row of probs must be a distribution, got sums {probs.sum(-1).tolist()}")
    return (probs * q).sum(dim=-1)


def chai_select(q: torch.Tensor, logprobs: torch.Tensor | None = None, alpha: float = 0.0) -> torch.Tensor:
    """Index of the action to take per state, [B]: argmax_k Q(s, a_k) + α·log π(a_k|s) over `q` [B, K]
    (`logprobs` [B, K], the sampled actions' sequence log-probs; needed when α ≠ 0). Ties go to the first."""
    score = q
    if alpha != 0.0:
        if logprobs is None or logprobs.shape != q.shape:
            raise ValueError("alpha ≠ 0 needs logprobs of the same shape as q")
        score = q + alpha * logprobs
    return score.argmax(dim=-1)


@TRAJECTORY_FILTERS.register("percentile")
def keep_percentile(returns: torch.Tensor, q: float, pool: torch.Tensor | None = None) -> torch.Tensor:
    """R ≥ the q-th percentile (0..100, linear interpolation) of `pool` (default: `returns` themselves)."""
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile must be in [0, 100], got {q}")
    ref = returns if pool is None else pool
    cut = torch.quantile(ref.to(torch.float64), q / 100.0)
    return returns.to(torch.float64) >= cut


@TRAJECTORY_FILTERS.register("top-fraction")
def keep_top_fraction(returns: torch.Tensor, fraction: float, pool: torch.Tensor | None = None) -> torch.Tensor:
    """R ≥ the ⌈f·N⌉-th highest return of `returns` (ties at the cut are kept); `pool` is not used."""
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    n = math.ceil(fraction * returns.numel())
    cut = returns.sort(descending=True).values[n - 1]
    return returns >= cut


@TRAJECTORY_FILTERS.register("threshold")
def keep_threshold(returns: torch.Tensor, threshold: float, pool: torch.Tensor | None = None) -> torch.Tensor:
    """R ≥ `threshold`; `pool` is not used."""
    return returns >= threshold

"""Advantage estimators as pure tensor functions, registered by name in `ADVANTAGES`.

- `gae` (Schulman et al. 2016, arXiv 1506.02438, eq. 16): over the positions where `mask` is 1, in order,
  δ_t = r_t + γ·V_{t'} − V_t and A_t = δ_t + γλ·A_{t'}, where t' is the next unmasked position (positions with
  mask 0, e.g. observation tokens between turns, are skipped: they carry no value, reward or advantage);
  after the last unmasked position V_{t'} = `last_values` (the bootstrap value of a truncated episode; 0 for
  a terminated one) and A_{t'} = 0. Returns (targets of the value loss) are A_t + V_t.
- `grpo` (Shao et al. 2024, arXiv 2402.03300 §4.1.2; docs/methods.md §3.1): A^E_i = (R_i − mean_g R) / F over the
  rollouts i of one group g (one task), F = the group's sample standard deviation (or 1); 0 for a group of one
  rollout or of equal returns.
- `loo` (leave-one-out, Kool et al. 2019; SPA-RL's released code): A_i = R_i − mean_{j≠i, j∈g} R_j.
- `gigpo` (Feng et al. 2025, arXiv 2505.10978 eqs. 7–9; docs/methods.md §3.3): steps sharing an anchor state
  form a group; A^S = (R_t − mean G(s̃)) / F with the discounted return to go R_t, 0 for singleton groups;
  the combined advantage is A = A^E + ω·A^S.
- `whiten`: (A − mean) / std over the unmasked entries (PPO's advantage normalisation; std = population std).
- `masked_returns_to_go`: R_t = Σ_{k≥t} γ^{k−t}·r_k along each row (credit's `returns_to_go` as a tensor), with
  t and k counting only the positions where mask is 1 (an outcome's return credited to each step is another
  thing: `proctor.credit.montecarlo.outcome_returns`).

Groups are integer ids (any values; equal ids = one group). The group statistics and the returns to go are
`proctor.credit.group`'s list functions (math.fsum), applied per group or row: one implementation of each.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from proctor.credit.group import centred, returns_to_go
from proctor.credit.group import loo_advantages as credit_loo
from proctor.registry import Registry

ADVANTAGES = Registry[Callable[..., Any]]("advantage estimator")


def _check_same_shape(**tensors: torch.Tensor) -> None:
    shapes = {name: tuple(t.shape) for name, t in tensors.items()}
    if len(set(shapes.values())) != 1:
        raise ValueError(f"shapes differ: {shapes}")


@ADVANTAGES.register("gae")
def gae(rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float, lam: float,
        last_values: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(advantages, returns), both [B, T] and 0 where mask is 0 (see module docstring).

    `rewards`, `values`, `mask`: [B, T]; `last_values`: [B] bootstrap values after each row's last unmasked
    position (None: 0, every row terminated)."""
    _check_same_shape(rewards=rewards, values=values, mask=mask)
    if not (0.0 <= gamma <= 1.0 and 0.0 <= lam <= 1.0):
        raise ValueError(f"gamma and lam must be in [0, 1], got gamma={gamma}, lam={lam}")
    b, t_len = rewards.shape
    m = mask.bool()
    next_value = torch.zeros(b, dtype=values.dtype, device=values.device) if last_values is None \
        else last_values.to(values.dtype)
    next_adv = torch.zeros(b, dtype=values.dtype, device=values.device)
    adv = torch.zeros_like(values)
    for t in range(t_len - 1, -1, -1):
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        a_t = delta + gamma * lam * next_adv
        adv[:, t] = torch.where(m[:, t], a_t, torch.zeros_like(a_t))
        next_value = torch.where(m[:, t], values[:, t], next_value)
        next_adv = torch.where(m[:, t], a_t, next_adv)
    returns = (adv + values) * m
    return adv, returns


def whiten(x: torch.Tensor, mask: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """(x − mean) / (std + eps) over the entries where mask is 1 (population std); 0 where mask is 0."""
    _check_same_shape(x=x, mask=mask)
    m = mask.bool()
    if not m.any():
        return torch.zeros_like(x)
    values = x[m]
    mean = values.mean()
    std = values.std(unbiased=False)
    return torch.where(m, (x - mean) / (std + eps), torch.zeros_like(x))


def masked_returns_to_go(rewards: torch.Tensor, mask: torch.Tensor, gamma: float) -> torch.Tensor:
    """R_t = r_t + γ·R_{t'} with t' the next unmasked position (R = 0 after the last); 0 where mask is 0. [B, T].
    Each row is credit's `returns_to_go` over its unmasked positions."""
    _check_same_shape(rewards=rewards, mask=mask)
    out = torch.zeros_like(rewards)
    for b, m in enumerate(mask.bool()):
        out[b, m] = torch.tensor(returns_to_go(rewards[b, m].tolist(), gamma), dtype=rewards.dtype,
                                 device=rewards.device)
    return out


def _per_group(fn: Callable[[list[float]], list[float]], x: torch.Tensor, groups: torch.Tensor) -> torch.Tensor:
    """`fn` (one group's values → theirs) applied to each group of `x` (equal ids in `groups`). [N] → [N]."""
    _check_same_shape(x=x, groups=groups)
    if x.ndim != 1:
        raise ValueError(f"expected 1-D tensors, got shape {tuple(x.shape)}")
    out = torch.zeros_like(x, dtype=torch.float64)
    for g in torch.unique(groups):
        idx = (groups == g).nonzero().squeeze(1)
        out[idx] = torch.tensor(fn(x[idx].tolist()), dtype=torch.float64, device=x.device)
    return out.to(x.dtype)


def group_centred(x: torch.Tensor, groups: torch.Tensor, normalize: bool = True) -> torch.Tensor:
    """(x − mean_g x) / F_g per element, F_g = the sample std of its group (or 1); 0 in a group of one element
    or of equal values (credit's `centred` per group). `x`, `groups`: [N]."""
    return _per_group(lambda xs: centred(xs, normalize), x, groups)


@ADVANTAGES.register("grpo")
def grpo_advantages(returns: torch.Tensor, groups: torch.Tensor, normalize: bool = True) -> torch.Tensor:
    """A^E_i = (R_i − mean_g R) / F for each rollout i of group g (one task). [N] → [N]."""
    return group_centred(returns, groups, normalize)


@ADVANTAGES.register("loo")
def loo_advantages(returns: torch.Tensor, groups: torch.Tensor) -> torch.Tensor:
    """A_i = R_i − (Σ_{j∈g} R_j − R_i) / (k_g − 1) (credit's `loo_advantages` per group); every group needs
    k_g ≥ 2 rollouts. [N] → [N]."""
    ids, counts = torch.unique(groups, return_counts=True)
    if (counts < 2).any():
        raise ValueError(f"leave-one-out needs at least 2 rollouts per group; group {int(ids[counts < 2][0])} has 1")
    return _per_group(credit_loo, returns, groups)


@ADVANTAGES.register("gigpo")
def gigpo_advantages(episode_advantages: torch.Tensor, step_returns: torch.Tensor, anchors: torch.Tensor,
                     omega: float = 1.0, normalize: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """(A, A^S) per step: A^S = group_centred(R_t, anchor groups), A = A^E + ω·A^S. All [M] (M steps), with
    `episode_advantages` the A^E of each step's rollout and `anchors` the anchor-state group ids (anchors of
    different tasks must have different ids)."""
    _check_same_shape(episode_advantages=episode_advantages, step_returns=step_returns, anchors=anchors)
    step = group_centred(step_returns, anchors, normalize)
    return episode_advantages + omega * step, step

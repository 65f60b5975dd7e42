"""Monte-Carlo Q and V targets (AgentPRM stage 1; docs/methods.md §1).

With R̃ = 2R − 1 and a trajectory of T steps, the return credited to step t is
    G_t = γ^{T−1−t}·R̃   (discount="to_go", the paper's, default)
    G_t = γ^{t}·R̃       (discount="from_start", the released code's).
Occurrences of the same (state, action) pair over all rollouts (keys from `proctor.credit.keys`) are
averaged: Q̂(s,a) = mean G, V̂(s) = mean G over visits of s; labels Q̃ = (Q̂ + 1)/2, Ṽ = (V̂ + 1)/2 ∈ [0, 1].
Everything is one pass over the steps (O(total steps)); trajectories are processed in canonical order so
the floating-point sums, and therefore the results, do not depend on the input order.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from proctor.credit.keys import prefix_keys
from proctor.credit.outcome import OutcomeConfig, Scored, scored, signed
from proctor.credit.records import LabelledStep, params_json
from proctor.credit.registry import MethodResult, Sources, register_method

Discount = Literal["to_go", "from_start"]


class MCConfig(OutcomeConfig):
    """Monte-Carlo targets: discount γ, which discount exponent, and whether the reason is in the key."""

    gamma: float = Field(0.95, gt=0.0, le=1.0, description="γ: the discount of the outcome per step (1: none)")
    discount: Discount = Field("to_go", description="the exponent of γ for step t of T: to_go, T−1−t (the paper's); "
                               "from_start, t (the released code's)")
    include_reason: bool = Field(False, description="an action's identity includes its free-text reason, so the "
                                 "same action with other reasons is another (state, action) pair")


def outcome_returns(r_signed: float, n_steps: int, gamma: float, discount: Discount = "to_go") -> list[float]:
    """The return credited to each step t = 0..T−1 by one outcome R̃ (docs/methods.md §1.1): γ^{T−1−t}·R̃ ("to_go",
    the outcome discounted back from the last step) or γ^{t}·R̃ ("from_start"). Per-step rewards' discounted sums
    are `proctor.credit.group.returns_to_go` (on tensors, `proctor.rl.advantages.masked_returns_to_go`)."""
    if discount == "to_go":
        return [r_signed * gamma ** (n_steps - 1 - t) for t in range(n_steps)]
    if discount == "from_start":
        return [r_signed * gamma**t for t in range(n_steps)]
    raise ValueError(f"unknown discount {discount!r}; use 'to_go' or 'from_start'")


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while building millions of small objects that hold no cycles
    (its repeated full passes over a large heap otherwise make the build super-linear); restores its state."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@dataclass
class MeanTable:
    """Per key: the mean of its values and how many there were."""

    mean: dict[bytes, float]
    count: dict[bytes, int]


def mean_table(keys: Sequence[Sequence[bytes]], values: Sequence[Sequence[float]]) -> MeanTable:
    """Mean and count of the values sharing a key, over all (key, value) pairs."""
    total: dict[bytes, float] = {}
    count: dict[bytes, int] = {}
    for ks, vs in zip(keys, values, strict=True):
        for k, v in zip(ks, vs, strict=True):
            total[k] = total.get(k, 0.0) + v
            count[k] = count.get(k, 0) + 1
    return MeanTable({k: s / count[k] for k, s in total.items()}, count)


@dataclass
class MCTable:
    """Keys and returns of every step, and the Q̂ / V̂ tables (±1 scale)."""

    items: list[Scored]
    states: list[list[bytes]]
    pairs: list[list[bytes]]
    returns: list[list[float]]
    q: MeanTable
    v: MeanTable | None


def mc_table(items: Sequence[Scored], cfg: MCConfig, with_v: bool = True) -> MCTable:
    """Key every step, compute G_t, and average per (s, a) (and per s when `with_v`)."""
    with gc_paused():
        states, pairs, returns = [], [], []
        for it in items:
            s, p = prefix_keys(it.traj, cfg.include_reason)
            states.append(s)
            pairs.append(p)
            returns.append(outcome_returns(signed(it.r), len(it.traj.steps), cfg.gamma, cfg.discount))
        q = mean_table(pairs, returns)
        v = mean_table(states, returns) if with_v else None
    return MCTable(list(items), states, pairs, returns, q, v)


def _records(table: MCTable, method: str, params: str, use_v: bool) -> list[LabelledStep]:
    out = []
    name = "v" if use_v else "q"
    tab = table.v if use_v else table.q
    assert tab is not None
    means, counts = tab.mean, tab.count
    with gc_paused():
        for it, states, pairs, rets in zip(table.items, table.states, table.pairs, table.returns, strict=True):
            t_ = it.traj
            keys = states if use_v else pairs
            for i, step in enumerate(t_.steps):
                mean = means[keys[i]]
                out.append(LabelledStep(t_.id, t_.task_id, t_.env, t_.split, i, states[i].hex(), step.action,
                                        step.reason, (mean + 1.0) / 2.0, counts[keys[i]], method, params,
                                        {name: mean, "return": rets[i]}))
    return out


def mc_q(items: Sequence[Scored], cfg: MCConfig) -> list[LabelledStep]:
    """One record per step: target Q̃(s_t, a_t) = (Q̂ + 1)/2, extra q = Q̂ and the step's own G_t."""
    return _records(mc_table(items, cfg, with_v=False), "mc-q", params_json(cfg), use_v=False)


def mc_v(items: Sequence[Scored], cfg: MCConfig) -> list[LabelledStep]:
    """One record per step: target Ṽ(s_t) = (V̂ + 1)/2, extra v = V̂ and the step's own G_t."""
    return _records(mc_table(items, cfg), "mc-v", params_json(cfg), use_v=True)


@register_method("mc-q", MCConfig, "Monte-Carlo Q of each (state, action), normalised to [0, 1] (AgentPRM)")
def run_mc_q(sources: Sources, cfg: MCConfig) -> MethodResult:
    items, dropped = scored(sources.trajectories, cfg)
    return MethodResult(mc_q(items, cfg), dropped)


@register_method("mc-v", MCConfig, "Monte-Carlo V of each state, normalised to [0, 1] (AgentPRM)")
def run_mc_v(sources: Sources, cfg: MCConfig) -> MethodResult:
    items, dropped = scored(sources.trajectories, cfg)
    return MethodResult(mc_v(items, cfg), dropped)

"""Shaped step targets: Monte-Carlo return plus a potential-based shaping term (AgentPRM §4; docs/methods.md §4).

    y_t = γ^{T−1−t}·R̃ + 𝟙[t < T−1]·(γ·V(s_{t+1}) − V(s_t)),   averaged per (s, a),

with R̃ = 2R − 1 and V a value function of a reference policy **on the same ±1 scale as the return** (a
value given in [0, 1] is mapped by 2v − 1 when `value_scale="unit"`; the released code mixes a logit with
the ±1 return, which proctor does not copy). Optional soft label (released code): σ(k·(ȳ − m)) with
m = mean(ȳ), k = c / IQR(ȳ) (k = 1 when IQR = 0), over the distinct (s, a) values ȳ.
By default V is the Monte-Carlo V̂ of the same data (`mc_value_fn`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np
from pydantic import Field

from proctor.credit.keys import prefix_keys, state_keys
from proctor.credit.montecarlo import MCConfig, mc_table, mean_table
from proctor.credit.outcome import CreditError, OutcomeConfig, Scored, scored, signed
from proctor.credit.records import LabelledStep, params_json
from proctor.credit.registry import MethodResult, Sources, ValueFn, register_method
from proctor.trajectory import Trajectory


class ShapedConfig(OutcomeConfig):
    """Shaped targets: the Monte-Carlo return plus γ·V(s') − V(s), optionally as soft labels."""

    gamma: float = Field(0.95, gt=0.0, le=1.0, description="γ: the discount of the return and of V(s')")
    include_reason: bool = Field(False, description="an action's identity includes its free-text reason, so the "
                                 "same action with other reasons is another (state, action) pair")
    value_scale: Literal["pm1", "unit"] = Field("pm1", description="the scale of a given value function V: pm1, "
                                                "on [−1, 1] as the return; unit, on [0, 1] (mapped by 2v − 1)")
    soft_label: bool = Field(False, description="the target is σ(k·(ȳ − mean ȳ)) with k = c / IQR, in (0, 1), "
                             "rather than the mean shaped return ȳ itself")
    c: float = Field(3.0, gt=0.0, description="soft-label steepness: k = c / IQR")


def shaped_returns(r_signed: float, values: Sequence[float], gamma: float) -> list[float]:
    """y_t for t = 0..T−1 from R̃ and V(s_0..s_{T−1}) on the ±1 scale (see module docstring)."""
    n = len(values)
    return [r_signed * gamma ** (n - 1 - t) + ((gamma * values[t + 1] - values[t]) if t < n - 1 else 0.0)
            for t in range(n)]


def soft_labels(ys: Sequence[float], c: float = 3.0) -> list[float]:
    """σ(k·(y − m)), m = mean(y), k = c / IQR(y) (linear-interpolated quartiles), k = 1 if IQR = 0."""
    arr = np.asarray(ys, dtype=float)
    m = float(arr.mean())
    q25, q75 = np.percentile(arr, [25, 75])
    iqr = float(q75 - q25)
    k = c / iqr if iqr > 0 else 1.0
    return [1.0 / (1.0 + math.exp(-k * (y - m))) for y in ys]


def mc_value_fn(items: Sequence[Scored], gamma: float, include_reason: bool = False) -> ValueFn:
    """V̂ (±1 scale, discount to go) of the states in `items`, as a value function of a trajectory."""
    table = mc_table(items, MCConfig(gamma=gamma, include_reason=include_reason)).v
    assert table is not None
    means = table.mean

    def value(traj: Trajectory) -> list[float]:
        keys = state_keys(traj, include_reason)
        missing = next((i for i, k in enumerate(keys) if k not in means), None)
        if missing is not None:
            raise CreditError(traj.id, f"steps[{missing}]", "state not in the Monte-Carlo value table")
        return [means[k] for k in keys]

    return value


def shaped(items: Sequence[Scored], value: ValueFn, cfg: ShapedConfig) -> list[LabelledStep]:
    """One record per step: target ȳ(s_t, a_t) (or its soft label), extra y_step (this step's y_t)."""
    states, pairs, ys = [], [], []
    for it in items:
        vals = [float(v) for v in value(it.traj)]
        if len(vals) != len(it.traj.steps):
            raise CreditError(it.traj.id, "value", f"value function gave {len(vals)} values for "
                              f"{len(it.traj.steps)} steps")
        if cfg.value_scale == "unit":
            vals = [2.0 * v - 1.0 for v in vals]
        s, p = prefix_keys(it.traj, cfg.include_reason)
        states.append(s)
        pairs.append(p)
        ys.append(shaped_returns(signed(it.r), vals, cfg.gamma))
    table = mean_table(pairs, ys)
    soft = dict(zip(table.mean, soft_labels(list(table.mean.values()), cfg.c), strict=True)) \
        if cfg.soft_label else {}
    params = params_json(cfg)
    out = []
    for it, s, p, y in zip(items, states, pairs, ys, strict=True):
        t_ = it.traj
        for i, step in enumerate(t_.steps):
            mean, n = table.mean[p[i]], table.count[p[i]]
            extra = {"y": mean, "y_step": y[i]}
            if soft:
                extra["soft"] = soft[p[i]]
            out.append(LabelledStep(t_.id, t_.task_id, t_.env, t_.split, i, s[i].hex(), step.action, step.reason,
                                    soft[p[i]] if soft else mean, n, "shaped", params, extra))
    return out


@register_method("shaped", ShapedConfig,
                 "MC return + γV(s') − V(s), V on the ±1 scale (default: MC V of the same data) (AgentPRM §4)")
def run_shaped(sources: Sources, cfg: ShapedConfig) -> MethodResult:
    items, dropped = scored(sources.trajectories, cfg)
    value = sources.value or mc_value_fn(items, cfg.gamma, cfg.include_reason)
    return MethodResult(shaped(items, value, cfg), dropped)

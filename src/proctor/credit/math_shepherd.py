"""Math-Shepherd hard and soft step labels from completions (docs/methods.md §2).

For step t, N completions continue from the prefix that ends with action a_t (prefix_len = t + 1):
    y_HE = 𝟙[∃j: completion j is correct],   y_SE = (1/N)·Σ_j 𝟙[completion j is correct],
where "correct" means outcome R_j ≥ `correct_at` (R_j = success, or the clipped score). The last step of a
trajectory cannot be continued, so its evidence is the trajectory's own outcome (N = 1) unless completions
for prefix_len = T are given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import Field

from proctor.credit.completions import index_completions
from proctor.credit.keys import state_keys
from proctor.credit.outcome import CreditError, OutcomeConfig, Scored, scored
from proctor.credit.records import LabelledStep, params_json
from proctor.credit.registry import MethodResult, Sources, register_method


class MathShepherdConfig(OutcomeConfig):
    correct_at: float = Field(1.0, ge=0.0, le=1.0, description="an outcome ≥ this counts as correct")


def shepherd_labels(outcomes: Sequence[float], correct_at: float = 1.0) -> tuple[float, float]:
    """(y_HE, y_SE) from the outcomes of N ≥ 1 completions."""
    if not outcomes:
        raise ValueError("Math-Shepherd labels need at least one completion outcome")
    correct = [r >= correct_at for r in outcomes]
    return float(any(correct)), sum(correct) / len(correct)


def math_shepherd(items: Sequence[Scored], completion_outcomes: Mapping[tuple[str, int], Sequence[float]],
                  cfg: MathShepherdConfig) -> list[LabelledStep]:
    """One record per step: target y_SE, extra {hard: y_HE, soft: y_SE}, visits N.

    `completion_outcomes[(trajectory id, t + 1)]` are the outcomes of the completions from the prefix
    ending with step t.
    """
    params = params_json(cfg)
    out = []
    for it in items:
        t_ = it.traj
        n_steps = len(t_.steps)
        keys = state_keys(t_)
        for i, step in enumerate(t_.steps):
            evidence = completion_outcomes.get((t_.id, i + 1))
            if evidence is None:
                if i < n_steps - 1:
                    raise CreditError(t_.id, f"completions[prefix_len={i + 1}]",
                                      f"no completions for step {i}")
                evidence = [it.r]
            hard, soft = shepherd_labels(evidence, cfg.correct_at)
            out.append(LabelledStep(t_.id, t_.task_id, t_.env, t_.split, i, keys[i].hex(), step.action, step.reason,
                                    soft, len(evidence), "math-shepherd", params, {"hard": hard, "soft": soft}))
    return out


@register_method("math-shepherd", MathShepherdConfig,
                 "hard/soft step labels from N completions per prefix (Math-Shepherd)", needs=("completions",))
def run_math_shepherd(sources: Sources, cfg: MathShepherdConfig) -> MethodResult:
    items, dropped = scored(sources.trajectories, cfg)
    comps, dropped_c = scored(sources.completions or [], cfg)
    index = index_completions([it.traj for it in items], [c.traj for c in comps])
    r_of = {c.traj.id: c.r for c in comps}
    outcomes = {key: [r_of[c.id] for c in cs] for key, cs in index.items()}
    return MethodResult(math_shepherd(items, outcomes, cfg), dropped + dropped_c)

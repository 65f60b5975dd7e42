"""Stepwise progress attribution, SPA-RL (docs/methods.md §6).

Two pieces:
- the progress estimator's data: one example per trajectory, a score ĉ_k read at the end of every turn
  k, and one outcome R; its loss is (Σ_k ĉ_k − R)², only the sum is supervised (`progress_examples`);
- the dense reward for RL from the estimator's scores (`compose_rewards`):
      r_k = α·ĉ_k + β·g_k + 𝟙[k = T−1]·w·R,   g_k = 𝟙[action k was valid] (the env's `valid` flag),
  with β = 0.5 (released) and w the weight of the outcome term at the last step (w = 0 turns it off).
  The released code drops ĉ_k and scales by (T−1−k); proctor follows the paper.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import Field

from proctor.credit.keys import state_keys
from proctor.credit.outcome import CreditError, OutcomeConfig, Scored, scored
from proctor.credit.records import LabelledStep, ProgressExample, params_json
from proctor.credit.registry import MethodResult, Sources, register_method


class SPAConfig(OutcomeConfig):
    """SPA-RL: the progress estimator's examples, or dense rewards from its scores."""

    progress_score: str | None = Field(None, description="the Step.scores key of the progress estimator's ĉ_k: "
                                       "emit the dense rewards r_k; None: emit the estimator's training examples "
                                       "(one per trajectory)")
    alpha: float = Field(1.0, description="α: the weight of the progress score ĉ_k in r_k")
    beta: float = Field(0.5, description="β: the weight of the grounding term g_k (1 when action k was valid)")
    outcome_weight: float = Field(1.0, description="w: the weight of the outcome R added at the last step (0: "
                                  "none)")


def compose_rewards(progress: Sequence[float], valid: Sequence[bool], outcome: float, alpha: float = 1.0,
                    beta: float = 0.5, outcome_weight: float = 1.0) -> list[float]:
    """r_k = α·ĉ_k + β·g_k, plus w·R at the last step (see module docstring)."""
    if len(progress) != len(valid):
        raise ValueError(f"{len(progress)} progress scores for {len(valid)} steps")
    n = len(progress)
    return [alpha * c + beta * float(g) + (outcome_weight * outcome if k == n - 1 else 0.0)
            for k, (c, g) in enumerate(zip(progress, valid, strict=True))]


def progress_examples(items: Sequence[Scored], cfg: SPAConfig) -> list[ProgressExample]:
    """One example per trajectory: score positions = every turn, target = the outcome R ∈ [0, 1]."""
    params = params_json(cfg)
    return [ProgressExample(it.traj.id, it.traj.task_id, it.traj.env, it.traj.split,
                            list(range(len(it.traj.steps))), it.r, "spa", params) for it in items]


def spa_rewards(items: Sequence[Scored], cfg: SPAConfig) -> list[LabelledStep]:
    """One record per step: target r_k, extra {progress: ĉ_k, grounding: g_k}; ĉ_k from `Step.scores`."""
    key = cfg.progress_score
    if key is None:
        raise ValueError("spa_rewards needs progress_score: the Step.scores key holding the estimator's ĉ_k")
    params = params_json(cfg)
    out = []
    for it in items:
        t_ = it.traj
        progress = []
        for i, step in enumerate(t_.steps):
            if key not in step.scores:
                raise CreditError(t_.id, f"steps[{i}].scores[{key}]", "no progress score for this step")
            progress.append(step.scores[key])
        valid = [s.valid for s in t_.steps]
        rewards = compose_rewards(progress, valid, it.r, cfg.alpha, cfg.beta, cfg.outcome_weight)
        keys = state_keys(t_)
        for i, step in enumerate(t_.steps):
            out.append(LabelledStep(t_.id, t_.task_id, t_.env, t_.split, i, keys[i].hex(), step.action,
                                    step.reason, rewards[i], 1, "spa", params,
                                    {"progress": progress[i], "grounding": float(valid[i])}))
    return out


@register_method("spa", SPAConfig, "SPA: progress-estimator examples, or dense rewards α·ĉ + β·g (+ outcome) "
                 "when progress_score names the Step.scores key of ĉ")
def run_spa(sources: Sources, cfg: SPAConfig) -> MethodResult:
    items, dropped = scored(sources.trajectories, cfg)
    if cfg.progress_score is None:
        return MethodResult(progress_examples(items, cfg), dropped, record_type=ProgressExample)
    return MethodResult(spa_rewards(items, cfg), dropped)

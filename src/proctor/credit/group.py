"""Group advantages over the K rollouts of one task: GRPO, leave-one-out, GiGPO (docs/methods.md §3).

- GRPO episode advantage: A^E_i = (R_i − mean_j R_j) / F, F = std_j R_j (sample std, as TRL/verl) or 1.
- Leave-one-out (SPA's released code): A_i = R_i − b_i, b_i = mean_{j≠i} R_j.
- GiGPO (arXiv 2505.10978): anchor states s̃ = the raw observation (no history) group the steps of the K
  rollouts: G(s̃) = {R_t^(i) : s_t^(i) = s̃} with the return to go R_t = Σ_{k≥t} γ^{k−t} r_k;
  A^S = (R_t − mean G(s̃)) / F, A^S = 0 for a singleton group; A = A^E + ω·A^S (ω = 1, γ = 0.95).
  Anchors match exactly, or (optional) by similarity: observations whose difflib ratio to a group's first
  (in sorted order) observation is ≥ the threshold share its group.
  Step rewards r_k are the env's `Step.reward` (`step_reward="env"`, the default: the paper's definition),
  or the outcome at the last step and 0 before (`step_reward="outcome"`, for outcome-only data whose env
  rewards are absent or on another scale, e.g. twenty_questions' −1 per turn).
All means use math.fsum and groups are formed in canonical order, so results do not depend on input order.
These list functions are the one implementation; `proctor.rl.advantages` applies them to tensors of group ids.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Hashable, Sequence
from typing import Literal

from pydantic import Field

from proctor.credit.keys import state_keys
from proctor.credit.outcome import CreditError, OutcomeConfig, Scored, check_one_task, group_by_task, scored
from proctor.credit.records import LabelledStep, params_json
from proctor.credit.registry import MethodResult, Sources, register_method


class GroupCreditConfig(OutcomeConfig):
    """The `grpo` credit method's config (the trainer's is `proctor.rl.grpo.GRPOConfig`)."""

    normalize: bool = Field(True, description="divide by the group's std (F = std) instead of F = 1")


class GiGPOConfig(GroupCreditConfig):
    omega: float = Field(1.0, description="ω: weight of the step advantage A^S")
    gamma: float = Field(0.95, gt=0.0, le=1.0, description="γ: discount of the return to go R_t")
    step_reward: Literal["env", "outcome"] = Field(
        "env", description="r_t of R_t: the env's Step.reward (the paper's), or 'outcome' (R on the last step)")
    similarity: float | None = Field(None, gt=0.0, le=1.0, description="anchor similarity threshold")


def centred(xs: Sequence[float], normalize: bool = True) -> list[float]:
    """(x − mean) / F over one group, F = sample std (or 1); all zeros for one value or equal values. The one
    implementation of group centring (`proctor.rl.advantages` applies it per group of a tensor)."""
    if len(xs) < 2 or min(xs) == max(xs):
        return [0.0] * len(xs)
    mean = math.fsum(xs) / len(xs)
    f = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (len(xs) - 1)) if normalize else 1.0
    return [(x - mean) / f for x in xs]


def grpo_advantages(outcomes: Sequence[float], normalize: bool = True) -> list[float]:
    """A^E_i = (R_i − mean R) / F over one task's rollouts; 0 for a single rollout."""
    return centred(outcomes, normalize)


def loo_advantages(outcomes: Sequence[float]) -> list[float]:
    """A_i = R_i − mean_{j≠i} R_j (needs K ≥ 2)."""
    k = len(outcomes)
    if k < 2:
        raise ValueError(f"leave-one-out needs at least 2 rollouts, got {k}")
    total = math.fsum(outcomes)
    return [r - (total - r) / (k - 1) for r in outcomes]


def returns_to_go(rewards: Sequence[float], gamma: float) -> list[float]:
    """R_t = Σ_{k≥t} γ^{k−t}·r_k."""
    out, acc = [0.0] * len(rewards), 0.0
    for t in range(len(rewards) - 1, -1, -1):
        acc = rewards[t] + gamma * acc
        out[t] = acc
    return out


def anchor_ids(observations: Sequence[str], similarity: float | None = None) -> list[Hashable]:
    """The anchor group of each observation: itself (exact match) or a similarity cluster's id."""
    if similarity is None:
        return list(observations)
    heads: list[str] = []
    cluster: dict[str, int] = {}
    for obs in sorted(set(observations)):
        for i, head in enumerate(heads):
            if difflib.SequenceMatcher(None, head, obs, autojunk=False).ratio() >= similarity:
                cluster[obs] = i
                break
        else:
            cluster[obs] = len(heads)
            heads.append(obs)
    return [cluster[o] for o in observations]


def gigpo_step_advantages(returns: Sequence[Sequence[float]], anchors: Sequence[Sequence[Hashable]],
                          normalize: bool = True) -> tuple[list[list[float]], list[list[int]]]:
    """A^S of every step of every rollout, and its anchor-group size (see module docstring)."""
    members: dict[Hashable, list[tuple[int, int]]] = {}
    for i, row in enumerate(anchors):
        for t, a in enumerate(row):
            members.setdefault(a, []).append((i, t))
    adv = [[0.0] * len(r) for r in returns]
    size = [[1] * len(r) for r in returns]
    for group in members.values():
        values = centred([returns[i][t] for i, t in group], normalize)
        for (i, t), a in zip(group, values, strict=True):
            adv[i][t] = a
            size[i][t] = len(group)
    return adv, size


def _group_records(group: Sequence[Scored], targets: Sequence[Sequence[float]], visits: Sequence[Sequence[int]],
                   extras: Sequence[Sequence[dict[str, float]]], method: str, params: str) -> list[LabelledStep]:
    out = []
    for it, tg, vs, ex in zip(group, targets, visits, extras, strict=True):
        t_ = it.traj
        keys = state_keys(t_)
        for i, step in enumerate(t_.steps):
            out.append(LabelledStep(t_.id, t_.task_id, t_.env, t_.split, i, keys[i].hex(), step.action,
                                    step.reason, tg[i], vs[i], method, params, ex[i]))
    return out


def _episode_records(group: Sequence[Scored], adv: Sequence[float], method: str, params: str
                     ) -> list[LabelledStep]:
    """Every step of each rollout gets its episode's advantage; visits = the group size K."""
    k = len(group)
    return _group_records(group, [[a] * len(it.traj.steps) for a, it in zip(adv, group, strict=True)],
                          [[k] * len(it.traj.steps) for it in group],
                          [[{"outcome": it.r}] * len(it.traj.steps) for it in group], method, params)


def grpo_group(group: Sequence[Scored], cfg: GroupCreditConfig) -> list[LabelledStep]:
    """GRPO episode advantages of one task's rollouts, on every step."""
    check_one_task([it.traj for it in group])
    return _episode_records(group, grpo_advantages([it.r for it in group], cfg.normalize), "grpo",
                            params_json(cfg))


def loo_group(group: Sequence[Scored], cfg: OutcomeConfig) -> list[LabelledStep]:
    """Leave-one-out advantages of one task's rollouts, on every step."""
    check_one_task([it.traj for it in group])
    if len(group) < 2:
        t_ = group[0].traj
        raise CreditError(t_.id, "task_id", f"leave-one-out needs >= 2 rollouts of task {t_.task_id!r}, got 1")
    return _episode_records(group, loo_advantages([it.r for it in group]), "loo", params_json(cfg))


def gigpo_group(group: Sequence[Scored], cfg: GiGPOConfig) -> list[LabelledStep]:
    """A = A^E + ω·A^S for every step of one task's rollouts (see module docstring)."""
    check_one_task([it.traj for it in group])
    episode = grpo_advantages([it.r for it in group], cfg.normalize)
    rewards = [[s.reward for s in it.traj.steps] if cfg.step_reward == "env"
               else [0.0] * (len(it.traj.steps) - 1) + [it.r] for it in group]
    rtg = [returns_to_go(r, cfg.gamma) for r in rewards]
    flat_obs = [s.observation for it in group for s in it.traj.steps]
    flat_ids = iter(anchor_ids(flat_obs, cfg.similarity))
    anchors = [[next(flat_ids) for _ in it.traj.steps] for it in group]
    step_adv, sizes = gigpo_step_advantages(rtg, anchors, cfg.normalize)
    targets = [[e + cfg.omega * a for a in row] for e, row in zip(episode, step_adv, strict=True)]
    extras = [[{"episode": e, "step": a, "return_to_go": g} for a, g in zip(row, rs, strict=True)]
              for e, row, rs in zip(episode, step_adv, rtg, strict=True)]
    return _group_records(group, targets, sizes, extras, "gigpo", params_json(cfg))


@register_method("grpo", GroupCreditConfig, "GRPO episode advantage (R − mean)/std over a task's rollouts")
def run_grpo(sources: Sources, cfg: GroupCreditConfig) -> MethodResult:
    items, dropped = scored(sources.trajectories, cfg)
    return MethodResult([r for g in group_by_task(items).values() for r in grpo_group(g, cfg)], dropped)


@register_method("loo", OutcomeConfig, "leave-one-out advantage R − mean of the task's other rollouts (SPA code)")
def run_loo(sources: Sources, cfg: OutcomeConfig) -> MethodResult:
    items, dropped = scored(sources.trajectories, cfg)
    return MethodResult([r for g in group_by_task(items).values() for r in loo_group(g, cfg)], dropped)


@register_method("gigpo", GiGPOConfig, "GiGPO: episode + anchor-state step advantages, A^E + ω·A^S")
def run_gigpo(sources: Sources, cfg: GiGPOConfig) -> MethodResult:
    items, dropped = scored(sources.trajectories, cfg)
    return MethodResult([r for g in group_by_task(items).values() for r in gigpo_group(g, cfg)], dropped)

"""Outcomes R(τ), their ±1 mapping, and the input checks every estimator runs first.

Outcome source (docs/methods.md §0): `outcome="success"` uses R = float(traj.success) ∈ {0, 1};
`outcome="score"` uses the env's grade, R = clip(traj.score, 0, 1). A trajectory that ended in
`env_error` / `agent_error` has no valid outcome: it is an error (naming the trajectory and field) unless
`drop_errors=True`, which removes it and reports how many were removed.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from proctor.trajectory import Trajectory

log = logging.getLogger(__name__)

OutcomeSource = Literal["success", "score"]
ERROR_TERMINATIONS = ("env_error", "agent_error")


class CreditError(ValueError):
    """Malformed input to a credit estimator; names the trajectory and the field."""

    def __init__(self, trajectory_id: str, field: str, message: str):
        self.trajectory_id = trajectory_id
        self.field = field
        super().__init__(f"trajectory {trajectory_id!r}, field {field!r}: {message}")


class OutcomeConfig(BaseModel):
    """Parameters shared by every method that reads trajectory outcomes."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    outcome: OutcomeSource = Field(default="success", description="the outcome R ∈ [0, 1] of a trajectory: "
                                   "success (1 or 0), or score (the env's grade, clipped to [0, 1])")
    drop_errors: bool = Field(default=False, description="leave out trajectories that ended in env_error or "
                              "agent_error (counted as dropped); false: such a trajectory is an error")


def outcome(traj: Trajectory, source: OutcomeSource = "success") -> float:
    """R(τ) ∈ [0, 1]: `float(success)`, or `score` clipped to [0, 1]; errors for failed episodes."""
    if traj.termination in ERROR_TERMINATIONS:
        raise CreditError(traj.id, "termination",
                          f"{traj.termination} has no valid outcome ({traj.error}); pass drop_errors=True "
                          "to skip such trajectories")
    if source == "success":
        return float(traj.success)
    if source == "score":
        if traj.score is None or not math.isfinite(traj.score):
            raise CreditError(traj.id, "score", f"outcome 'score' needs a finite score, got {traj.score!r}")
        return min(1.0, max(0.0, float(traj.score)))
    raise ValueError(f"unknown outcome source {source!r}; use 'success' or 'score'")


def signed(r: float) -> float:
    """R̃ = 2·R − 1, the outcome on the ±1 scale (docs/methods.md §0)."""
    return 2.0 * r - 1.0


def canonical_order(trajs: Iterable[Trajectory]) -> list[Trajectory]:
    """Sort by (env, task_id, sample, id) so every result is independent of the input order."""
    return sorted(trajs, key=lambda t: (t.env, t.task_id, t.sample, t.id))


def check_trajectories(trajs: Sequence[Trajectory]) -> None:
    """Duplicate ids and empty trajectories are errors naming the trajectory and field."""
    seen: set[str] = set()
    for t in trajs:
        if t.id in seen:
            raise CreditError(t.id, "id", "appears more than once in the input")
        seen.add(t.id)
        if not t.steps:
            raise CreditError(t.id, "steps", "empty trajectory: no steps to label")


@dataclass(frozen=True)
class Scored:
    """A trajectory with its outcome R(τ) ∈ [0, 1]."""

    traj: Trajectory
    r: float


def scored(trajs: Iterable[Trajectory], cfg: OutcomeConfig) -> tuple[list[Scored], int]:
    """Check, order canonically and attach outcomes; returns (scored trajectories, number dropped)."""
    ordered = canonical_order(trajs)
    kept, dropped = [], 0
    for t in ordered:
        if cfg.drop_errors and t.termination in ERROR_TERMINATIONS:
            dropped += 1
            continue
        kept.append(t)
    check_trajectories(kept)
    if dropped:
        log.warning("dropped %d trajectories that ended in env_error/agent_error", dropped)
    return [Scored(t, outcome(t, cfg.outcome)) for t in kept], dropped


def check_one_task(group: Sequence[Trajectory]) -> None:
    """A group (the K rollouts of one task) must share env and task_id; errors name the odd one out."""
    if not group:
        raise ValueError("empty group of rollouts")
    first = group[0]
    for t in group[1:]:
        if t.env != first.env:
            raise CreditError(t.id, "env", f"{t.env!r} in a group of env {first.env!r} (mixed tasks)")
        if t.task_id != first.task_id:
            raise CreditError(t.id, "task_id",
                              f"{t.task_id!r} in a group of task {first.task_id!r} (mixed tasks)")


def group_by_task(items: Iterable[Scored]) -> dict[tuple[str, str], list[Scored]]:
    """The rollouts of each (env, task_id), in the input's order."""
    groups: dict[tuple[str, str], list[Scored]] = defaultdict(list)
    for it in items:
        groups[(it.traj.env, it.traj.task_id)].append(it)
    return dict(groups)

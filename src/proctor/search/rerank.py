"""Trajectory-level best-of-N as a rerank of independent attempts (docs/methods.md §8.2): a pure function
of the attempts of one task and their PRM step scores.

Each attempt i with step scores s_1..s_T gets agg_i = aggregate(s, how) (`last`, `min`, `prod`, `mean`;
`proctor.search.aggregate`); best-of-N keeps argmax_i agg_i; weighted best-of-N keeps, among the attempts
whose answer has the largest W(a) = Σ_{i: answer_i = a} agg_i, the one with the largest agg_i. An attempt
without scores (no steps, or not scored) has no aggregate and is chosen only when no attempt has one.
The answer of an agent attempt is its last action (an arithmetic episode's "Answer: 24"), or its final
observation; an attempt without steps has answer None.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Literal

from proctor.search.aggregate import (
    StepAggregation,
    aggregate,
    answer_weights,
    best_index,
    weighted_best_index,
)
from proctor.trajectory import Trajectory

AnswerKey = Literal["last_action", "final_observation"]


def answer_of(traj: Trajectory, key: AnswerKey = "last_action") -> Hashable:
    """What weighted best-of-N votes on: the last action or the final observation (None without steps)."""
    if not traj.steps:
        return None
    return traj.steps[-1].action if key == "last_action" else traj.final_observation


@dataclass
class Rerank:
    """The choice among one task's attempts: the index kept, every attempt's aggregate, the answer weights."""

    index: int
    aggregates: list[float | None]
    weights: dict[Hashable, float] | None = None


def rerank(attempts: Sequence[Trajectory], step_scores: Sequence[Sequence[float] | None],
           how: StepAggregation = "last", weighted: bool = False, answer: AnswerKey = "last_action") -> Rerank:
    """Pick one of `attempts` (one task's N attempts) by their aggregated PRM step scores (module docstring)."""
    if not attempts:
        raise ValueError("rerank needs at least one attempt")
    if len(step_scores) != len(attempts):
        raise ValueError(f"{len(attempts)} attempts but {len(step_scores)} score lists")
    for t, s in zip(attempts, step_scores, strict=True):
        if s is not None and len(s) != len(t.steps):
            raise ValueError(f"trajectory {t.id}: {len(t.steps)} steps but {len(s)} scores")
    aggs = [aggregate(s, how) if s else None for s in step_scores]
    if not weighted:
        return Rerank(best_index(aggs), aggs)
    answers = [answer_of(t, answer) for t in attempts]
    return Rerank(weighted_best_index(answers, aggs), aggs, answer_weights(answers, aggs))

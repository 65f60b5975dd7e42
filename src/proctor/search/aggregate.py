"""Step-score aggregation and best-of-N selection: pure functions (docs/methods.md §8.2); the one `aggregate` of
step scores, used by search and by the TRL reward function (`proctor.integrations.rewards`).

A trajectory (or a partial beam) with PRM step scores s_1..s_T in [0, 1] gets one score:

    last  s_T            the last step's score (a Q/value PRM's estimate of success; search-and-learn's default)
    min   min_k s_k      the weakest step (Lightman et al., arXiv 2305.20050; Snell et al., arXiv 2408.03314)
    prod  Π_k s_k        the probability that every step is right, steps independent (Lightman et al.)
    mean  (1/T) Σ_k s_k

Best-of-N keeps the attempt with the largest aggregate (AgentPRM, arXiv 2502.10325, §5; search-and-learn,
github.com/huggingface/search-and-learn, `sal/utils/score.py`). Weighted best-of-N (Li et al., arXiv
2206.02336, verifier-weighted voting; search-and-learn's `find_answer` with weights) sums the aggregates of
the attempts that reach the same answer, W(a) = Σ_{i: answer_i = a} agg_i, and returns the answer with the
largest W. Ties always go to the earliest index (or the answer seen first), so the choice is deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import Literal, get_args

#: how step scores make one score (not to be confused with a loss's aggregation, `proctor.rl.policy_losses`)
StepAggregation = Literal["last", "min", "prod", "mean"]
STEP_AGGREGATIONS: tuple[str, ...] = get_args(StepAggregation)


def aggregate(scores: Sequence[float], how: StepAggregation = "last") -> float:
    """One score for a sequence of step scores (see module docstring); an empty sequence is an error."""
    if not scores:
        raise ValueError("cannot aggregate an empty list of step scores")
    if how == "last":
        return float(scores[-1])
    if how == "min":
        return float(min(scores))
    if how == "prod":
        return float(math.prod(scores))
    if how == "mean":
        return math.fsum(scores) / len(scores)
    raise ValueError(f"unknown aggregation {how!r}; choose one of {', '.join(STEP_AGGREGATIONS)}")


def best_index(values: Sequence[float | None]) -> int:
    """argmax_i values_i, the earliest on ties; None (an unscored attempt) loses to any number, and when
    all are None the first index is returned. An empty sequence is an error."""
    if not values:
        raise ValueError("best_index of an empty sequence")
    best = 0
    for i, v in enumerate(values):
        if v is not None and (values[best] is None or v > values[best]):
            best = i
    return best


def answer_weights(answers: Sequence[Hashable], values: Sequence[float | None]) -> dict[Hashable, float]:
    """W(a) = Σ_{i: answers_i = a} values_i (unscored attempts add nothing), answers in first-seen order."""
    if len(answers) != len(values):
        raise ValueError(f"{len(answers)} answers but {len(values)} scores")
    pairs = list(zip(answers, values, strict=True))
    return {a: math.fsum(float(v) for b, v in pairs if b == a and v is not None) for a in dict.fromkeys(answers)}


def weighted_best_index(answers: Sequence[Hashable], values: Sequence[float | None]) -> int:
    """The attempt that weighted best-of-N returns: among the attempts whose answer has the largest W(a)
    (the first-seen answer on ties), the one with the largest aggregate (the earliest on ties)."""
    weights = answer_weights(answers, values)
    winner = max(weights, key=lambda a: weights[a])  # max keeps the first maximal key: first-seen order
    members = [i for i, a in enumerate(answers) if a == winner]
    return members[best_index([values[i] for i in members])]

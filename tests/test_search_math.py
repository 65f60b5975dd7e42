"""The math of proctor.search, by hand: step-score aggregation, best-of-N and weighted best-of-N, merging and
ranking candidates, the rerank of attempts, and budgets."""

from __future__ import annotations

import pytest

from proctor.prompts import Candidate
from proctor.search import (
    Budget,
    aggregate,
    answer_weights,
    best_index,
    merge_candidates,
    rank,
    rerank,
    trajectory_budget,
    weighted_best_index,
)
from proctor.trajectory import Step, Trajectory


def test_aggregations_by_hand():
    s = [0.9, 0.5, 0.8]
    assert aggregate(s, "last") == 0.8
    assert aggregate(s, "min") == 0.5
    assert aggregate(s, "prod") == pytest.approx(0.36)  # 0.9 · 0.5 · 0.8
    assert aggregate(s, "mean") == pytest.approx(2.2 / 3)
    with pytest.raises(ValueError, match="empty"):
        aggregate([], "min")
    with pytest.raises(ValueError, match="unknown aggregation 'max'"):
        aggregate(s, "max")


def test_best_index_takes_the_earliest_maximum_and_skips_unscored():
    assert best_index([0.2, 0.7, 0.7, 0.1]) == 1
    assert best_index([None, 0.1, None]) == 1
    assert best_index([None, None]) == 0
    with pytest.raises(ValueError):
        best_index([])


def test_weighted_best_of_n_sums_by_answer_and_can_disagree_with_best_of_n():
    answers = ["A", "B", "A", "C"]
    values = [0.3, 0.9, 0.7, None]
    assert answer_weights(answers, values) == pytest.approx({"A": 1.0, "B": 0.9, "C": 0.0})
    assert best_index(values) == 1                       # best-of-N: the single best attempt (answer B)
    assert weighted_best_index(answers, values) == 2     # weighted: answer A (0.3 + 0.7), its best attempt
    # equal weights: the answer seen first wins
    assert weighted_best_index(["X", "Y"], [0.5, 0.5]) == 0


def test_merge_keeps_counts_and_rank_breaks_ties_by_count_then_draw_order():
    merged = merge_candidates([Candidate("a"), Candidate("b"), Candidate("a"), Candidate("c"), Candidate("b"),
                               Candidate("a")])
    assert [(m.action, m.count, m.index) for m in merged] == [("a", 3, 0), ("b", 2, 1), ("c", 1, 3)]
    for m, s in zip(merged, [0.5, 0.5, 0.5], strict=True):
        m.score = s
    assert [m.action for m in rank(merged)] == ["a", "b", "c"]   # all tied: more draws first
    merged[2].score = 0.6
    assert [m.action for m in rank(merged)] == ["c", "a", "b"]
    solo = merge_candidates([Candidate("x"), Candidate("y")])
    solo[0].score = solo[1].score = 0.4
    assert [m.action for m in rank(solo)] == ["x", "y"]           # same score, same count: drawn first


def _traj(actions: list[str], success: bool = False, **kw) -> Trajectory:
    steps = [Step(observation=f"o{i}", action=a, token_ids=[1] * (i + 1)) for i, a in enumerate(actions)]
    return Trajectory(id="t" + "".join(actions), env="e", task_id="k", sample=0, task="t", split="test", seed=0,
                      agent="a", steps=steps, success=success, score=float(success),
                      termination="success" if success else "failure", **kw)


def test_rerank_by_aggregate_and_weighted():
    attempts = [_traj(["x", "Answer: 1"]), _traj(["y", "Answer: 2"]), _traj(["z", "Answer: 1"]), _traj([])]
    scores = [[0.9, 0.3], [0.2, 0.8], [0.6, 0.6], None]
    assert rerank(attempts, scores, "last").index == 1          # last: 0.3, 0.8, 0.6
    assert rerank(attempts, scores, "min").index == 2           # min: 0.3, 0.2, 0.6
    r = rerank(attempts, scores, "mean")                        # mean: 0.6, 0.5, 0.6 -> the earliest
    assert r.index == 0 and r.aggregates[:3] == pytest.approx([0.6, 0.5, 0.6]) and r.aggregates[3] is None
    w = rerank(attempts, scores, "last", weighted=True)         # W(Answer: 1) = 0.3 + 0.6 > W(Answer: 2) = 0.8
    assert w.index == 2 and w.weights["Answer: 1"] == pytest.approx(0.9)
    with pytest.raises(ValueError, match="2 steps but 1 scores"):
        rerank(attempts[:1], [[0.5]])


def test_budgets_add_and_come_from_candidate_meta():
    b = Budget(env_steps=2).add({"env_steps": 3, "prm_calls": 4, "unknown": 9, "forks": True})
    assert b.as_dict() == {"env_steps": 5, "replayed_steps": 0, "forks": 0, "candidates": 0, "generated_tokens": 0,
                           "prm_calls": 4}
    plain = _traj(["a", "b"])                                    # 1 + 2 generated tokens, no search meta
    assert trajectory_budget(plain).as_dict()["generated_tokens"] == 3
    searched = plain.model_copy(update={"steps": [
        s.model_copy(update={"info": {"candidate_meta": {"budget": {"env_steps": 1, "candidates": 8,
                                                                     "generated_tokens": 40, "prm_calls": 5}}}})
        for s in plain.steps]})
    assert trajectory_budget(searched).as_dict() == {"env_steps": 2, "replayed_steps": 0, "forks": 0,
                                                     "candidates": 16, "generated_tokens": 80, "prm_calls": 10}


def test_best_of_n_probabilities_by_hand():
    from proctor.stats import best_of_n_probabilities

    p, q = [0.5, 0.3, 0.2], [0.1, 0.9, 0.5]
    # n = 2, by score: a0 (F = 0.5), a2 (F = 0.7), a1 (F = 1): 0.5² = 0.25, 0.7² − 0.5² = 0.24, 1 − 0.7² = 0.51
    assert best_of_n_probabilities(p, q, 2) == pytest.approx([0.25, 0.51, 0.24])
    assert best_of_n_probabilities(p, q, 1) == pytest.approx(p)
    # a tie between a1 and a2 (score 0.9): the group gets 1 − 0.5² = 0.75, split 0.3 : 0.2
    assert best_of_n_probabilities(p, [0.1, 0.9, 0.9], 2) == pytest.approx([0.25, 0.45, 0.30])
    # an action the policy never draws is never chosen, whatever its score
    assert best_of_n_probabilities([0.0, 1.0], [1.0, 0.0], 8) == [0.0, 1.0]
    with pytest.raises(ValueError, match="need equal"):
        best_of_n_probabilities([1.0], [0.1, 0.2], 2)


def test_step_score_and_loss_aggregation_have_a_name_each():
    """`Aggregation` meant both; now the step scores' is `StepAggregation` (search, the TRL reward) and a loss's
    over tokens is `LossAggregation` (`aggregate_loss`, the RL trainers)."""
    import importlib
    from typing import get_args

    import proctor.rl.policy_losses as losses

    steps = importlib.import_module("proctor.search.aggregate")  # `proctor.search.aggregate` is also the function

    assert steps.STEP_AGGREGATIONS == get_args(steps.StepAggregation) == ("last", "min", "prod", "mean")
    assert get_args(losses.LossAggregation) == ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum")
    assert not hasattr(steps, "Aggregation") and not hasattr(losses, "Aggregation")
    assert not hasattr(losses, "aggregate")  # the one `aggregate` is the step scores'
    with pytest.warns(DeprecationWarning, match="proctor.search.AGGREGATIONS is now proctor.search.STEP_AGGREGATIONS"):
        from proctor.search import AGGREGATIONS
    assert AGGREGATIONS == steps.STEP_AGGREGATIONS

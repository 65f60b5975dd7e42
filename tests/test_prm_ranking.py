"""Ranking metrics of `proctor.prm.ranking` and the target agreement of `proctor.prm.trajectory_eval`,
against hand-computed numbers."""

from __future__ import annotations

import numpy as np
import pytest

from proctor.prm.ranking import RankingPair, bootstrap_by_group, pairwise_accuracy, ranking_pairs, spread
from proctor.prm.trajectory_eval import target_agreement


def test_ranking_pairs_keep_gaps_of_at_least_the_margin():
    q = {("s", 1): {"a": 0.9, "b": 0.5, "c": 0.8}, ("s", 2): {"x": 0.3, "y": 0.5}, ("s", 3): {"only": 1.0}}
    pairs = ranking_pairs(q, margin=0.2)
    # s1: a−b = 0.4 and c−b = 0.3 are pairs, a−c = 0.1 is not; s2: y−x = 0.2 (0.19999… in floats) is kept
    got = [(p.state, p.better, p.worse, round(p.gap, 6)) for p in pairs]
    assert got == [(("s", 1), "a", "b", 0.4), (("s", 1), "c", "b", 0.3), (("s", 2), "y", "x", 0.2)]
    assert len(ranking_pairs(q, margin=0.35)) == 1
    with pytest.raises(ValueError, match="margin must be > 0"):
        ranking_pairs(q, margin=0)


def test_pairwise_accuracy_counts_ties_as_wrong_with_a_wilson_interval():
    pairs = [RankingPair("s1", "a", "b", 0.4), RankingPair("s1", "c", "b", 0.3), RankingPair("s2", "y", "x", 0.2)]
    scores = {("s1", "a"): 0.7, ("s1", "b"): 0.6, ("s1", "c"): 0.6, ("s2", "x"): 0.1, ("s2", "y"): 0.9}
    res = pairwise_accuracy(pairs, lambda s, a: scores[(s, a)])
    # right: a > b, y > x; c = b is a tie → 2 of 3. Wilson (z = 1.96), p̂ = 2/3, n = 3:
    # centre = (p̂ + z²/6)/(1 + z²/3) = 0.57309, half = z/(1 + z²/3)·sqrt(p̂(1−p̂)/3 + z²/36) = 0.36544
    assert (res.pairs, res.right, res.ties) == (3, 2, 1)
    assert res.accuracy == pytest.approx(2 / 3)
    assert res.interval == pytest.approx((0.20766, 0.93851), abs=1e-5)
    assert res.as_dict()["ci95_wilson"] == list(res.interval)
    with pytest.raises(ValueError, match="no pairs"):
        pairwise_accuracy([], lambda s, a: 0.0)


def test_bootstrap_resamples_whole_groups():
    groups = ["a", "a", "b", "c", "c", "c"]
    seen: list[set[int]] = []

    def stat(idx: np.ndarray) -> float:
        seen.append(set(idx.tolist()))
        return float(len(idx))

    lo, hi = bootstrap_by_group(groups, stat, n_boot=200, seed=1)
    whole = [{0, 1}, {2}, {3, 4, 5}]
    for s in seen:  # every resample is a union of whole groups
        assert all(g <= s or not (g & s) for g in whole)
    assert 3 <= lo <= hi <= 9  # three draws of groups of sizes 1–3
    # a statistic that is the same on every resample has a point interval
    values = np.array([0.5, 0.5, 0.5, 0.5, 0.5, 0.5])
    assert bootstrap_by_group(groups, lambda i: float(values[i].mean()), n_boot=50) == (0.5, 0.5)
    # resamples on which the statistic is undefined are skipped; None when most are
    def undefined(i: np.ndarray) -> float:
        raise ValueError("one class")
    assert bootstrap_by_group(groups, undefined, n_boot=20) is None


def test_spread():
    assert spread([0, 1, 2, 3, 4]) == {"n": 5, "min": 0.0, "p5": pytest.approx(0.2), "median": 2.0,
                                       "p95": pytest.approx(3.8), "max": 4.0, "std": pytest.approx(2 ** 0.5)}


def test_target_agreement_hand_computed():
    scores, targets = [0.9, 0.2, 0.6, 0.4], [1.0, 0.0, 0.3, 0.8]
    out = target_agreement(scores, targets, ["a", "a", "b", "b"], n_boot=200)
    # Brier = (0.01 + 0.04 + 0.09 + 0.16)/4 = 0.075; AUROC with positives {0.9, 0.4} (targets ≥ 0.5) against
    # negatives {0.2, 0.6}: 0.9 > 0.2, 0.9 > 0.6, 0.4 > 0.2, 0.4 < 0.6 → 3/4
    assert out["brier"] == pytest.approx(0.075) and out["auroc"] == pytest.approx(0.75)
    assert (out["steps"], out["tasks"], out["positives"]) == (4, 2, 2)
    # the constant predictor at the target mean 0.525: Σ(y − 0.525)²/4 = (0.225625 + 0.275625 + 0.050625 +
    # 0.075625)/4 = 0.156875
    assert out["brier_of_constant_mean"] == pytest.approx(0.156875)
    lo, hi = out["brier_ci95"]
    assert lo <= out["brier"] <= hi
    raw = target_agreement([2.0, -1.0], [1.0, 0.0], ["a", "b"], n_boot=10)
    assert raw["brier"] is None and raw["auroc"] == 1.0
    one_class = target_agreement([0.2, 0.4], [1.0, 1.0], ["a", "b"], n_boot=10)
    assert one_class["auroc"] is None and "both" in one_class["auroc_note"]

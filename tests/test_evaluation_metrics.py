"""Evaluation statistics against hand-computed numbers."""

from __future__ import annotations

import pytest

from proctor.evaluation import metrics
from proctor.evaluation.metrics import (
    calibration_bins,
    discordant_counts,
    mcnemar_exact,
    paired_bootstrap_diff,
    where_it_went_wrong,
)


def test_reuses_the_wilson_interval_and_auroc():
    from proctor.rollout.summary import wilson_interval
    from proctor.stats import auroc

    assert metrics.wilson_interval is wilson_interval and metrics.auroc is auroc
    # 8 of 10: center (0.8 + 1.92/20)/(1 + 3.84/10) = 0.6474, half 0.2403 → [0.4902, 0.9433]
    lo, hi = metrics.wilson_interval(8, 10)
    assert lo == pytest.approx(0.4902, abs=1e-4) and hi == pytest.approx(0.9433, abs=1e-4)


def test_discordant_counts():
    a = [True, True, False, False, True]
    b = [True, False, True, True, False]
    assert discordant_counts(a, b) == (2, 2)
    assert discordant_counts([False, False], [True, True]) == (2, 0)
    with pytest.raises(ValueError, match="equal lengths"):
        discordant_counts([True], [])


@pytest.mark.parametrize(("b01", "b10", "p"), [
    (0, 0, 1.0),               # no discordant pairs: no evidence
    (6, 0, 2 / 64),            # 2 · C(6,0)/2^6
    (5, 1, 2 * 7 / 64),        # 2 · (C(6,0) + C(6,1))/2^6 = 14/64
    (1, 5, 2 * 7 / 64),        # symmetric
    (3, 3, 1.0),               # 2 · 42/64 > 1 → 1
    (10, 2, 2 * 79 / 4096),    # 2 · (1 + 12 + 66)/2^12
])
def test_mcnemar_exact_hand_computed(b01, b10, p):
    assert mcnemar_exact(b01, b10) == pytest.approx(p)


def test_mcnemar_rejects_negative_counts():
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 2)


def test_paired_bootstrap_degenerate_cases_are_exact():
    same = [True, False, True, False]
    assert paired_bootstrap_diff(same, same, resamples=200) == (0.0, 0.0, 0.0)
    diff, lo, hi = paired_bootstrap_diff([False] * 4, [True] * 4, resamples=200)
    assert (diff, lo, hi) == (1.0, 1.0, 1.0)


def test_paired_bootstrap_keeps_a_task_s_samples_together():
    # task x: B wins all 10 samples; task y: A wins all 10. Resampling the 2 tasks, a resample is x,x (+1),
    # x,y (0) or y,y (−1) with probabilities ¼, ½, ¼: the 95% interval is [−1, 1] around 0.
    a = [False] * 10 + [True] * 10
    b = [True] * 10 + [False] * 10
    tasks = ["x"] * 10 + ["y"] * 10
    assert paired_bootstrap_diff(a, b, clusters=tasks, resamples=4000, seed=1) == (0.0, -1.0, 1.0)
    # resampling the 20 pairs as if independent, the diff has sd 1/√20 ≈ 0.22: a far narrower interval
    _, lo, hi = paired_bootstrap_diff(a, b, resamples=4000, seed=1)
    assert -0.7 < lo < -0.2 and 0.2 < hi < 0.7
    assert paired_bootstrap_diff(a, b, resamples=500, seed=3) == paired_bootstrap_diff(a, b, resamples=500, seed=3)


def test_quantile_interpolates_like_numpy():
    assert metrics._quantile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert metrics._quantile([1.0, 2.0, 3.0, 4.0], 0.25) == 1.75
    assert metrics._quantile([0.0, 10.0], 0.975) == 9.75


def test_calibration_bins_hand_computed():
    rows = calibration_bins([0.1, 0.15, 0.5, 0.9, 1.0], [False, True, True, True, False], bins=2)
    assert rows == [
        {"low": 0.0, "high": 0.5, "n": 2, "mean_score": pytest.approx(0.125), "success_rate": 0.5},
        {"low": 0.5, "high": 1.0, "n": 3, "mean_score": pytest.approx(0.8), "success_rate": pytest.approx(2 / 3)},
    ]
    assert calibration_bins([], [], bins=3) == []


def test_where_it_went_wrong():
    # drops: 0.9→0.8 (0.1) at 1, 0.8→0.3 (0.5) at 2, 0.6→0.2 (0.4) at 4; first below 0.5 at step 2
    assert where_it_went_wrong([0.9, 0.8, 0.3, 0.6, 0.2]) == {"first_below": 2, "biggest_drop": 2,
                                                               "drop": pytest.approx(0.5)}
    # unscored steps are skipped: the drop at 3 is measured from step 1 (0.9 → 0.7)
    assert where_it_went_wrong([0.6, 0.9, None, 0.7]) == {"first_below": None, "biggest_drop": 3,
                                                           "drop": pytest.approx(0.2)}
    assert where_it_went_wrong([0.2, 0.4, 0.6]) == {"first_below": 0, "biggest_drop": None, "drop": None}
    assert where_it_went_wrong([0.7, 0.6], threshold=0.65)["first_below"] == 1

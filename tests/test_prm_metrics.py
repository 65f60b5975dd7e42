"""proctor.prm.metrics against hand-computed values."""

from __future__ import annotations

import pytest

from proctor import stats
from proctor.prm import metrics as m

S = [0.9, 0.6, 0.4, 0.2]
Y = [1, 0, 1, 0]


def test_step_accuracy_and_brier():
    assert m.step_accuracy(S, Y) == 0.5  # right: 0.9→1, 0.2→0
    # (0.01 + 0.36 + 0.36 + 0.04) / 4
    assert m.brier_score(S, Y) == pytest.approx(0.1925)


def test_step_auroc():
    # positives {0.9, 0.4}, negatives {0.6, 0.2}: pairs won 0.9>0.6, 0.9>0.2, 0.4>0.2, lost 0.4<0.6 → 3/4
    assert m.step_auroc(S, Y) == pytest.approx(0.75)
    # ties count one half: positives {0.5, 0.5}, negatives {0.5, 0.1}: 2 pairs tied, 2 won → (2·½ + 2)/4
    assert m.step_auroc([0.5, 0.5, 0.5, 0.1], [1, 1, 0, 0]) == pytest.approx(0.75)
    assert m.step_auroc([0.1, 0.2, 0.3], [1, 1, 0]) == 0.0
    assert m.auroc is stats.auroc  # one AUROC, proctor.stats'; the metric (n/a for one class) wraps it



def test_ece():
    # 2 bins: [0, .5) holds 0.4 (y 1), 0.2 (y 0): |0.5 − 0.3| = 0.2; [.5, 1] holds 0.9, 0.6: |0.5 − 0.75| = 0.25
    assert m.expected_calibration_error(S, Y, bins=2) == pytest.approx(0.5 * 0.2 + 0.5 * 0.25)
    assert m.expected_calibration_error([1.0, 0.0], [1, 0], bins=10) == 0.0


def test_first_error_and_processbench_f1():
    assert m.predicted_first_error([0.9, 0.7, 0.3, 0.1]) == 2
    assert m.predicted_first_error([0.9, 0.7]) == -1
    pred, true = [2, -1, 1, -1, 0], [2, 1, 1, -1, -1]
    assert m.first_error_accuracy(pred, true) == pytest.approx(3 / 5)
    # erroneous: [2, 1, 1] predicted [2, -1, 1] → 2/3; correct: [-1, -1] predicted [-1, 0] → 1/2
    got = m.processbench_f1(pred, true)
    assert got["acc_error"] == pytest.approx(2 / 3) and got["acc_correct"] == pytest.approx(0.5)
    assert got["f1"] == pytest.approx(2 * (2 / 3) * 0.5 / (2 / 3 + 0.5))


def test_a_metric_that_cannot_be_computed_is_na_with_the_reason():
    """A small run (one class of step, no steps, one kind of solution) reports n/a, never raises."""
    import json

    one_class = m.step_auroc([0.1, 0.2], [1, 1])
    assert isinstance(one_class, m.NotAvailable) and "both correct and wrong" in one_class.reason
    assert one_class.reason.endswith("all 2 are correct")
    assert str(one_class).startswith("n/a (") and f"{one_class:.3f}" == str(one_class)
    assert json.loads(json.dumps({"auroc": one_class}))["auroc"] == str(one_class)
    for fn in (m.step_auroc, m.step_accuracy, m.brier_score, m.expected_calibration_error):
        assert fn([], []) == "n/a (no steps to score)"
    assert isinstance(m.first_error_accuracy([], []), m.NotAvailable)
    only_correct = m.processbench_f1([-1, 0], [-1, -1])
    assert only_correct["acc_correct"] == 0.5
    assert isinstance(only_correct["acc_error"], m.NotAvailable) and isinstance(only_correct["f1"], m.NotAvailable)
    assert m.processbench_f1([-1], [-1], partial=True) == {"acc_error": None, "acc_correct": 1.0, "f1": None}
    with pytest.raises(ValueError, match="equal-length"):
        m.brier_score([0.5], [1, 0])  # a caller's bug still raises

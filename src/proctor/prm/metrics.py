"""PRM evaluation metrics: pure functions over step scores and labels (docs/methods.md §7.5, ProcessBench).

Scores are P(step correct) ∈ [0, 1]; labels are 0/1 (soft labels are thresholded at 0.5 where a metric
needs classes). First-error indices use ProcessBench's convention: -1 means "no wrong step".

A metric that cannot be computed on the data at hand (no steps; AUROC with one class only; ProcessBench
F1 without both kinds of solution) returns `NotAvailable`, which prints and serialises to JSON as
"n/a (<reason>)", instead of raising: small runs report what they can. Mismatched inputs still raise.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Self

import numpy as np

from proctor.stats import auroc


class NotAvailable(str):
    """A metric that cannot be computed here; its text (and JSON value) is "n/a (<reason>)", and it formats
    as that text whatever the format spec (`f"{m:.3f}"`), so tables and reports show why."""

    reason: str

    def __new__(cls, reason: str) -> Self:
        obj = super().__new__(cls, f"n/a ({reason})")
        obj.reason = reason
        return obj

    def __format__(self, spec: str) -> str:
        return str(self)


Metric = float | NotAvailable

_NO_STEPS = "no steps to score"


def _arrays(scores: Sequence[float], labels: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    s, y = np.asarray(scores, dtype=float), np.asarray(labels, dtype=float)
    if s.shape != y.shape or s.ndim != 1:
        raise ValueError(f"need equal-length 1-d scores and labels, got {s.shape} and {y.shape}")
    return s, y


def step_auroc(scores: Sequence[float], labels: Sequence[float]) -> Metric:
    """`proctor.stats.auroc` of step scores against labels (thresholded at 0.5), as a metric: n/a when the labels
    hold one class only (or none)."""
    s, y = _arrays(scores, labels)
    if len(s) == 0:
        return NotAvailable(_NO_STEPS)
    try:
        return auroc(s, y)
    except ValueError as e:  # one class only: the reason, as stats words it
        return NotAvailable(str(e))


def step_accuracy(scores: Sequence[float], labels: Sequence[float], threshold: float = 0.5) -> Metric:
    """mean 𝟙[(s ≥ threshold) = (y ≥ 0.5)]."""
    s, y = _arrays(scores, labels)
    if len(s) == 0:
        return NotAvailable(_NO_STEPS)
    return float(np.mean((s >= threshold) == (y >= 0.5)))


def brier_score(scores: Sequence[float], labels: Sequence[float]) -> Metric:
    """mean (s − y)² (y may be soft)."""
    s, y = _arrays(scores, labels)
    if len(s) == 0:
        return NotAvailable(_NO_STEPS)
    return float(np.mean((s - y) ** 2))


def expected_calibration_error(scores: Sequence[float], labels: Sequence[float], bins: int = 10) -> Metric:
    """ECE = Σ_b (n_b / N)·|mean_b(y) − mean_b(s)| over `bins` equal-width score bins [k/B, (k+1)/B)
    (the last bin includes 1.0)."""
    s, y = _arrays(scores, labels)
    if len(s) == 0:
        return NotAvailable(_NO_STEPS)
    idx = np.minimum((s * bins).astype(int), bins - 1)
    total = 0.0
    for b in range(bins):
        sel = idx == b
        if sel.any():
            total += sel.sum() / len(s) * abs(y[sel].mean() - s[sel].mean())
    return float(total)


def predicted_first_error(step_scores: Sequence[float], threshold: float = 0.5) -> int:
    """Index of the first step scored below `threshold`, -1 if none (ProcessBench's prediction rule)."""
    for k, s in enumerate(step_scores):
        if s < threshold:
            return k
    return -1


def first_error_accuracy(predicted: Sequence[int], true: Sequence[int]) -> Metric:
    """mean 𝟙[predicted first-error index = true index] over all solutions."""
    p, t = np.asarray(predicted), np.asarray(true)
    if p.shape != t.shape:
        raise ValueError("need equal-length first-error lists")
    if len(p) == 0:
        return NotAvailable("no solutions")
    return float(np.mean(p == t))


def processbench_f1(
    predicted: Sequence[int], true: Sequence[int], partial: bool = False
) -> dict[str, Metric | None]:
    """ProcessBench: acc_error = accuracy on solutions with a wrong step (exact index), acc_correct =
    accuracy on fully correct ones (predicting -1), F1 = 2·acc_error·acc_correct / (acc_error + acc_correct).

    The accuracy of a kind of solution the data lacks, and then F1, are `NotAvailable` (None with `partial`,
    the form `proctor.prm.processbench` reports)."""
    p, t = np.asarray(predicted), np.asarray(true)
    if p.shape != t.shape or p.ndim != 1:
        raise ValueError("need equal-length 1-d first-error lists")
    err, cor = t != -1, t == -1

    def absent(kind: str) -> NotAvailable | None:
        return None if partial else NotAvailable(f"no {kind} solutions")

    acc_err = float(np.mean(p[err] == t[err])) if err.any() else absent("erroneous")
    acc_cor = float(np.mean(p[cor] == -1)) if cor.any() else absent("fully correct")
    f1: Metric | None
    if not isinstance(acc_err, float) or not isinstance(acc_cor, float):
        f1 = None if partial else NotAvailable("F1 needs both erroneous and fully correct solutions")
    else:
        f1 = 0.0 if acc_err + acc_cor == 0 else 2 * acc_err * acc_cor / (acc_err + acc_cor)
    return {"acc_error": acc_err, "acc_correct": acc_cor, "f1": f1}

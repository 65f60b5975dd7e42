"""PRM evaluation metrics: pure functions over step scores and labels (docs/methods.md §7.5, ProcessBench).

Scores are P(step correct) ∈ [0, 1]; labels are 0/1 (soft labels are thresholded at 0.5 where a metric
needs classes). First-error indices use ProcessBench's convention: -1 means "no wrong step".
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from proctor.stats import auroc  # noqa: F401  (re-exported: PRM metrics read it from here)


def _arrays(scores: Sequence[float], labels: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    s, y = np.asarray(scores, dtype=float), np.asarray(labels, dtype=float)
    if s.shape != y.shape or s.ndim != 1 or len(s) == 0:
        raise ValueError(f"need equal-length non-empty 1-d scores and labels, got {s.shape} and {y.shape}")
    return s, y


def step_accuracy(scores: Sequence[float], labels: Sequence[float], threshold: float = 0.5) -> float:
    """mean 𝟙[(s ≥ threshold) = (y ≥ 0.5)]."""
    s, y = _arrays(scores, labels)
    return float(np.mean((s >= threshold) == (y >= 0.5)))


def brier_score(scores: Sequence[float], labels: Sequence[float]) -> float:
    """mean (s − y)² (y may be soft)."""
    s, y = _arrays(scores, labels)
    return float(np.mean((s - y) ** 2))


def expected_calibration_error(scores: Sequence[float], labels: Sequence[float], bins: int = 10) -> float:
    """ECE = Σ_b (n_b / N)·|mean_b(y) − mean_b(s)| over `bins` equal-width score bins [k/B, (k+1)/B)
    (the last bin includes 1.0)."""
    s, y = _arrays(scores, labels)
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


def first_error_accuracy(predicted: Sequence[int], true: Sequence[int]) -> float:
    """mean 𝟙[predicted first-error index = true index] over all solutions."""
    p, t = np.asarray(predicted), np.asarray(true)
    if p.shape != t.shape or len(p) == 0:
        raise ValueError("need equal-length non-empty first-error lists")
    return float(np.mean(p == t))


def processbench_f1(
    predicted: Sequence[int], true: Sequence[int], partial: bool = False
) -> dict[str, float | None]:
    """ProcessBench: acc_error = accuracy on solutions with a wrong step (exact index), acc_correct =
    accuracy on fully correct ones (predicting -1), F1 = 2·acc_error·acc_correct / (acc_error + acc_correct).

    Both kinds of solution must be present; with `partial`, the accuracy of an absent kind and F1 are None."""
    p, t = np.asarray(predicted), np.asarray(true)
    if p.shape != t.shape or p.ndim != 1:
        raise ValueError("need equal-length 1-d first-error lists")
    err, cor = t != -1, t == -1
    if not partial and (not err.any() or not cor.any()):
        raise ValueError("ProcessBench F1 needs both erroneous and fully correct solutions")
    acc_err = float(np.mean(p[err] == t[err])) if err.any() else None
    acc_cor = float(np.mean(p[cor] == -1)) if cor.any() else None
    if acc_err is None or acc_cor is None:
        f1 = None
    else:
        f1 = 0.0 if acc_err + acc_cor == 0 else 2 * acc_err * acc_cor / (acc_err + acc_cor)
    return {"acc_error": acc_err, "acc_correct": acc_cor, "f1": f1}

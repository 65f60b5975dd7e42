"""Statistics shared across layers (no model libraries): ranking quality of scores against labels."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def auroc(scores: Sequence[float], labels: Sequence[float]) -> float:
    """Area under the ROC curve, labels thresholded at 0.5; needs both classes present.

    The Mann–Whitney form: AUROC = (R₊ − n₊(n₊+1)/2) / (n₊·n₋), where R₊ is the sum of the positives'
    ranks among all scores (ties get their average rank), i.e. P(s₊ > s₋) + ½·P(s₊ = s₋)."""
    s, y = np.asarray(scores, dtype=float), np.asarray(labels, dtype=float)
    if s.shape != y.shape:
        raise ValueError(f"{len(s)} scores but {len(y)} labels")
    classes = y >= 0.5
    if classes.all() or not classes.any():
        raise ValueError("AUROC needs both correct and wrong steps among the labels")
    order = np.argsort(s, kind="mergesort")
    ranks = np.empty(len(s), dtype=float)
    sorted_s = s[order]
    start = 0
    for end in range(1, len(s) + 1):
        if end == len(s) or sorted_s[end] != sorted_s[start]:
            ranks[order[start:end]] = (start + end + 1) / 2.0  # the average of ranks start+1 .. end
            start = end
    n_pos, n_neg = int(classes.sum()), int((~classes).sum())
    return float((ranks[classes].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))

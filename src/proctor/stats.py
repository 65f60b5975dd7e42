"""Statistics shared across layers (no model libraries): ranking quality of scores against labels, and the law of
best-of-n's pick."""

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
        kind = "correct" if classes.all() else "wrong"
        raise ValueError(f"AUROC needs both correct and wrong steps among the labels; all {len(y)} are {kind}")
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


def best_of_n_probabilities(probs: Sequence[float], scores: Sequence[float], n: int) -> list[float]:
    """The law of per-step best-of-n's action when the base policy draws action a with probability p(a) and the
    PRM scores it Q(a): a is chosen iff it is drawn and nothing drawn scores higher, so

        P(a) = F(a)^n − F⁻(a)^n,   F(a) = Σ_{b: Q(b) ≤ Q(a)} p(b),   F⁻(a) = Σ_{b: Q(b) < Q(a)} p(b)

    (the distribution of the maximum of n draws; the target of best-of-n distillation, BOND, Sessa et al. 2024,
    arXiv 2407.14622). Actions with equal scores share their group's probability in proportion to p (the agent
    breaks such ties by draw count and order). n = 1 gives p back; as n grows, the mass goes to the best action
    that p can draw."""
    if len(probs) != len(scores) or not probs or n < 1:
        raise ValueError(f"{len(probs)} probabilities, {len(scores)} scores, n = {n}: need equal, non-empty, n >= 1")
    out, below = [0.0] * len(probs), 0.0
    for q in sorted(set(scores)):
        tied = [i for i, s in enumerate(scores) if s == q]
        mass = sum(probs[i] for i in tied)
        if mass > 0:
            share = (below + mass) ** n - below ** n
            for i in tied:
                out[i] = share * probs[i] / mass
        below += mass
    return out

"""Evaluation statistics: pure functions over outcomes and scores, each with its formula and source.

- `wilson_interval` (re-exported from `proctor.rollout.summary`): the 95% interval of a success rate.
- `mcnemar_exact`: the paired test used by `proctor compare` on the same (task, sample) keys.
- `paired_bootstrap_diff`: a cluster (per-task) bootstrap interval of the paired difference in success.
- `auroc` (re-exported from `proctor.stats`): how well a score separates successes from failures.
- `calibration_bins`, `where_it_went_wrong`: what the report plots and marks.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Hashable, Sequence

from proctor.rollout.summary import wilson_interval
from proctor.stats import auroc

__all__ = ["auroc", "calibration_bins", "discordant_counts", "mcnemar_exact", "paired_bootstrap_diff",
           "where_it_went_wrong", "wilson_interval"]


def discordant_counts(a: Sequence[bool], b: Sequence[bool]) -> tuple[int, int]:
    """(b01, b10) of paired outcomes: b01 = pairs where A failed and B succeeded, b10 = A succeeded, B failed."""
    if len(a) != len(b):
        raise ValueError(f"paired outcomes need equal lengths, got {len(a)} and {len(b)}")
    b01 = sum(1 for x, y in zip(a, b, strict=True) if not x and y)
    b10 = sum(1 for x, y in zip(a, b, strict=True) if x and not y)
    return b01, b10


def mcnemar_exact(b01: int, b10: int) -> float:
    """Two-sided exact McNemar test (McNemar 1947; exact conditional form, e.g. Fagerland, Lydersen & Laake
    2013, BMC Med. Res. Methodol. 13:91) on the discordant pair counts.

    Under H0 (both policies succeed equally often) each of the m = b01 + b10 discordant pairs is B's win
    with probability ½, so with k = min(b01, b10):

        p = min(1, 2 · Σ_{i=0..k} C(m, i) / 2^m)

    Concordant pairs carry no information. With m = 0 the p-value is 1."""
    if b01 < 0 or b10 < 0:
        raise ValueError(f"discordant counts must be >= 0, got {b01} and {b10}")
    m, k = b01 + b10, min(b01, b10)
    if m == 0:
        return 1.0
    tail = sum(math.comb(m, i) for i in range(k + 1)) / 2.0**m
    return min(1.0, 2.0 * tail)


def paired_bootstrap_diff(a: Sequence[bool], b: Sequence[bool], clusters: Sequence[Hashable] | None = None,
                          resamples: int = 10_000, level: float = 0.95, seed: int = 0) -> tuple[float, float, float]:
    """Success(B) − success(A) over paired outcomes and its percentile bootstrap interval (Efron &
    Tibshirani 1993, ch. 13), resampling whole clusters (tasks) with replacement so that several samples
    of one task stay together (the cluster bootstrap; Field & Welsh 2007).

    The statistic of a resample is Σ(b_i − a_i) / (number of pairs drawn); the interval is its
    (1−level)/2 and (1+level)/2 empirical quantiles (linear interpolation). Returns (diff, low, high)."""
    if len(a) != len(b) or not a:
        raise ValueError(f"need equal-length, non-empty paired outcomes, got {len(a)} and {len(b)}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    clusters = list(clusters) if clusters is not None else list(range(len(a)))
    if len(clusters) != len(a):
        raise ValueError(f"need one cluster per pair, got {len(clusters)} for {len(a)} pairs")
    groups: dict[Hashable, list[int]] = defaultdict(lambda: [0, 0])
    for c, x, y in zip(clusters, a, b, strict=True):
        g = groups[c]
        g[0] += int(y) - int(x)
        g[1] += 1
    sums = list(groups.values())
    diff = sum(g[0] for g in sums) / len(a)
    rng = random.Random(seed)
    stats = []
    for _ in range(resamples):
        d = n = 0
        for g in rng.choices(sums, k=len(sums)):
            d += g[0]
            n += g[1]
        stats.append(d / n)
    stats.sort()
    return diff, _quantile(stats, (1 - level) / 2), _quantile(stats, (1 + level) / 2)


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    """The q-quantile with linear interpolation between order statistics (numpy's default, type 7)."""
    pos = q * (len(sorted_values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (pos - lo) * (sorted_values[hi] - sorted_values[lo])


def calibration_bins(scores: Sequence[float], outcomes: Sequence[bool], bins: int = 5) -> list[dict[str, float]]:
    """Reliability table: scores cut into `bins` equal-width bins [k/B, (k+1)/B) (the last includes 1.0);
    for each non-empty bin its count, mean score and success rate (DeGroot & Fienberg 1983)."""
    if len(scores) != len(outcomes):
        raise ValueError(f"need one outcome per score, got {len(outcomes)} for {len(scores)}")
    if bins < 1:
        raise ValueError(f"bins must be >= 1, got {bins}")
    acc: list[list[float]] = [[0, 0.0, 0] for _ in range(bins)]
    for s, y in zip(scores, outcomes, strict=True):
        k = min(max(int(s * bins), 0), bins - 1)
        acc[k][0] += 1
        acc[k][1] += s
        acc[k][2] += int(bool(y))
    return [{"low": k / bins, "high": (k + 1) / bins, "n": int(n), "mean_score": total / n, "success_rate": wins / n}
            for k, (n, total, wins) in enumerate(acc) if n]


def where_it_went_wrong(scores: Sequence[float | None], threshold: float = 0.5) -> dict[str, float | int | None]:
    """Where a failed episode's PRM scores say it went wrong.

    `first_below`: the first step t with s_t < threshold. `biggest_drop`: the step t ≥ 1 with the largest
    fall s_{t−1} − s_t > 0 (the earliest on ties), and `drop` its size. Steps without a score are skipped
    (a drop is measured from the last scored step). None where there is no such step."""
    first_below = None
    best, best_drop, prev = None, 0.0, None
    for t, s in enumerate(scores):
        if s is None:
            continue
        if first_below is None and s < threshold:
            first_below = t
        if prev is not None and prev - s > best_drop:
            best, best_drop = t, prev - s
        prev = s
    return {"first_below": first_below, "biggest_drop": best, "drop": best_drop if best is not None else None}

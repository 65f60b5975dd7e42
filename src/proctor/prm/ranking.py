"""Does a PRM rank actions? Pure metrics over candidate actions at held-out states, with intervals.

- `ranking_pairs`: at each state, every pair of candidate actions whose MC-Q (Q̃ ∈ [0, 1],
  `proctor.credit.candidates`) differ by at least `margin`, oriented (better, worse).
- `pairwise_accuracy`: the fraction of those pairs the scores order strictly right,
  acc = (1/P) Σ_pairs 𝟙[score(better) > score(worse)] (a tie counts as wrong and is reported), with its 95%
  Wilson interval (pairs treated as independent; `bootstrap_by_group` over tasks gives a clustered one).
- `bootstrap_by_group`: a percentile bootstrap that resamples whole groups (tasks) with replacement, the
  interval for statistics of correlated items (steps of one task), e.g. Brier or AUROC (Efron & Tibshirani
  1993, ch. 13; Field & Welsh 2007 on the cluster bootstrap).
- `spread`: quantiles and standard deviation of a set of scores (is the PRM more than a constant?).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from proctor.rollout.summary import wilson_interval

#: float slack on the margin test, so Q̃ values that differ by exactly `margin` on paper are kept
MARGIN_EPS = 1e-9


@dataclass(frozen=True)
class RankingPair:
    """Two candidate actions at one state, `better` having the higher MC-Q by `gap` ≥ margin."""

    state: Hashable
    better: str
    worse: str
    gap: float


def ranking_pairs(q: Mapping[Hashable, Mapping[str, float]], margin: float = 0.2) -> list[RankingPair]:
    """Every pair (a, b) of candidates of one state with |Q̃(a) − Q̃(b)| ≥ margin, as (better, worse);
    states and actions in sorted order."""
    if margin <= 0:
        raise ValueError(f"margin must be > 0, got {margin}")
    out = []
    for state in sorted(q, key=repr):
        for (a, qa), (b, qb) in itertools.combinations(sorted(q[state].items()), 2):
            if abs(qa - qb) >= margin - MARGIN_EPS:
                better, worse = (a, b) if qa > qb else (b, a)
                out.append(RankingPair(state, better, worse, abs(qa - qb)))
    return out


@dataclass(frozen=True)
class PairwiseResult:
    pairs: int
    right: int
    ties: int
    accuracy: float
    interval: tuple[float, float]

    def as_dict(self) -> dict[str, Any]:
        return {"pairs": self.pairs, "right": self.right, "ties": self.ties, "accuracy": self.accuracy,
                "ci95_wilson": list(self.interval)}


def pairwise_accuracy(pairs: Sequence[RankingPair], score: Callable[[Hashable, str], float]) -> PairwiseResult:
    """Fraction of `pairs` with score(state, better) > score(state, worse), Wilson 95% interval."""
    if not pairs:
        raise ValueError("no pairs to rank (no candidates differ by the margin)")
    right = ties = 0
    for p in pairs:
        sb, sw = score(p.state, p.better), score(p.state, p.worse)
        right += sb > sw
        ties += sb == sw
    return PairwiseResult(len(pairs), right, ties, right / len(pairs), wilson_interval(right, len(pairs)))


def bootstrap_by_group(groups: Sequence[Hashable], statistic: Callable[[np.ndarray], float],
                       n_boot: int = 1000, seed: int = 0, level: float = 0.95) -> tuple[float, float] | None:
    """Percentile interval of `statistic(indices)` over `n_boot` resamples of the groups with replacement
    (every item of a drawn group is taken, once per draw). A resample on which the statistic raises
    `ValueError` (e.g. AUROC with one class) is skipped; None when fewer than half of them succeed."""
    if not groups:
        raise ValueError("bootstrap over no items")
    keys = sorted(set(groups), key=repr)
    members = {k: [] for k in keys}
    for i, g in enumerate(groups):
        members[g].append(i)
    index = [np.asarray(members[k]) for k in keys]
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(n_boot):
        drawn = rng.integers(0, len(keys), len(keys))
        try:
            values.append(statistic(np.concatenate([index[d] for d in drawn])))
        except ValueError:
            continue
    if len(values) < n_boot / 2:
        return None
    alpha = (1 - level) / 2
    lo, hi = np.quantile(values, [alpha, 1 - alpha])
    return float(lo), float(hi)


def spread(scores: Sequence[float]) -> dict[str, float]:
    """min, 5/50/95th percentiles, max and standard deviation of the scores."""
    s = np.asarray(scores, dtype=float)
    if s.size == 0:
        raise ValueError("no scores")
    p5, p50, p95 = np.quantile(s, [0.05, 0.5, 0.95])
    return {"n": int(s.size), "min": float(s.min()), "p5": float(p5), "median": float(p50), "p95": float(p95),
            "max": float(s.max()), "std": float(s.std())}

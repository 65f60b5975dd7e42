"""A summary of a set of records: counts, distinct states, visit and label histograms."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

VISIT_BINS: tuple[tuple[int, int], ...] = ((1, 1), (2, 2), (3, 4), (5, 8), (9, 16), (17, 64), (65, 2**62))


def _visit_bin(n: int) -> str:
    for lo, hi in VISIT_BINS:
        if lo <= n <= hi:
            return str(lo) if lo == hi else (f"{lo}-{hi}" if hi < 2**62 else f">={lo}")
    return str(n)


def summarize(records: Sequence, bins: int = 10) -> dict[str, Any]:
    """Counts, distinct states, a histogram of visits over distinct (state, action) / units, and of labels.

    The visit histogram counts each labelled unit once (a (state, action) pair for step records, a pair
    or a transition or a trajectory otherwise), keyed by how many samples its target averages over.
    """
    if not records:
        return {"records": 0}
    units: dict[tuple, int] = {}
    for r in records:
        unit = (r.state_key, getattr(r, "action", None) or getattr(r, "chosen", None), getattr(r, "rejected", None))
        units.setdefault(unit, r.visits)
    visits = Counter(_visit_bin(n) for n in units.values())
    order = [_visit_bin(lo) for lo, _ in VISIT_BINS]
    labels = np.asarray([r.label for r in records], dtype=float)
    counts, edges = np.histogram(labels, bins=bins)
    return {
        "records": len(records),
        "trajectories": len({r.trajectory_id for r in records}),
        "tasks": len({(r.env, r.task_id) for r in records}),
        "states": len({r.state_key for r in records}),
        "units": len(units),
        "splits": dict(sorted(Counter(r.split for r in records).items())),
        "visit_histogram": {b: visits[b] for b in order if visits[b]},
        "label": {"min": float(labels.min()), "max": float(labels.max()), "mean": float(labels.mean())},
        "label_histogram": [{"lo": float(lo), "hi": float(hi), "count": int(c)}
                            for lo, hi, c in zip(edges[:-1], edges[1:], counts, strict=True)],
    }

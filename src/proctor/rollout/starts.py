"""Where completions start: the action prefixes of stored trajectories, K completions each.

A completion is an ordinary episode whose first k steps are a source trajectory's (replayed in a fresh env
with the source's seed), then the agent's own; its `meta` records `prefix_of` (the source id) and
`prefix_len` (k), the layout `proctor.credit.completions` reads for Math-Shepherd labels (k = t + 1 for
step t), inverse-PRM transitions (the re-sampled action at s_k) and MC-Q from intermediate states.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from proctor.episode import WorkItem, completion_sample
from proctor.trajectory import Trajectory

#: which prefix lengths k to start from: every k in 1..T, every k in 0..T-1 (the states), or a given list
PrefixLengths = Literal["steps", "states"] | list[int]


def prefix_lengths_of(traj: Trajectory, which: PrefixLengths) -> list[int]:
    """The prefix lengths k of `traj` to complete from (`steps`: 1..T, one per step t = k − 1, what
    Math-Shepherd labels; `states`: 0..T−1, every state the source acted in; a list: those k ≤ T)."""
    n = len(traj.steps)
    if which == "steps":
        return list(range(1, n + 1))
    if which == "states":
        return list(range(n))
    bad = [k for k in which if not 0 <= k <= n]
    if bad:
        raise ValueError(f"prefix lengths {bad} are outside 0..{n} for trajectory {traj.id}")
    return sorted(set(which))


def completion_items(sources: Iterable[Trajectory], which: PrefixLengths, completions: int) -> list[WorkItem]:
    """One `WorkItem` per (source, prefix length, completion index), source-major."""
    if completions < 1:
        raise ValueError(f"completions must be >= 1, got {completions}")
    items = []
    for src in sources:
        for k in prefix_lengths_of(src, which):
            for i in range(completions):
                items.append(WorkItem(src.task_id, completion_sample(src.id, k, i), src.seed,
                                      start=tuple(src.steps[:k]),
                                      meta=(("prefix_of", src.id), ("prefix_len", k))))
    return items

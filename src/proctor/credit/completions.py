"""Completions: rollouts continued from a prefix of a source trajectory (for Math-Shepherd, inverse PRM).

Layout. A completion is an ordinary `Trajectory` (stored in its own `TrajectoryStore`) whose `meta` has
    prefix_of:  the id of the source trajectory
    prefix_len: k ≥ 1, the number of the source's actions replayed before the completion continued
and whose `steps` are the whole episode: the k replayed steps (the source's actions), then the new ones.
Math-Shepherd reads the outcomes of the completions with prefix_len = t + 1 as the evidence for step t;
inverse PRM reads `steps[k].action` of a completion with prefix_len = k as the policy's action at s_k.
"""

from __future__ import annotations

from collections.abc import Sequence

from proctor.credit.outcome import CreditError, canonical_order
from proctor.trajectory import Trajectory


def index_completions(sources: Sequence[Trajectory], completions: Sequence[Trajectory]
                      ) -> dict[tuple[str, int], list[Trajectory]]:
    """Completions by (source id, prefix_len), each list in canonical order; checks the layout."""
    by_id = {t.id: t for t in sources}
    index: dict[tuple[str, int], list[Trajectory]] = {}
    for c in canonical_order(completions):
        src_id, k = c.meta.get("prefix_of"), c.meta.get("prefix_len")
        if not isinstance(src_id, str):
            raise CreditError(c.id, "meta.prefix_of", f"a completion needs the source id, got {src_id!r}")
        if not isinstance(k, int) or isinstance(k, bool):
            raise CreditError(c.id, "meta.prefix_len", f"a completion needs an integer, got {k!r}")
        src = by_id.get(src_id)
        if src is None:
            raise CreditError(c.id, "meta.prefix_of", f"source trajectory {src_id!r} is not in the input")
        if not 1 <= k <= len(src.steps):
            raise CreditError(c.id, "meta.prefix_len", f"{k} is outside 1..{len(src.steps)} for source {src_id!r}")
        if (c.env, c.task_id) != (src.env, src.task_id):
            raise CreditError(c.id, "task_id", f"completion of task {c.task_id!r} for a source of {src.task_id!r}")
        if c.actions[:k] != src.actions[:k]:
            raise CreditError(c.id, "steps", f"its first {k} actions differ from those of source {src_id!r}")
        index.setdefault((src_id, k), []).append(c)
    return index


def resampled_actions(index: dict[tuple[str, int], list[Trajectory]]) -> dict[tuple[str, int], str]:
    """The re-sampled action at s_k of each source: `steps[k].action` of its first completion."""
    out = {}
    for (src_id, k), comps in index.items():
        c = comps[0]
        if len(c.steps) <= k:
            raise CreditError(c.id, "steps", f"has no step after its prefix of {k} (nothing was re-sampled)")
        out[(src_id, k)] = c.steps[k].action
    return out

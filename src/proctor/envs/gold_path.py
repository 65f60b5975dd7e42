"""An expert that follows a fixed action sequence (ScienceWorld's gold path, a game's walkthrough)."""

from __future__ import annotations

from collections.abc import Sequence


def normalize_action(action: str) -> str:
    """Lower case, single spaces: how text games compare commands ("TAKE  PAPER" == "take paper")."""
    return " ".join(action.lower().split())


def next_on_path(path: Sequence[str], taken: Sequence[str]) -> str | None:
    """`path[len(taken)]` while `taken` is a prefix of `path` (compared by `normalize_action`), else None:
    the path's expert has no move once the agent deviated from it, or when the path is used up."""
    if len(taken) >= len(path):
        return None
    if any(normalize_action(a) != normalize_action(p) for a, p in zip(taken, path)):
        return None
    return path[len(taken)]

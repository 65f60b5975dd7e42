"""Per-step best-of-N (AgentPRM, arXiv 2502.10325, §5; docs/methods.md §8.1) as an ordinary `Agent`.

At every step, for all active envs at once: draw N candidates per state from the base agent (one batched
`act` call), merge identical actions (keeping how often each was drawn), score the distinct ones with the PRM
batched across states (`PRMScorer.score_action_groups`: each state's prefix runs once), and act with

    a* = argmax_a Q(s, a)    ties: the action drawn more often, then the one drawn first.

The chosen candidate's `meta` (it lands in `Step.info["candidate_meta"]`) records every distinct candidate
with its score and count, the chosen action's PRM score (`prm_score`) and what the choice cost (`budget`,
see `proctor.search.budget`). The rollout engine runs it unchanged.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from proctor.agents.base import Agent, AgentError, Candidate, Prefix
from proctor.prm.protocol import StepScorer
from proctor.search.budget import Budget


@dataclass
class Merged:
    """One distinct action among a state's draws: its first candidate, how many draws gave it, its score."""

    candidate: Candidate
    count: int
    index: int  # position of its first draw
    score: float | None = None

    @property
    def action(self) -> str:
        return self.candidate.action


def merge_candidates(candidates: Sequence[Candidate]) -> list[Merged]:
    """Distinct actions in first-drawn order, each with its count (Σ counts = len(candidates))."""
    by_action: dict[str, Merged] = {}
    for i, c in enumerate(candidates):
        if c.action in by_action:
            by_action[c.action].count += 1
        else:
            by_action[c.action] = Merged(c, 1, i)
    return list(by_action.values())


def rank(merged: Sequence[Merged]) -> list[Merged]:
    """Best first: higher score, then higher count, then drawn earlier (a total, deterministic order)."""
    if any(m.score is None for m in merged):
        raise ValueError("rank needs every candidate scored")
    return sorted(merged, key=lambda m: (-m.score, -m.count, m.index))


def describe_candidates(merged: Sequence[Merged]) -> list[dict[str, Any]]:
    """What a report shows of the candidates considered at a state, in drawn order."""
    return [{"action": m.action, "score": m.score, "count": m.count} for m in merged]


def chosen(best: Merged, merged: Sequence[Merged], budget: Budget | None = None, **extra: Any) -> Candidate:
    """A copy of the chosen candidate whose meta records the choice (prm_score, count, candidates, budget)."""
    meta = {**best.candidate.meta, "prm_score": best.score, "count": best.count,
            "candidates": describe_candidates(merged), **extra}
    if budget is not None:
        meta["budget"] = budget.as_dict()
    return dataclasses.replace(best.candidate, meta=meta)


class BestOfNAgent(Agent):
    """Acts with the PRM's argmax among `n` samples of `base` per state (see module docstring).

    `scorer` is a `proctor.prm.PRMScorer`; `states_per_pass` states share one batched PRM pass (default: the
    scorer's batch size). `act(prefixes, k)` with k > 1 returns the k best distinct candidates, best first
    (repeated in rank order when fewer than k are distinct)."""

    def __init__(self, base: Agent, scorer: StepScorer, n: int, states_per_pass: int | None = None,
                 prm_name: str = "prm"):
        if n < 1:
            raise ValueError(f"best-of-N needs n >= 1, got {n}")
        self.base, self.scorer, self.n = base, scorer, n
        self.states_per_pass = states_per_pass
        self.prm_name = prm_name
        self.name = f"best-of-{n}({base.name})"

    @property
    def needs_expert_hints(self) -> bool:
        return self.base.needs_expert_hints

    def describe(self) -> str:
        return f"per-step best-of-{self.n} of [{self.base.describe()}] by PRM {self.prm_name}"

    def reset(self, prefix: Prefix) -> None:
        self.base.reset(prefix)

    def close(self) -> None:
        self.base.close()

    def score(self, prefixes: Sequence[Prefix], groups: Sequence[Sequence[Merged]]) -> None:
        """Fill in every merged candidate's PRM score, all states batched together."""
        try:
            scores = self.scorer.score_action_groups(prefixes, [[m.action for m in g] for g in groups],
                                                     states_per_pass=self.states_per_pass)
        except (ValueError, RuntimeError) as e:  # a prefix too long for the PRM, out of memory, ...
            raise AgentError(f"PRM scoring failed: {type(e).__name__}: {e}") from e
        for group, row in zip(groups, scores, strict=True):
            for m, s in zip(group, row, strict=True):
                m.score = s

    def act(self, prefixes: Sequence[Prefix], n: int = 1) -> list[list[Candidate]]:
        draws = self.base.act(prefixes, self.n)
        if len(draws) != len(prefixes) or any(not d for d in draws):
            raise AgentError(f"base agent returned candidates for {len(draws)} of {len(prefixes)} states "
                             "(or none for some)")
        groups = [merge_candidates(d) for d in draws]
        self.score(prefixes, groups)
        out = []
        for d, group in zip(draws, groups, strict=True):
            budget = Budget(env_steps=1, prm_calls=len(group))
            budget.drew(d)
            ranked = rank(group)
            picks = [chosen(ranked[0], group, budget)]
            picks += [chosen(ranked[i % len(ranked)], group) for i in range(1, n)]
            out.append(picks)
        return out

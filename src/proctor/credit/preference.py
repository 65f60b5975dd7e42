"""Preference pairs: which of one state's scored alternatives are preferred to which (`margin_pairs`, the one rule,
also online DPO's over a PRM's scores of candidate actions, `proctor.rl.online_dpo`), and the pairs for AgentPRM's
relative (Bradley–Terry) loss (docs/methods.md §1.3, `mc_preference_pairs`).

At every state with at least two distinct actions, emit (chosen, rejected) for every ordered pair of
distinct actions with Q̂(s, chosen) > Q̂(s, rejected) + δ, Q̂ the Monte-Carlo Q on the ±1 scale
(δ = 0.03 there). A state seen with a single action emits nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import Field

from proctor.credit.montecarlo import MCConfig, MCTable, mc_table
from proctor.credit.outcome import Scored, scored
from proctor.credit.records import PreferencePair, params_json
from proctor.credit.registry import MethodResult, Sources, register_method

#: which pairs of one state's alternatives: every ordered pair, the best against the worst, or against every other
Pairing = Literal["all", "best-worst", "best-rest"]
PAIRINGS: tuple[str, ...] = ("all", "best-worst", "best-rest")


def margin_pairs(scores: Sequence[float], margin: float = 0.0, pairing: Pairing = "all") -> list[tuple[int, int]]:
    """(chosen, rejected) index pairs of one state's scored alternatives, chosen scoring more than `margin` above
    rejected (scores[c] > scores[r] + margin): every such ordered pair in index order (`all`), the first best against
    the last worst (`best-worst`), or the first best against every other it beats (`best-rest`); [] when none
    does (a tie, or fewer than two alternatives)."""
    if pairing not in PAIRINGS:
        raise ValueError(f"unknown pairing {pairing!r}; choose one of {', '.join(PAIRINGS)}")
    ids = range(len(scores))

    def beats(c: int, r: int) -> bool:
        return scores[c] > scores[r] + margin

    if pairing == "all":
        return [(c, r) for c in ids for r in ids if beats(c, r)]
    if not scores:
        return []
    best = max(ids, key=lambda i: (scores[i], -i))
    if pairing == "best-worst":
        worst = min(ids, key=lambda i: (scores[i], -i))
        return [(best, worst)] if beats(best, worst) else []
    return [(best, r) for r in ids if beats(best, r)]


class PreferenceConfig(MCConfig):
    delta: float = Field(0.03, ge=0.0, description="margin on the ±1 Q scale")


def pairs_from_table(table: MCTable, delta: float, params: str) -> list[PreferencePair]:
    """All (chosen, rejected) pairs with Q̂_c > Q̂_r + δ at a shared state; order follows first occurrence."""
    actions_at: dict[bytes, dict[bytes, tuple[Scored, int]]] = {}
    for it, states, pairs in zip(table.items, table.states, table.pairs, strict=True):
        for i, (s, p) in enumerate(zip(states, pairs, strict=True)):
            actions_at.setdefault(s, {}).setdefault(p, (it, i))
    out = []
    for s, actions in actions_at.items():
        keys = list(actions)
        q, n = [table.q.mean[p] for p in keys], [table.q.count[p] for p in keys]
        for c, r in margin_pairs(q, delta):
            (ic, tc), (ir, tr) = actions[keys[c]], actions[keys[r]]
            chosen, rejected = ic.traj, ir.traj
            out.append(PreferencePair(
                chosen.id, chosen.task_id, chosen.env, chosen.split, tc, s.hex(), chosen.steps[tc].action,
                chosen.steps[tc].reason, rejected.steps[tr].action, rejected.steps[tr].reason, q[c], q[r], n[c], n[r],
                rejected.id, tr, "preference", params))
    return out


def mc_preference_pairs(items: list[Scored], cfg: PreferenceConfig) -> list[PreferencePair]:
    """Preference pairs from Monte-Carlo Q̂ over `items` (see module docstring)."""
    return pairs_from_table(mc_table(items, cfg, with_v=False), cfg.delta, params_json(cfg))


@register_method("preference", PreferenceConfig,
                 "(chosen, rejected) actions at the same state with Q̂ margin > δ (AgentPRM relative loss)")
def run_preference(sources: Sources, cfg: PreferenceConfig) -> MethodResult:
    items, dropped = scored(sources.trajectories, cfg)
    pairs = mc_preference_pairs(items, cfg)
    notes = {} if pairs else {"empty": f"no state of the {len(items)} trajectories has two actions whose Q̂ "
                                       f"differ by more than delta = {cfg.delta}"}
    return MethodResult(pairs, dropped, notes, PreferencePair)

"""Preference pairs for AgentPRM's relative (Bradley–Terry) loss (docs/methods.md §1.3).

At every state with at least two distinct actions, emit (chosen, rejected) for every ordered pair of
distinct actions with Q̂(s, chosen) > Q̂(s, rejected) + δ, Q̂ the Monte-Carlo Q on the ±1 scale
(δ = 0.03 there). A state seen with a single action emits nothing.
"""

from __future__ import annotations

from pydantic import Field

from proctor.credit.montecarlo import MCConfig, MCTable, mc_table
from proctor.credit.outcome import Scored, scored
from proctor.credit.records import PreferencePair, params_json
from proctor.credit.registry import MethodResult, Sources, register_method


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
        if len(actions) < 2:
            continue
        for pc, (ic, tc) in actions.items():
            qc, nc = table.q.mean[pc], table.q.count[pc]
            for pr, (ir, tr) in actions.items():
                qr, nr = table.q.mean[pr], table.q.count[pr]
                if pc == pr or not qc > qr + delta:
                    continue
                c, r = ic.traj, ir.traj
                out.append(PreferencePair(
                    c.id, c.task_id, c.env, c.split, tc, s.hex(), c.steps[tc].action, c.steps[tc].reason,
                    r.steps[tr].action, r.steps[tr].reason, qc, qr, nc, nr, r.id, tr, "preference", params))
    return out


def preference_pairs(items: list[Scored], cfg: PreferenceConfig) -> list[PreferencePair]:
    """Preference pairs from Monte-Carlo Q̂ over `items` (see module docstring)."""
    return pairs_from_table(mc_table(items, cfg, with_v=False), cfg.delta, params_json(cfg))


@register_method("preference", PreferenceConfig,
                 "(chosen, rejected) actions at the same state with Q̂ margin > δ (AgentPRM relative loss)")
def run_preference(sources: Sources, cfg: PreferenceConfig) -> MethodResult:
    items, dropped = scored(sources.trajectories, cfg)
    pairs = preference_pairs(items, cfg)
    notes = {} if pairs else {"empty": f"no state of the {len(items)} trajectories has two actions whose Q̂ "
                                       f"differ by more than delta = {cfg.delta}"}
    return MethodResult(pairs, dropped, notes, PreferencePair)

"""The reward-hacking monitor of `proctor run`: does the PRM still tell the truth about the policy it trains?

AgentPRM (§4) saw test success fall from 82% to 70% over iterations while the PRM's score of the policy's own
actions rose. After each iteration's evaluation of the policy, `monitor` records, on the same episodes:

- `success_rate`: true env success;
- `prm_mean`: the PRM's mean score of the actions the policy took (the evaluation's `Step.scores`);
- `mc_q_mean`: Monte-Carlo re-labels of a sample of those (state, action) pairs: one step t per episode of the
  first `states` tasks, a_t replayed and the policy completing the episode `completions` times
  (`proctor.rollout` candidate starts), Q̃(s_t, a_t) = (mean γ^(T−1−t)·R + 1)/2 (`proctor.credit.candidates`,
  the scale of MC-Q targets);
- `drift` = mean over those pairs of (PRM score − Q̃): above 0, the PRM over-rates the policy's actions.

`proctor.evaluation.plots.monitor_png` plots the three rates against the iteration.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from proctor.envs.ref import EnvRef


class MonitorSection(BaseModel):
    """Where and how much to re-label (see module docstring)."""

    model_config = ConfigDict(extra="forbid")

    entry: str | None = Field(default=None, description="the evaluation entry that is the policy (None: the "
                              "first entry with an agent)")
    states: int = Field(default=30, ge=1, description="re-labelled (state, action) pairs: one per episode of the "
                        "first N tasks")
    completions: int = Field(default=2, ge=1, description="policy completions per pair")
    gamma: float = Field(default=0.95, gt=0, le=1, description="γ: the discount of the re-labels' MC-Q returns")
    batch: int = Field(default=32, ge=1, description="envs stepped together while completing")
    score_key: str = Field(default="prm", description="the Step.scores key of the PRM's scores in the evaluation")


def relabel(scored_store: Path, out: Path, *, env: EnvRef, agent: dict[str, Any],
            cfg: MonitorSection, seed: int, workers: int = 0, step_timeout: float | None = 60.0) -> dict[str, Any]:
    """Re-label `cfg.states` (state, action) pairs of the scored episodes in `scored_store` by the policy's
    completions on `env` (written to `out`, envs in `workers` processes); returns the monitor's record for this
    iteration."""
    from proctor.credit.candidates import candidate_q
    from proctor.credit.montecarlo import MCConfig
    from proctor.rollout import RolloutConfig, run_rollout
    from proctor.store import TrajectoryStore

    episodes = TrajectoryStore.open(scored_store).load()
    rcfg = RolloutConfig(**env.env_ref(), agent=agent, out=out, tasks=cfg.states, batch=cfg.batch,
                         seed=seed, workers=workers, step_timeout=step_timeout,
                         start={"source": scored_store, "prefix_lengths": "states", "per_source": 1,
                                "completions": cfg.completions,
                                "candidates": {"expert": False, "taken": True, "random": 0}})
    comps = run_rollout(rcfg).store.load()
    by_id = {t.id: t for t in episodes}
    pairs = []
    for e in candidate_q(comps, MCConfig(gamma=cfg.gamma)):
        score = by_id[e.source_id].steps[e.step].scores.get(cfg.score_key)
        if score is None:
            raise ValueError(f"{scored_store}: trajectory {e.source_id} step {e.step} has no score "
                             f"{cfg.score_key!r} (evaluate the policy with a PRM)")
        pairs.append((float(score), e.q))
    if not pairs:
        raise ValueError(f"{scored_store}: no (state, action) pair to re-label (the evaluated episodes have no steps)")
    steps = [s.scores.get(cfg.score_key) for t in episodes for s in t.steps]
    steps = [x for x in steps if x is not None]
    return {"episodes": len(episodes), "success_rate": sum(t.success for t in episodes) / len(episodes),
            "prm_mean": sum(steps) / len(steps) if steps else None, "relabelled": len(pairs),
            "prm_mean_relabelled": sum(p for p, _ in pairs) / len(pairs),
            "mc_q_mean": sum(q for _, q in pairs) / len(pairs),
            "drift": sum(p - q for p, q in pairs) / len(pairs), "completions": len(comps)}

"""Monte-Carlo Q of candidate actions at stored states, from candidate completions (`proctor.rollout.starts`).

Layout. A candidate completion is a `Trajectory` whose `meta` has `prefix_of` (the source id), `prefix_len`
= t (the source's first t steps were replayed) and `candidate` = a (the action taken at s_t, `steps[t]`),
after which the policy continued. For the K_a completions j of (source, t, a), with T_j steps and outcome
R_j ∈ [0, 1] (`OutcomeConfig`), R̃_j = 2R_j − 1, the return credited to the candidate step t is AgentPRM's
MC-Q return (docs/methods.md §1.1, the `mc-q` method's definition):

    G_j = γ^{T_j−1−t}·R̃_j     (discount "to_go", the paper's; "from_start": γ^t·R̃_j)
    Q̂(s_t, a) = (1/K_a) Σ_j G_j ∈ [−1, 1],     Q̃(s_t, a) = (Q̂ + 1)/2 ∈ [0, 1]

so Q̃ is on the scale of the `mc-q` targets a PRM is trained on.

As training data (registered methods, `proctor targets --method candidate-q|candidate-pairs --in COMPLETIONS`):
`candidate-q` emits one step record per (state, candidate) with target Q̃, `candidate-pairs` a preference pair
for every two candidates of one state whose Q̃ differ by ≥ `margin` (AgentPRM's relative loss on
low-variance, same-state contrasts). Each record points at step t of one completion of its candidate (the
shortest), whose first t + 1 steps are the state and the candidate.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import Field

from proctor.credit.keys import state_keys
from proctor.credit.montecarlo import MCConfig, outcome_returns
from proctor.credit.outcome import CreditError, canonical_order, scored, signed
from proctor.credit.records import LabelledStep, PreferencePair, params_json
from proctor.credit.registry import MethodResult, Sources, register_method
from proctor.trajectory import Trajectory


@dataclass(frozen=True)
class CandidateQ:
    """The MC estimate of one candidate action at one stored state."""

    source_id: str
    task_id: str
    step: int  # t: the state s_t of the source
    action: str
    q: float  # Q̃ ∈ [0, 1]
    q_signed: float  # Q̂ ∈ [−1, 1]
    n: int  # completions averaged (K_a)


def candidate_of(c: Trajectory) -> tuple[str, int, str]:
    """(source id, t, candidate action) of a candidate completion; errors name the trajectory and field."""
    src, t, a = c.meta.get("prefix_of"), c.meta.get("prefix_len"), c.meta.get("candidate")
    if not isinstance(src, str):
        raise CreditError(c.id, "meta.prefix_of", f"a candidate completion needs the source id, got {src!r}")
    if not isinstance(t, int) or isinstance(t, bool) or t < 0:
        raise CreditError(c.id, "meta.prefix_len", f"needs the state index t >= 0, got {t!r}")
    if not isinstance(a, str):
        raise CreditError(c.id, "meta.candidate", f"needs the candidate action, got {a!r} (not a candidate "
                                                 "completion: roll out with start.candidates)")
    if len(c.steps) <= t:
        raise CreditError(c.id, "steps", f"has {len(c.steps)} steps, so no candidate step {t}")
    if c.steps[t].action != a:
        raise CreditError(c.id, f"steps[{t}].action", f"is {c.steps[t].action!r}, not the candidate {a!r}")
    return src, t, a


def candidate_q(completions: Sequence[Trajectory], cfg: MCConfig | None = None) -> list[CandidateQ]:
    """Q̃(s_t, a) per (source, t, candidate) (module docstring), sorted by (source, t, action). Completions
    that ended in env/agent errors are an error unless `cfg.drop_errors`."""
    cfg = cfg or MCConfig()
    items, _ = scored(completions, cfg)
    returns: dict[tuple[str, int, str], list[float]] = defaultdict(list)
    task: dict[str, str] = {}
    for it in items:
        src, t, a = candidate_of(it.traj)
        if task.setdefault(src, it.traj.task_id) != it.traj.task_id:
            raise CreditError(it.traj.id, "task_id", f"{it.traj.task_id!r}, but other completions of source "
                                                     f"{src!r} are of task {task[src]!r}")
        returns[(src, t, a)].append(outcome_returns(signed(it.r), len(it.traj.steps), cfg.gamma, cfg.discount)[t])
    out = []
    for (src, t, a), g in sorted(returns.items()):
        q = sum(g) / len(g)
        out.append(CandidateQ(src, task[src], t, a, (q + 1.0) / 2.0, q, len(g)))
    return out


def by_state(estimates: Sequence[CandidateQ]) -> dict[tuple[str, int], dict[str, CandidateQ]]:
    """The estimates grouped per state (source id, t), then by action."""
    out: dict[tuple[str, int], dict[str, CandidateQ]] = defaultdict(dict)
    for e in estimates:
        out[(e.source_id, e.step)][e.action] = e
    return dict(out)


# -- training records from candidate completions (registered methods) ---------------------------------------
class CandidateTargetsConfig(MCConfig):
    """`candidate-q` / `candidate-pairs`: the MC-Q parameters, and the pairs' margin on the [0, 1] scale."""

    margin: float = Field(0.2, gt=0.0, le=1.0, description="candidate-pairs: min Q̃(chosen) − Q̃(rejected)")


def _representatives(items: Sequence[Trajectory]) -> dict[tuple[str, int, str], Trajectory]:
    """Per (source, t, candidate): its shortest completion (the first in canonical order among equals), the
    trajectory a record points at (a PRM renders it; only its first t + 1 steps matter for step t)."""
    rep: dict[tuple[str, int, str], Trajectory] = {}
    for c in canonical_order(items):
        key = candidate_of(c)
        if key not in rep or len(c.steps) < len(rep[key].steps):
            rep[key] = c
    return rep


def candidate_records(completions: Sequence[Trajectory], cfg: CandidateTargetsConfig) -> list[LabelledStep]:
    """One step record per (state, candidate): target Q̃(s_t, a) (module docstring) on step t of a
    representative completion, visits = K_a, extra q = Q̂."""
    items = [it.traj for it in scored(completions, cfg)[0]]
    rep, params = _representatives(items), params_json(cfg)
    out = []
    for e in candidate_q(items, cfg):
        c = rep[(e.source_id, e.step, e.action)]
        key = state_keys(c)[e.step].hex()
        out.append(LabelledStep(c.id, c.task_id, c.env, c.split, e.step, key, e.action, c.steps[e.step].reason,
                                e.q, e.n, "candidate-q", params, {"q": e.q_signed}))
    return out


def candidate_pairs(completions: Sequence[Trajectory], cfg: CandidateTargetsConfig) -> list[PreferencePair]:
    """(chosen, rejected) for every two candidates of one state with Q̃(chosen) − Q̃(rejected) ≥ margin,
    each pointing at its representative completion's step t (Q values on the ±1 scale, as `preference`)."""
    items = [it.traj for it in scored(completions, cfg)[0]]
    rep, params = _representatives(items), params_json(cfg)
    out = []
    for (src, t), acts in sorted(by_state(candidate_q(items, cfg)).items()):
        for a, b in itertools.permutations(sorted(acts), 2):
            ea, eb = acts[a], acts[b]
            if ea.q - eb.q < cfg.margin - 1e-9:
                continue
            c, r = rep[(src, t, a)], rep[(src, t, b)]
            out.append(PreferencePair(c.id, c.task_id, c.env, c.split, t, state_keys(c)[t].hex(), a,
                                      c.steps[t].reason, b, r.steps[t].reason, ea.q_signed, eb.q_signed, ea.n, eb.n,
                                      r.id, t, "candidate-pairs", params))
    return out


@register_method("candidate-q", CandidateTargetsConfig,
                 "MC-Q of candidate actions at stored states, from candidate completions (rollout start.candidates)")
def run_candidate_q(sources: Sources, cfg: CandidateTargetsConfig) -> MethodResult:
    _, dropped = scored(sources.trajectories, cfg)
    return MethodResult(candidate_records(sources.trajectories, cfg), dropped)


@register_method("candidate-pairs", CandidateTargetsConfig,
                 "(chosen, rejected) candidate actions at one state, Q̃ margin ≥ margin (Bradley–Terry pairs)")
def run_candidate_pairs(sources: Sources, cfg: CandidateTargetsConfig) -> MethodResult:
    _, dropped = scored(sources.trajectories, cfg)
    return MethodResult(candidate_pairs(sources.trajectories, cfg), dropped)

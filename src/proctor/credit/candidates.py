"""Monte-Carlo Q of candidate actions at stored states, from candidate completions (`proctor.rollout.starts`).

Layout. A candidate completion is a `Trajectory` whose `meta` has `prefix_of` (the source id), `prefix_len`
= t (the source's first t steps were replayed) and `candidate` = a (the action taken at s_t, `steps[t]`),
after which the policy continued. For the K_a completions j of (source, t, a), with T_j steps and outcome
R_j ∈ [0, 1] (`OutcomeConfig`), R̃_j = 2R_j − 1, the return credited to the candidate step t is AgentPRM's
MC-Q return (docs/methods.md §1.1, the `mc-q` method's definition):

    G_j = γ^{T_j−1−t}·R̃_j     (discount "to_go", the paper's; "from_start": γ^t·R̃_j)
    Q̂(s_t, a) = (1/K_a) Σ_j G_j ∈ [−1, 1],     Q̃(s_t, a) = (Q̂ + 1)/2 ∈ [0, 1]

so Q̃ is on the scale of the `mc-q` targets a PRM is trained on.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from proctor.credit.montecarlo import MCConfig, discounted_returns
from proctor.credit.outcome import CreditError, scored, signed
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
        returns[(src, t, a)].append(discounted_returns(signed(it.r), len(it.traj.steps), cfg.gamma, cfg.discount)[t])
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

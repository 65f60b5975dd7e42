"""Agents without a model: `RandomAgent` (uniform over admissible actions) and `ReplayAgent` (a stored
trajectory's actions again)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import cache

from proctor.agents.base import Agent, AgentError, Candidate, Prefix
from proctor.seeding import stable_rng
from proctor.store import TrajectoryStore
from proctor.trajectory import Trajectory


class RandomAgent(Agent):
    """Picks uniformly among the admissible actions; when the env gives none, among `fallback_actions`, else
    among the env's `candidate_actions()` (e.g. twenty_questions' canonical questions and guesses).

    Deterministic given (seed, task_id, sample, step): the n samples of a step are n draws with
    replacement from a generator seeded with those."""

    def __init__(self, seed: int = 0, fallback_actions: Sequence[str] | None = None):
        self.seed = seed
        self.fallback_actions = list(fallback_actions) if fallback_actions else None
        self.name = "random"

    def describe(self) -> str:
        fallback = f", fallback={len(self.fallback_actions)} actions" if self.fallback_actions else ""
        return f"random (uniform over admissible actions, seed={self.seed}{fallback})"

    def act(self, prefixes: Sequence[Prefix], n: int = 1) -> list[list[Candidate]]:
        out = []
        for p in prefixes:
            actions = p.admissible_actions or self.fallback_actions or env_candidate_actions(p.env)
            if not actions:
                raise AgentError(f"RandomAgent: env {p.env!r} lists neither admissible nor candidate actions "
                                 f"(task {p.task_id!r}, step {p.step_index}); pass fallback_actions "
                                 f"(--agent-arg 'fallback_actions=[\"...\"]')")
            rng = stable_rng(self.seed, p.task_id, p.sample, p.step_index)
            picks = [rng.choice(actions) for _ in range(n)]
            out.append([Candidate(action=a, raw_output=a) for a in picks])
        return out


@cache
def env_candidate_actions(env: str) -> tuple[str, ...]:
    """The registered env class's `candidate_actions()` (empty when it has none or is not registered)."""
    from proctor.envs import entries

    entry = entries().get(env)
    try:
        return tuple(entry.factory().candidate_actions() or ()) if entry is not None else ()
    except ImportError:  # an adapter whose extra is missing: it has no list to give
        return ()


class ReplayAgent(Agent):
    """Replays the actions (and reasons, raw outputs, log-probs) of stored trajectories, matched by
    (env, task_id, sample). With `check_observations`, a prefix whose observation differs from the stored
    one is an error (the env diverged from the recording)."""

    def __init__(self, source: Iterable[Trajectory] | TrajectoryStore, check_observations: bool = True):
        self.by_key: dict[tuple[str, str, int], Trajectory] = {}
        for traj in source:
            key = (traj.env, traj.task_id, traj.sample)
            if key in self.by_key:
                raise ValueError(f"ReplayAgent: two trajectories for env {traj.env!r}, task {traj.task_id!r}, "
                                 f"sample {traj.sample} ({self.by_key[key].id} and {traj.id})")
            self.by_key[key] = traj
        self.check_observations = check_observations
        self.recorded_by = sorted({t.agent for t in self.by_key.values()})
        self.name = "replay"

    def describe(self) -> str:
        return f"replay of {len(self.by_key)} trajectories (by {', '.join(self.recorded_by) or 'nobody'})"

    def act(self, prefixes: Sequence[Prefix], n: int = 1) -> list[list[Candidate]]:
        out = []
        for p in prefixes:
            traj = self.by_key.get((p.env, p.task_id, p.sample))
            if traj is None:
                raise AgentError(f"ReplayAgent: no stored trajectory for env {p.env!r}, task {p.task_id!r}, "
                                 f"sample {p.sample}")
            t = p.step_index
            if t >= len(traj.steps):
                raise AgentError(f"ReplayAgent: trajectory {traj.id} has {len(traj.steps)} steps; "
                                 f"asked for step {t}")
            step = traj.steps[t]
            if self.check_observations and step.observation != p.observation:
                raise AgentError(f"ReplayAgent: trajectory {traj.id} step {t}: the env's observation differs "
                                 f"from the recorded one ({p.observation[:80]!r} vs {step.observation[:80]!r})")
            out.append([
                Candidate(action=step.action, reason=step.reason, raw_output=step.raw_output or step.action,
                          logprobs=step.logprobs, meta={"replayed": traj.id})
                for _ in range(n)
            ])
        return out

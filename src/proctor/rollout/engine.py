"""The batched rollout loop: K samples per task, B envs at once, one agent call per step for all of them.

Continuous batching: `batch_size` env slots are kept busy; when an episode ends its slot is reset at once
with the next pending (task, sample), so every agent call sees a full batch until the work runs out.
Each finished episode is appended to the `TrajectoryStore` as soon as it ends, so a killed run loses only
the episodes in flight, and re-running the same call skips the stored (task, sample) pairs (resume).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from proctor.agents.base import Agent, AgentError, Candidate, Prefix
from proctor.envs.base import EnvSpec
from proctor.rollout.progress import RolloutProgress
from proctor.rollout.workers import make_pool
from proctor.trajectory import Step, Trajectory, TrajectoryStore

log = logging.getLogger(__name__)

#: the store-manifest fields a resumed run must agree on (else its pairs would mix different runs)
RUN_IDENTITY = ("env", "env_kwargs", "split", "seed", "agent")
#: info keys that describe a state rather than an action's outcome; a Step keeps those of `Step.observation`
STATE_INFO_KEYS = ("admissible_actions", "expert_action")


def episode_seed(run_seed: int, task_id: str, sample: int) -> int:
    """The env seed of one (task, sample): the first 31 bits of sha256("<run_seed>/<task_id>/<sample>").

    Deterministic across processes and machines (unlike `hash()`), independent of batch order and of
    which pairs a resumed run still has to do.
    """
    digest = hashlib.sha256(f"{run_seed}/{task_id}/{sample}".encode()).digest()
    return int.from_bytes(digest[:4], "big") >> 1


@dataclass(frozen=True)
class WorkItem:
    task_id: str
    sample: int
    seed: int


def plan(tasks: Sequence[str], samples_per_task: int, run_seed: int,
         done: set[tuple[str, int]] = frozenset()) -> list[WorkItem]:
    """The (task, sample) pairs still to roll out, task-major, each with its seed."""
    if samples_per_task < 1:
        raise ValueError(f"samples_per_task must be >= 1, got {samples_per_task}")
    if len(set(tasks)) != len(tasks):
        raise ValueError("the task list has duplicate ids")
    return [WorkItem(t, k, episode_seed(run_seed, t, k))
            for t in tasks for k in range(samples_per_task) if (t, k) not in done]


@dataclass
class _Episode:
    item: WorkItem
    task: str
    observation: str
    info: dict[str, Any]
    started: float
    steps: list[Step] = field(default_factory=list)
    reset_s: float = 0.0
    env_s: float = 0.0
    agent_s: float = 0.0

    def prefix(self, env: str) -> Prefix:
        return Prefix(env=env, task_id=self.item.task_id, task=self.task, observation=self.observation,
                      history=list(self.steps), info=self.info, sample=self.item.sample, seed=self.item.seed)


def step_info(before: dict[str, Any], after: dict[str, Any], candidate: Candidate) -> dict[str, Any]:
    """A Step's info: the env's step info, but with the state keys (admissible actions, expert action) of
    the state the agent acted in, and whether the agent's output parsed."""
    info = {k: v for k, v in after.items() if k not in STATE_INFO_KEYS}
    for k in STATE_INFO_KEYS:
        if k in before:
            info[k] = before[k]
    info["parsed"] = candidate.parsed
    if not candidate.finished:
        info["finished"] = False
    if candidate.meta:
        info["candidate_meta"] = candidate.meta
    return info


def open_store(out: TrajectoryStore | str | os.PathLike, identity: dict[str, Any]) -> TrajectoryStore:
    """Open or create the store; a store made by a different run (env, split, seed, agent) is an error."""
    root = out.root if isinstance(out, TrajectoryStore) else out
    identity = json.loads(json.dumps(identity, default=str))
    if isinstance(out, TrajectoryStore):
        store = out
    elif (Path(root) / "manifest.json").exists():
        store = TrajectoryStore.open(root)
    else:
        store = TrajectoryStore(root, meta={"rollout": identity})
    previous = store.meta.get("rollout")
    if previous is None:
        return TrajectoryStore(root, meta={"rollout": identity})
    for key in RUN_IDENTITY:
        if previous.get(key) != identity.get(key):
            raise ValueError(
                f"{store.manifest_path}: field 'meta.rollout.{key}' is {previous.get(key)!r} but this run has "
                f"{identity.get(key)!r}; resume only the same run, or write to a new output directory"
            )
    return store


def rollout(
    env_spec: EnvSpec,
    agent: Agent,
    tasks: Sequence[str],
    store: TrajectoryStore | str | os.PathLike,
    *,
    split: str = "test",
    samples_per_task: int = 1,
    batch_size: int = 8,
    seed: int = 0,
    workers: int = 0,
    backend: str = "local",
    step_timeout: float | None = 60.0,
    progress: bool = True,
    backend_options: dict[str, Any] | None = None,
) -> TrajectoryStore:
    """Roll `agent` out on every (task, sample) pair not yet in `store`; returns the store.

    `workers=0` steps envs in this process; `workers=W` hosts them in W worker processes (or Ray actors
    with `backend="ray"`), where a hung env (no answer within `step_timeout` s) or a crashed one ends its
    episode with `env_error` and the rest go on. An `AgentError` ends the episodes of that batch with
    `agent_error`. When the agent needs expert hints (the oracle expert), the env is made with them.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if getattr(agent, "needs_expert_hints", False) and not env_spec.kwargs.get("expert_hints"):
        env_spec = EnvSpec(env_spec.name, {**env_spec.kwargs, "expert_hints": True})
    identity = {"env": env_spec.name, "env_kwargs": env_spec.kwargs, "split": split, "seed": seed,
                "agent": agent.describe()}
    store = open_store(store, identity)
    done = store.done_keys()
    todo = deque(plan(tasks, samples_per_task, seed, done))
    total = len(tasks) * samples_per_task
    log.info("rollout: %d of %d (task, sample) pairs to do, %d already in %s", len(todo), total,
             total - len(todo), store.root)
    if not todo:
        return store
    runner = _Runner(env_spec, agent, store, split, seed)
    with (
        make_pool(env_spec, min(batch_size, len(todo)), workers, backend, step_timeout,
                  **(backend_options or {})) as pool,
        RolloutProgress(total, total - len(todo), enabled=progress) as bar,
    ):
        runner.run(pool, todo, bar)
    return store


class _Runner:
    """The loop of `rollout`, with the per-episode bookkeeping."""

    def __init__(self, env_spec: EnvSpec, agent: Agent, store: TrajectoryStore, split: str, run_seed: int):
        self.env = env_spec.name
        self.agent = agent
        self.agent_name = agent.describe()
        self.store = store
        self.split = split
        self.run_seed = run_seed

    def run(self, pool, todo: deque[WorkItem], bar: RolloutProgress) -> None:
        self.pool, self.bar = pool, bar
        self.free = list(range(pool.n_slots))[::-1]
        self.active: dict[int, _Episode] = {}
        while todo or self.active:
            self._refill(todo)
            if self.active:
                self._step_all()

    def _refill(self, todo: deque[WorkItem]) -> None:
        starting: dict[int, tuple[WorkItem, float]] = {}
        while self.free and todo:
            slot, item = self.free.pop(), todo.popleft()
            self.pool.reset(slot, item.task_id, item.seed)
            starting[slot] = (item, time.monotonic())
        if not starting:
            return
        for slot, reply in self.pool.collect().items():
            item, started = starting[slot]
            if not reply.ok:
                ep = _Episode(item, "", "", {}, started, reset_s=reply.seconds)
                self._finish(slot, ep, "env_error", f"reset failed: {reply.error}")
                continue
            obs, info = reply.value
            ep = self.active[slot] = _Episode(item, info["task"], obs, info, started, reset_s=reply.seconds)
            try:
                self.agent.reset(ep.prefix(self.env))
            except AgentError as e:
                self._finish(slot, ep, "agent_error", f"{type(e).__name__}: {e}")

    def _step_all(self) -> None:
        slots = sorted(self.active)
        prefixes = [self.active[s].prefix(self.env) for s in slots]
        start = time.perf_counter()
        try:
            candidates = self.agent.act(prefixes, 1)
            if len(candidates) != len(prefixes) or any(not c for c in candidates):
                raise AgentError(f"agent returned candidates for {len(candidates)} of {len(prefixes)} prefixes "
                                 "(or an empty list for some)")
        except AgentError as e:
            for s in slots:
                self._finish(s, self.active[s], "agent_error", f"{type(e).__name__}: {e}")
            return
        share = (time.perf_counter() - start) / len(slots)
        chosen: dict[int, Candidate] = {}
        for s, cands in zip(slots, candidates, strict=True):
            self.active[s].agent_s += share
            chosen[s] = cands[0]
            self.pool.step(s, cands[0].action)
        for s, reply in self.pool.collect().items():
            ep = self.active[s]
            ep.env_s += reply.seconds
            if not reply.ok:
                self._finish(s, ep, "env_error", reply.error)
                continue
            obs, reward, done, info = reply.value
            c = chosen[s]
            ep.steps.append(Step(observation=ep.observation, action=c.action, reason=c.reason,
                                 raw_output=c.raw_output, logprobs=c.logprobs, reward=reward, done=done,
                                 info=step_info(ep.info, info, c)))
            ep.observation, ep.info = obs, info
            if done:
                won = bool(info.get("won"))
                self._finish(s, ep, "success" if won else "max_steps" if info.get("truncated") else "failure")

    def _finish(self, slot: int, ep: _Episode, termination: str, error: str | None = None) -> None:
        self.active.pop(slot, None)
        self.pool.release(slot)
        self.free.append(slot)
        traj = Trajectory(
            id=Trajectory.new_id(), env=self.env, task_id=ep.item.task_id, sample=ep.item.sample, task=ep.task,
            split=self.split, seed=ep.item.seed, agent=self.agent_name, steps=ep.steps,
            final_observation=ep.observation if ep.steps else "",
            success=termination == "success", score=float(ep.info.get("score", 0.0)),
            termination=termination, error=error,
            timings={"reset_s": ep.reset_s, "env_s": ep.env_s, "agent_s": ep.agent_s,
                     "wall_s": time.monotonic() - ep.started},
            meta={"run_seed": self.run_seed},
        )
        self.store.append(traj)
        self.bar.episode_done(traj)

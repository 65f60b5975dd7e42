"""The rollout loop: K samples per task, run lockstep (one agent call per step for B envs at once; here) or
async (one thread per episode slot; `proctor.rollout.async_engine`), chosen by `engine`.

Continuous batching: `batch_size` env slots are kept busy; when an episode ends its slot is reset at once
with the next pending work item, so every agent call sees a full batch until the work runs out. A work
item is a (task, sample) started from the task's first state, or a completion that first replays a stored
trajectory's action prefix (`proctor.rollout.starts`). Each finished episode is appended to the
`TrajectoryStore` as soon as it ends, so a killed run loses only the episodes in flight, and re-running the
same call skips the stored (task, sample) pairs (resume).

Which loop: `engine="auto"` runs async for a served agent (`agent.served` is true: a policy behind an HTTP
server, which is kept busy only by many independent requests in flight) and lockstep for the rest (a local
model batches the B prefixes of a step on its device). Both store the same episodes for an agent whose
action depends only on the prefix.
"""

from __future__ import annotations

import logging
import os
import time
from collections import deque
from collections.abc import Sequence
from typing import Any, Literal

from proctor.agents.base import Agent, AgentError, Candidate
from proctor.envs.registry import EnvSpec
from proctor.envs.versions import env_versions
from proctor.episode import Episode, WorkItem, episode_seed, termination_of
from proctor.outputs import as_json
from proctor.rollout.async_engine import AsyncRunner
from proctor.rollout.backends import make_pool
from proctor.rollout.breaker import CircuitBreaker
from proctor.rollout.failures import RolloutInterrupted
from proctor.rollout.progress import RolloutProgress
from proctor.rollout.slot_envs import SlotEnvs
from proctor.store import TrajectoryStore, open_for_run

log = logging.getLogger(__name__)

#: the store-manifest fields a resumed run must agree on (else its pairs would mix different runs)
RUN_IDENTITY = ("env", "env_kwargs", "split", "seed", "agent", "start_from")
#: the async engine's episodes in flight when neither the call nor the agent (`agent.concurrency`) says
DEFAULT_SERVED_CONCURRENCY = 32

Engine = Literal["auto", "lockstep", "async"]


class AgentFailing(RuntimeError):
    """The agent failed on every call so far (a circuit breaker stopped the run; finished episodes are kept)."""


def plan(tasks: Sequence[str], samples_per_task: int, run_seed: int,
         done: set[tuple[str, int]] = frozenset()) -> list[WorkItem]:
    """The (task, sample) pairs still to roll out, task-major, each with its seed."""
    if samples_per_task < 1:
        raise ValueError(f"samples_per_task must be >= 1, got {samples_per_task}")
    if len(set(tasks)) != len(tasks):
        raise ValueError("the task list has duplicate ids")
    return [WorkItem(t, k, episode_seed(run_seed, t, k))
            for t in tasks for k in range(samples_per_task) if (t, k) not in done]


def open_store(out: TrajectoryStore | str | os.PathLike, identity: dict[str, Any], overwrite: bool = False
               ) -> TrajectoryStore:
    """The store for the run `identity`, locked, by the one rule (`proctor.store.open_for_run` on the
    `RUN_IDENTITY` fields): created, or resumed when it holds the same run; a store of another run is refused in
    one line naming the first field that differs; `overwrite` empties it first. A store object given (a subclass
    that adds to its records) is checked so and written through. The identity's `env_versions` (the env's
    packages, `proctor.envs.versions`) are recorded with it; a resume under other versions is logged as a warning
    naming them."""
    root = out.root if isinstance(out, TrajectoryStore) else out
    store, resumed = open_for_run(root, "rollout", identity, overwrite=overwrite, compared=RUN_IDENTITY)
    previous, now = store.meta["rollout"], as_json(identity)
    before, after = previous.get("env_versions") or {}, now.get("env_versions") or {}
    changed = [f"{name}: {before.get(name)} → {after.get(name)}" for name in sorted(set(before) | set(after))
               if before.get(name) != after.get(name)]
    if resumed and changed and "env_versions" in previous:
        log.warning("%s: resuming under other versions of the env's packages than its episodes were made with (%s)",
                    store.manifest_path, "; ".join(changed))
    if isinstance(out, TrajectoryStore):
        store.close()
        return out.lock()
    return store


def choose_engine(agent: Agent, engine: Engine = "auto", concurrency: int | None = None,
                  batch_size: int = 8) -> tuple[str, int]:
    """The loop to run and its width: ("lockstep", B) or ("async", episodes in flight).

    "auto" is async when the agent is served (`getattr(agent, "served", False)`), else lockstep. The async
    width is `concurrency`, else the agent's own request limit (`agent.concurrency`, e.g. the openai agent's
    threads), else 32 for a served agent and `batch_size` for another."""
    if engine not in ("auto", "lockstep", "async"):
        raise ValueError(f"unknown rollout engine {engine!r}; choose 'auto', 'lockstep' or 'async'")
    if concurrency is not None and concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    served = bool(getattr(agent, "served", False))
    if engine == "auto":
        engine = "async" if served else "lockstep"
    if engine == "lockstep":
        return "lockstep", batch_size
    own = getattr(agent, "concurrency", None)
    own = own if isinstance(own, int) and not isinstance(own, bool) and own >= 1 else None
    if concurrency is None:
        concurrency = own or (DEFAULT_SERVED_CONCURRENCY if served else batch_size)
    elif own is not None and concurrency > own:
        log.warning("async rollout with concurrency %d, but the agent sends at most %d requests at a time "
                    "(its own `concurrency`): raise that too for more in flight", concurrency, own)
    return "async", concurrency


def rollout(
    env_spec: EnvSpec,
    agent: Agent,
    tasks: Sequence[str] | Sequence[WorkItem],
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
    retry_failed: bool = False,
    max_agent_failures: int | None = 3,
    start_from: str | None = None,
    label: str = "rollout",
    engine: Engine = "auto",
    concurrency: int | None = None,
    overwrite: bool = False,
) -> TrajectoryStore:
    """Roll `agent` out on every work item not yet in `store`; returns the store.

    `tasks`: task ids (K = `samples_per_task` samples each), or explicit `WorkItem`s (completions from
    prefixes; `start_from` names their source for the run identity). `workers=0` steps envs in this
    process; `workers=W` hosts them in W worker processes (or Ray actors with `backend="ray"`), where a hung
    env (no answer within `step_timeout` s) or a crashed one ends its episode with `env_error` and the rest
    go on. An `AgentError` ends the episodes of that agent call with `agent_error` (lockstep: the batch; async:
    the one episode); when the first `max_agent_failures` agent calls of a run all fail, `AgentFailing`
    stops it (what is done is kept).
    `engine`: "lockstep" (B = `batch_size` envs stepped together), "async" (`concurrency` episodes in flight,
    each on its own; the agent is called from that many threads at once, so it must be thread-safe), or
    "auto" (see `choose_engine`: async for a served agent).
    The store comes back closed for writing (its lock released); it reads as usual; Ctrl-C raises
    `RolloutInterrupted` with the number of episodes kept.
    A resume re-runs stored pairs that ended in `env_error`, and with `retry_failed` those that ended in
    `agent_error` too (the new record supersedes the old one). A store of another run is refused, unless
    `overwrite`, which empties it first (`open_store`). When the agent needs expert hints (the oracle expert), the
    env is made with them.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if step_timeout is not None and step_timeout <= 0:
        raise ValueError(f"step_timeout must be > 0 seconds (or None), got {step_timeout}")
    engine, width = choose_engine(agent, engine, concurrency, batch_size)
    if agent.needs_expert_hints and not env_spec.kwargs.get("expert_hints"):
        env_spec = EnvSpec(env_spec.name, {**env_spec.kwargs, "expert_hints": True})
    identity = {"env": env_spec.name, "env_kwargs": env_spec.kwargs, "split": split, "seed": seed,
                "agent": agent.describe(), "start_from": start_from, "env_versions": env_versions(env_spec.name)}
    store = open_store(store, identity, overwrite)  # locked: one writing process, before reading what is done
    failed = ("env_error", "agent_error") if retry_failed else ("env_error",)
    done = {t.key for t in store if t.termination not in failed}
    if tasks and isinstance(tasks[0], WorkItem):
        items = list(tasks)
        todo = deque(it for it in items if it.key not in done)
        total = len(items)
    else:
        todo = deque(plan(tasks, samples_per_task, seed, done))
        total = len(tasks) * samples_per_task
    log.info("%s: %d of %d episodes to do, %d already in %s (%s engine, %d at a time)", label, len(todo), total,
             total - len(todo), store.root, engine, width)
    bar = RolloutProgress(total, total - len(todo), enabled=progress, label=label)
    try:
        if todo and engine == "async":
            runner = AsyncRunner(env_spec.name, agent, store, split, seed, max_agent_failures)
            with SlotEnvs(env_spec, min(width, len(todo)), workers, backend, step_timeout,
                          **(backend_options or {})) as envs, bar:
                runner.run(envs, todo, bar)
            if runner.tripped is not None:
                raise AgentFailing(runner.tripped)
        elif todo:
            runner = _Runner(env_spec.name, agent, store, split, seed, max_agent_failures)
            with make_pool(env_spec, min(width, len(todo)), workers, backend, step_timeout,
                           **(backend_options or {})) as pool, bar:
                runner.run(pool, todo, bar)
    except KeyboardInterrupt:  # the workers ignore Ctrl-C; the pool above has shut them down
        raise RolloutInterrupted(store.root, bar.completed, total) from None
    finally:
        store.close()  # releases the write lock: the returned store is for reading
    return store


class _Runner:
    """The loop of `rollout`: keeps the pool's slots busy with `Episode`s."""

    def __init__(self, env: str, agent: Agent, store: TrajectoryStore, split: str, run_seed: int,
                 max_agent_failures: int | None):
        self.env = env
        self.agent = agent
        self.agent_name = agent.describe()
        self.store = store
        self.split = split
        self.run_seed = run_seed
        self.breaker = CircuitBreaker(max_agent_failures, store.root)
        self.steps = 0  # agent steps taken, for the progress line

    def run(self, pool, todo: deque[WorkItem], bar: RolloutProgress) -> None:
        self.pool, self.bar = pool, bar
        self.free = list(range(pool.n_slots))[::-1]
        self.active: dict[int, Episode] = {}
        while todo or self.active:
            self._refill(todo)
            if self.active:
                self._step_all()

    def _refill(self, todo: deque[WorkItem]) -> None:
        starting: dict[int, tuple[WorkItem, float]] = {}
        while self.free and todo:
            slot, item = self.free.pop(), todo.popleft()
            if item.start:
                self.pool.start(slot, item.task_id, item.seed, [s.action for s in item.start])
            else:
                self.pool.reset(slot, item.task_id, item.seed)
            starting[slot] = (item, time.monotonic())
        if not starting:
            return
        for slot, reply in self.pool.collect().items():
            item, started = starting[slot]
            if not reply.ok:
                ep = Episode(self.env, item, "", "", {}, started, steps=list(item.start), reset_s=reply.seconds)
                self._finish(slot, ep, "env_error", f"reset failed: {reply.error}")
                continue
            obs, info, *rest = reply.value
            ep = Episode.begin(self.env, item, obs, info, reply.seconds)
            ep.started = started
            if rest and rest[0]:  # the replayed prefix already ended the episode
                self._finish(slot, ep, termination_of(info))
                continue
            self.active[slot] = ep
            try:
                self.agent.reset(ep.prefix())
            except AgentError as e:
                self._finish(slot, ep, "agent_error", f"{type(e).__name__}: {e}")

    def _step_all(self) -> None:
        slots = sorted(self.active)
        prefixes = [self.active[s].prefix() for s in slots]
        start = time.perf_counter()
        try:
            candidates = self.agent.act(prefixes, 1)
            if len(candidates) != len(prefixes) or any(not c for c in candidates):
                raise AgentError(f"agent returned candidates for {len(candidates)} of {len(prefixes)} prefixes "
                                 "(or an empty list for some)")
        except AgentError as e:
            message = f"{type(e).__name__}: {e}"
            tripped = self.breaker.failed(message)
            for s in slots:
                self._finish(s, self.active[s], "agent_error", message)
            if tripped is not None:
                raise AgentFailing(tripped) from None
            return
        self.breaker.succeeded()
        self.steps += len(slots)
        self.bar.steps_taken(self.steps)
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
            result = reply.value  # a StepResult
            ep.record(chosen[s], result)
            if result.done:
                self._finish(s, ep, termination_of(ep.info))

    def _finish(self, slot: int, ep: Episode, termination: str, error: str | None = None) -> None:
        self.active.pop(slot, None)
        self.pool.release(slot)
        self.free.append(slot)
        traj = ep.finish(termination, split=self.split, agent=self.agent_name, run_seed=self.run_seed, error=error)
        self.store.append(traj)
        self.bar.episode_done(traj)

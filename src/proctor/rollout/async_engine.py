"""The async rollout loop: one thread per env slot, each running its own episodes start to end.

For a served policy (an HTTP model server) the lockstep loop (`proctor.rollout.engine`) starves the
server: every step waits for the slowest of the batch's requests, then for the envs, so the server sees a
burst of B requests and then nothing. Here `concurrency` runner threads each take the next work item,
reset its env, and loop `agent.act([prefix], 1)` → step → ... until the episode ends, then take the next
item at once; so up to `concurrency` requests are in flight at all times and no episode waits for another.

- Envs: `SlotEnvs` (one slot per runner; in-process, or on worker processes with the hung/dead-env
  guarantees of the process pool). A runner only ever touches its own slot.
- Results: runners hand finished trajectories to the calling thread, which alone appends them to the store
  and advances the progress bar (same resume semantics as lockstep).
- Errors: an `AgentError` ends only its own episode (`agent_error`); an env error only its own
  (`env_error`). When the run's first `max_agent_failures` agent calls all fail, the runners stop taking
  work, the finished episodes are stored, and `tripped` says why (`rollout` raises `AgentFailing`). Any
  other exception (in a runner, or Ctrl-C) stops the run the same way and is re-raised.
- Determinism: an episode's seed comes from its work item, so for an agent whose action depends only on the
  prefix (and the env on its seed) the stored episodes equal lockstep's, whatever the completion order.

The agent is called from `concurrency` threads at once: it must be thread-safe (served agents are: they
only send HTTP requests).
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
import time
from collections import deque
from dataclasses import dataclass

from proctor.agents.base import Agent, AgentError, Candidate
from proctor.episode import Episode, WorkItem, termination_of
from proctor.rollout.breaker import CircuitBreaker
from proctor.rollout.progress import RolloutProgress
from proctor.rollout.slot_envs import SlotEnvs
from proctor.store import TrajectoryStore
from proctor.trajectory import Termination, Trajectory

log = logging.getLogger(__name__)

#: how often the calling thread wakes while waiting for episodes (so Ctrl-C is seen promptly)
POLL_S = 0.2


@dataclass
class _Crashed:
    """A runner thread died of an unexpected exception (re-raised in the calling thread)."""

    error: BaseException


class _SlotDone:
    """A runner thread has no more work."""


class AsyncRunner:
    """Runs the work items over `envs.n_slots` runner threads (see module docstring)."""

    def __init__(self, env: str, agent: Agent, store: TrajectoryStore, split: str, run_seed: int,
                 max_agent_failures: int | None):
        self.env = env
        self.agent = agent
        self.agent_name = agent.describe()
        self.store = store
        self.split = split
        self.run_seed = run_seed
        self.breaker = CircuitBreaker(max_agent_failures, store.root)
        self.steps = itertools.count(1)  # agent steps taken (the runners draw from it; the progress line shows it)
        self.steps_taken = 0
        self._stop = threading.Event()
        self._results: queue.Queue[Trajectory | _Crashed | type[_SlotDone]] = queue.Queue()

    @property
    def tripped(self) -> str | None:
        """Why the circuit breaker stopped the run (None while it has not); the caller raises `AgentFailing`."""
        return self.breaker.tripped

    def run(self, envs: SlotEnvs, todo: deque[WorkItem], bar: RolloutProgress) -> None:
        """Run until `todo` is empty or the run is stopped (then `tripped` says why, when the breaker did)."""
        self.envs, self.todo = envs, todo
        threads = [threading.Thread(target=self._slot_loop, args=(slot,), name=f"proctor-rollout-{slot}",
                                    daemon=True) for slot in range(envs.n_slots)]
        for t in threads:
            t.start()
        crash: BaseException | None = None
        running = len(threads)
        try:
            while running:
                bar.steps_taken(self.steps_taken)
                try:
                    result = self._results.get(timeout=POLL_S)
                except queue.Empty:
                    continue
                if result is _SlotDone:
                    running -= 1
                elif isinstance(result, _Crashed):
                    crash = crash or result.error
                    self._stop.set()
                else:
                    self.store.append(result)
                    bar.episode_done(result)
        except BaseException:  # Ctrl-C, or a store write failing: stop the runners, keep what is finished
            self._stop.set()
            self._drain(threads, bar)
            raise
        if crash is not None:
            raise crash

    def _drain(self, threads: list[threading.Thread], bar: RolloutProgress) -> None:
        """After a stop: wait for the runners (they finish their agent call or env op in flight; a second
        Ctrl-C abandons them), and store the episodes that finished meanwhile."""
        busy = [t for t in threads if t.is_alive()]
        if busy:
            log.warning("stopping: waiting for the agent calls and env ops in flight in %d episode slots "
                        "(Ctrl-C again to abandon them)", len(busy))
        for t in busy:
            t.join()
        while True:
            try:
                result = self._results.get_nowait()
            except queue.Empty:
                return
            if isinstance(result, Trajectory):
                try:
                    self.store.append(result)
                except Exception:  # the run is failing already; that error is raised
                    log.exception("could not store a finished episode while stopping")
                    return
                bar.episode_done(result)

    # -- in the runner threads ------------------------------------------------------------------------
    def _slot_loop(self, slot: int) -> None:
        try:
            while not self._stop.is_set():
                try:
                    item = self.todo.popleft()  # atomic: each item goes to exactly one runner
                except IndexError:
                    break
                traj = self._episode(slot, item)
                if traj is not None:
                    self._results.put(traj)
        except BaseException as e:  # noqa: BLE001 - handed to the calling thread, which re-raises it
            self._stop.set()
            self._results.put(_Crashed(e))
        finally:
            self._results.put(_SlotDone)

    def _episode(self, slot: int, item: WorkItem) -> Trajectory | None:
        """Run one work item to its end on `slot`; None when the run was stopped first (not stored)."""
        started = time.monotonic()
        if item.start:
            reply = self.envs.start(slot, item.task_id, item.seed, [s.action for s in item.start])
        else:
            reply = self.envs.reset(slot, item.task_id, item.seed)
        if not reply.ok:
            ep = Episode(self.env, item, "", "", {}, started, steps=list(item.start), reset_s=reply.seconds)
            return self._finish(slot, ep, "env_error", f"reset failed: {reply.error}")
        obs, info, *rest = reply.value
        ep = Episode.begin(self.env, item, obs, info, reply.seconds)
        ep.started = started
        if rest and rest[0]:  # the replayed prefix already ended the episode
            return self._finish(slot, ep, termination_of(info))
        try:
            self.agent.reset(ep.prefix())
        except AgentError as e:
            return self._finish(slot, ep, "agent_error", f"{type(e).__name__}: {e}")
        while True:
            if self._stop.is_set():
                self.envs.release(slot)
                return None
            start = time.perf_counter()
            try:
                candidate = self._act(ep)
            except AgentError as e:
                message = f"{type(e).__name__}: {e}"
                self._agent_failed(message)
                return self._finish(slot, ep, "agent_error", message)
            ep.agent_s += time.perf_counter() - start
            reply = self.envs.step(slot, candidate.action)
            ep.env_s += reply.seconds
            if not reply.ok:
                return self._finish(slot, ep, "env_error", reply.error)
            result = reply.value  # a StepResult
            ep.record(candidate, result)
            if result.done:
                return self._finish(slot, ep, termination_of(ep.info))

    def _act(self, ep: Episode) -> Candidate:
        candidates = self.agent.act([ep.prefix()], 1)
        if len(candidates) != 1 or not candidates[0]:
            raise AgentError(f"agent returned candidates for {len(candidates)} of 1 prefix (or an empty list)")
        self.breaker.succeeded()
        self.steps_taken = next(self.steps)  # itertools.count is atomic under the GIL
        return candidates[0][0]

    def _agent_failed(self, message: str) -> None:
        if self.breaker.failed(message) is not None:
            self._stop.set()

    def _finish(self, slot: int, ep: Episode, termination: Termination, error: str | None = None) -> Trajectory:
        self.envs.release(slot)
        return ep.finish(termination, split=self.split, agent=self.agent_name, run_seed=self.run_seed, error=error)


__all__ = ["AsyncRunner"]

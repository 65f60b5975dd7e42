"""Env pools: `B` env slots that the rollout engine resets and steps, in-process or hosted by workers (the workers
are `proctor.rollout.worker_process` and `.ray_backend`; `proctor.rollout.backends.make_pool` picks one for a run).

The engine queues `reset`/`step` ops for many slots, then `collect()`s one result per op. A failing env
never takes others down with it:

- an env that raises gives an error result for its slot (the worker stays up, the env is rebuilt on the
  next reset);
- with workers, an op that does not answer within `step_timeout` (a hung env), or a worker process that
  dies, gives an error result for the slot it was running; the worker is killed and replaced, and the
  other envs it hosted are re-created on the replacement by exact replay of their actions
  (`TextEnv.replay`), so their episodes go on.

Slots are spread over `workers` processes (slot % workers), each stepping its envs in order; the
processes run in parallel with each other and with the parent.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections import deque
from dataclasses import dataclass, field
from typing import Self

from proctor.envs.base import TextEnv
from proctor.envs.registry import EnvSpec
from proctor.renames import moved_names
from proctor.rollout.env_ops import EnvOp, Reply, close_envs, env_module, run_op


class EnvPool(ABC):
    """`n_slots` env slots; queue ops with `reset`/`step`, then `collect()` a `Reply` per queued op."""

    def __init__(self, spec: EnvSpec, n_slots: int):
        if n_slots < 1:
            raise ValueError(f"an env pool needs at least one slot, got {n_slots}")
        self.spec = spec
        self.n_slots = n_slots

    @abstractmethod
    def reset(self, slot: int, task_id: str, seed: int) -> None: ...

    @abstractmethod
    def step(self, slot: int, action: str) -> None: ...

    @abstractmethod
    def start(self, slot: int, task_id: str, seed: int, actions: list[str]) -> None:
        """Queue: reset `task_id` and replay `actions`; the reply is `(observation, info, done)` after them."""

    @abstractmethod
    def fork(self, source: int, slot: int) -> None:
        """Queue: make `slot` an independent copy of `source`'s live episode (clone, or exact replay of its
        actions when the env cannot be copied or lives in another worker); the reply's value is None."""

    def release(self, slot: int) -> None:
        """The slot's episode is over (its env may be reused by the next reset)."""

    @abstractmethod
    def collect(self) -> dict[int, Reply]:
        """Run every queued op; one reply per slot that had an op."""

    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class InProcessEnvPool(EnvPool):
    """Envs in this process, stepped one after another (for fast pure-Python envs; no timeouts)."""

    def __init__(self, spec: EnvSpec, n_slots: int):
        super().__init__(spec, n_slots)
        self._envs: dict[int, TextEnv] = {}
        self._queue: list[EnvOp] = []

    def reset(self, slot: int, task_id: str, seed: int) -> None:
        self._queue.append(EnvOp(slot, "reset", (task_id, seed)))

    def step(self, slot: int, action: str) -> None:
        self._queue.append(EnvOp(slot, "step", (action,)))

    def start(self, slot: int, task_id: str, seed: int, actions: list[str]) -> None:
        self._queue.append(EnvOp(slot, "start", (task_id, seed, list(actions))))

    def fork(self, source: int, slot: int) -> None:
        self._queue.append(EnvOp(slot, "fork", (source,)))

    def collect(self) -> dict[int, Reply]:
        ops, self._queue = self._queue, []
        return {op.slot: run_op(self._envs, self.spec, op) for op in ops}

    def close(self) -> None:
        close_envs(self._envs)


@dataclass
class _Episode:
    """What a slot's env has applied so far (enough to re-create it by replay)."""

    task_id: str
    seed: int
    actions: list[str] = field(default_factory=list)


class HostedEnvPool(EnvPool):
    """Envs hosted by `workers` remote workers (processes, Ray actors), with timeouts and replacement.

    Subclasses provide the transport: `_start`, `_send`, `_receive`, `_kill`.
    """

    def __init__(self, spec: EnvSpec, n_slots: int, workers: int, step_timeout: float | None):
        super().__init__(spec, n_slots)
        if workers < 1:
            raise ValueError(f"a hosted env pool needs at least one worker, got {workers}")
        self.n_workers = min(workers, n_slots)
        self.step_timeout = step_timeout
        self.module = env_module(spec)
        self.replacements = 0
        self._episodes: dict[int, _Episode] = {}
        self._broken: dict[int, str] = {}
        self._forking: dict[int, _Episode | None] = {}
        self._outbox: dict[int, list[EnvOp]] = {w: [] for w in range(self.n_workers)}

    def worker_of(self, slot: int) -> int:
        return slot % self.n_workers

    # -- transport ------------------------------------------------------------------------------
    @abstractmethod
    def _start(self, workers: list[int]) -> None:
        """Start these workers and wait until each is ready."""

    @abstractmethod
    def _send(self, worker: int, ops: list[EnvOp]) -> None: ...

    @abstractmethod
    def _receive(self, workers: list[int], timeout: float) -> list[tuple[int, Reply | str]]:
        """Replies that arrived within `timeout`, as (worker, reply); (worker, message) for a dead one."""

    @abstractmethod
    def _kill(self, worker: int) -> None: ...

    # -- ops ------------------------------------------------------------------------------------
    def reset(self, slot: int, task_id: str, seed: int) -> None:
        self._outbox[self.worker_of(slot)].append(EnvOp(slot, "reset", (task_id, seed), self.step_timeout))

    def step(self, slot: int, action: str) -> None:
        self._outbox[self.worker_of(slot)].append(EnvOp(slot, "step", (action,), self.step_timeout))

    def start(self, slot: int, task_id: str, seed: int, actions: list[str]) -> None:
        timeout = None if self.step_timeout is None else self.step_timeout * (len(actions) + 1)
        self._outbox[self.worker_of(slot)].append(EnvOp(slot, "start", (task_id, seed, list(actions)), timeout))

    def fork(self, source: int, slot: int) -> None:
        """Same worker: clone there; another worker: replay the source's recorded actions on it. Forks are
        queued after the ops already queued, so fork after `collect()` has answered the source's step."""
        ep = self._episodes.get(source)
        if ep is None:
            raise RuntimeError(f"slot {source} has no live episode to fork")
        if self.worker_of(source) == self.worker_of(slot):
            self._outbox[self.worker_of(slot)].append(EnvOp(slot, "fork", (source,), self.step_timeout))
            self._forking[slot] = ep
        else:
            self.start(slot, ep.task_id, ep.seed, ep.actions)
            self._forking[slot] = None

    def release(self, slot: int) -> None:
        self._episodes.pop(slot, None)

    def collect(self) -> dict[int, Reply]:
        replies: dict[int, Reply] = {}
        pending: dict[int, deque[EnvOp]] = {}
        since: dict[int, float] = {}
        for w, ops in self._outbox.items():
            ready = []
            for op in ops:
                if op.slot in self._broken:  # lost with a dead worker and could not be re-created
                    replies[op.slot] = Reply(op.slot, False, self._broken.pop(op.slot))
                else:
                    ready.append(op)
            self._outbox[w] = []
            if ready:
                self._send(w, ready)
                pending[w], since[w] = deque(ready), time.monotonic()
        while any(pending.values()):
            active = [w for w, q in pending.items() if q]
            deadlines = {w: since[w] + (pending[w][0].timeout or float("inf")) for w in active}
            wait_s = max(0.0, min(deadlines.values()) - time.monotonic())
            for w, reply in self._receive(active, min(wait_s, 3600.0)):
                if isinstance(reply, str):
                    self._fail_worker(w, pending[w], replies, reply)
                else:
                    self._apply(pending[w].popleft(), reply, replies)
                since[w] = time.monotonic()
            now = time.monotonic()
            for w in active:
                if pending[w] and now > since[w] + (pending[w][0].timeout or float("inf")):
                    timeout = pending[w][0].timeout
                    self._fail_worker(w, pending[w], replies, f"env op timed out after {timeout:g} s (hung env)")
                    since[w] = time.monotonic()
        return replies

    def _apply(self, op: EnvOp, reply: Reply, replies: dict[int, Reply]) -> None:
        if reply.slot != op.slot:
            raise RuntimeError(f"env worker answered slot {reply.slot} for an op on slot {op.slot}")
        if not reply.ok:
            self._episodes.pop(op.slot, None)
            if op.kind == "replay":
                self._broken[op.slot] = f"env lost with its worker and could not be re-created: {reply.error}"
                return
        elif op.kind == "reset":
            self._episodes[op.slot] = _Episode(op.args[0], op.args[1])
        elif op.kind == "start":
            self._episodes[op.slot] = _Episode(op.args[0], op.args[1], list(op.args[2]))
            if self._forking.pop(op.slot, "") is None:
                reply = Reply(reply.slot, True, None, reply.seconds)
        elif op.kind == "fork":
            ep = self._forking.pop(op.slot)
            self._episodes[op.slot] = _Episode(ep.task_id, ep.seed, list(ep.actions))
        elif op.kind == "step":
            self._episodes[op.slot].actions.append(op.args[0])
        if op.kind != "replay":
            replies[op.slot] = reply

    def _fail_worker(self, w: int, queue: deque[EnvOp], replies: dict[int, Reply], reason: str) -> None:
        """The op at the head of `queue` killed or hung worker `w`: fail it, replace the worker, re-create
        the worker's other envs by replay and re-send its unanswered ops."""
        culprit = queue.popleft()
        where = self._episodes.get(culprit.slot)
        context = f" (task {where.task_id!r}, after {len(where.actions)} actions)" if where else ""
        if culprit.kind == "replay":
            self._broken[culprit.slot] = f"env lost with its worker and could not be re-created: {reason}"
        else:
            replies[culprit.slot] = Reply(culprit.slot, False, f"{reason}{context}: {culprit.kind}{culprit.args!r}")
        self._episodes.pop(culprit.slot, None)
        self._kill(w)
        self._start([w])
        self.replacements += 1
        unanswered = [op for op in queue if op.kind != "replay"]
        resetting = {op.slot for op in unanswered if op.kind == "reset"}
        replays = [
            EnvOp(slot, "replay", (ep.task_id, ep.seed, list(ep.actions)),
               None if self.step_timeout is None else self.step_timeout * (len(ep.actions) + 1))
            for slot, ep in self._episodes.items()
            if self.worker_of(slot) == w and slot not in resetting
        ]
        queue.clear()
        queue.extend(replays + unanswered)
        if queue:
            self._send(w, list(queue))


__getattr__ = moved_names(__name__, {"make_pool": "proctor.rollout.backends:make_pool"})

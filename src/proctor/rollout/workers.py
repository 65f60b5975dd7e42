"""Env pools: `B` env slots that the rollout engine resets and steps, in-process or in worker processes.

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

import importlib
import multiprocessing as mp
import os
import time
import traceback
from abc import ABC, abstractmethod
from collections import deque
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any, Self

from proctor.envs.base import TextEnv
from proctor.envs.registry import EnvSpec

#: how long a new worker may take to start (import proctor and the env's module) before it is declared dead
STARTUP_TIMEOUT_S = 180.0
_MAX_ERROR_CHARS = 4000


@dataclass
class EnvOp:
    """One request for one slot: `reset(task_id, seed)`, `step(action)`, `start(task_id, seed, actions)`
    (reset and replay an action prefix; replies `(observation, info, done)`, info with the reset's task keys), `fork(source_slot)` (this slot
    becomes an independent copy of another slot's live env, same worker), or the pool-internal
    `replay(task_id, seed, actions)` that re-creates envs on a replaced worker."""

    slot: int
    kind: str
    args: tuple
    timeout: float | None = None


@dataclass
class Reply:
    """The answer to an `EnvOp`: the env's return value, or an error message; `seconds` spent in the env."""

    slot: int
    ok: bool
    value: Any
    seconds: float = 0.0

    @property
    def error(self) -> str:
        return "" if self.ok else str(self.value)


def env_module(spec: EnvSpec) -> str:
    """The module that defines (and registers) the env, imported by workers before `spec.make()`."""
    from proctor.envs.registry import entries

    entry = entries().get(spec.name)
    if entry is None:
        raise KeyError(f"unknown environment {spec.name!r}; known: {', '.join(entries())}")
    module = entry.target.__module__ if callable(entry.target) else entry.target.partition(":")[0]
    if module == "__main__":
        raise ValueError(
            f"environment {spec.name!r} is defined in __main__, which worker processes cannot import; "
            "move it to a module or use workers=0"
        )
    return module


def run_op(envs: dict[int, TextEnv], spec: EnvSpec, op: EnvOp) -> Reply:
    """Execute one op on the slot's env (built from `spec` on first use); exceptions become error replies."""
    start = time.perf_counter()
    try:
        if op.kind in ("reset", "replay", "start"):
            env = envs.get(op.slot)
            if env is None:
                env = envs[op.slot] = spec.make()
            if op.kind == "reset":
                value = env.reset(*op.args)
            else:
                obs, info = env.replay(*op.args)
                value = (obs, {**env.task_info, **info}, env.done) if op.kind == "start" else (obs, info)
        elif op.kind == "fork":
            source = envs.get(op.args[0])
            if source is None:
                raise RuntimeError(f"slot {op.args[0]} has no env to fork")
            twin = source.clone()
            old = envs.pop(op.slot, None)
            if old is not None:
                old.close()
            envs[op.slot] = twin
            value = None
        elif op.kind == "step":
            if op.slot not in envs:
                raise RuntimeError(f"slot {op.slot} has no env (step before reset)")
            value = envs[op.slot].step(*op.args)
        else:
            raise ValueError(f"unknown env op {op.kind!r}")
        return Reply(op.slot, True, value, time.perf_counter() - start)
    except Exception as e:  # noqa: BLE001 - the env's failure is the result; the caller records it
        broken = envs.pop(op.slot, None)
        if broken is not None:
            try:
                broken.close()
            except Exception:  # noqa: BLE001, S110 - closing an env that already failed; its error is reported
                pass
        message = f"{type(e).__name__}: {e}\n{traceback.format_exc()}"[-_MAX_ERROR_CHARS:]
        return Reply(op.slot, False, message, time.perf_counter() - start)


def close_envs(envs: dict[int, TextEnv]) -> None:
    for env in envs.values():
        try:
            env.close()
        except Exception:  # noqa: BLE001, S110 - best effort at shutdown
            pass
    envs.clear()


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


#: how often a worker checks that the process that started it is still alive
PARENT_CHECK_S = 0.5


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def die_with_parent(parent_pid: int, kernel_signal: bool) -> None:
    """End this worker process as soon as the pool's process `parent_pid` is gone, even mid env call.

    Two guards: with `kernel_signal` (the pool was started from the main thread; Linux), the kernel sends
    SIGKILL when the parent dies (`prctl(PR_SET_PDEATHSIG)`; see prctl(2): it fires when the *thread* that
    started the child exits, hence only from the main thread); and a daemon thread checks every
    `PARENT_CHECK_S` seconds that the worker was not re-parented and `parent_pid` exists, else exits the
    process (`os._exit`): this also covers other platforms and pools started from other threads.
    """
    import sys
    import threading

    direct = os.getppid() == parent_pid  # spawn/fork; a forkserver's children have another parent
    if kernel_signal and direct and sys.platform.startswith("linux"):
        import ctypes
        import signal

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)

    def gone() -> bool:
        return (direct and os.getppid() != parent_pid) or not _alive(parent_pid)

    if gone():
        os._exit(1)  # the parent died before the guards were set

    def watch() -> None:
        while not gone():
            time.sleep(PARENT_CHECK_S)
        os._exit(1)

    threading.Thread(target=watch, name="proctor-parent-watchdog", daemon=True).start()


def _worker_main(conn: Connection, spec: EnvSpec, module: str, parent_pid: int | None = None,
                 kernel_signal: bool = False) -> None:
    """A worker process: host envs by slot and answer batches of ops, one reply per op, in order; it dies
    with its parent (`die_with_parent`)."""
    if parent_pid is not None:
        die_with_parent(parent_pid, kernel_signal)
    importlib.import_module(module)
    envs: dict[int, TextEnv] = {}
    conn.send(("ready", os.getpid()))
    try:
        while True:
            try:
                ops = conn.recv()
            except EOFError:
                break
            if ops is None:
                break
            for op in ops:
                conn.send(run_op(envs, spec, op))
    finally:
        close_envs(envs)


class ProcessEnvPool(HostedEnvPool):
    """Envs in `workers` worker processes (multiprocessing, `spawn` by default: safe with threads/CUDA)."""

    def __init__(self, spec: EnvSpec, n_slots: int, workers: int, step_timeout: float | None = 60.0,
                 start_method: str = "spawn"):
        super().__init__(spec, n_slots, workers, step_timeout)
        self._ctx = mp.get_context(start_method)
        self._procs: dict[int, Any] = {}
        self._conns: dict[int, Connection] = {}
        self._start(list(range(self.n_workers)))

    def _start(self, workers: list[int]) -> None:
        import threading

        for w in workers:
            parent, child = self._ctx.Pipe(duplex=True)
            from_main = threading.current_thread() is threading.main_thread()
            proc = self._ctx.Process(target=_worker_main,
                                     args=(child, self.spec, self.module, os.getpid(), from_main),
                                     name=f"proctor-env-{w}", daemon=True)
            proc.start()
            child.close()
            self._procs[w], self._conns[w] = proc, parent
        for w in workers:
            conn = self._conns[w]
            if not conn.poll(STARTUP_TIMEOUT_S):
                raise RuntimeError(f"env worker {w} did not start within {STARTUP_TIMEOUT_S:g} s")
            try:
                conn.recv()
            except EOFError:
                raise RuntimeError(
                    f"env worker {w} exited while starting (exit code {self._exitcode(w)}); "
                    f"can {self.module!r} be imported in a fresh process?"
                ) from None

    def _exitcode(self, w: int) -> int | None:
        self._procs[w].join(timeout=5)
        return self._procs[w].exitcode

    def _send(self, worker: int, ops: list[EnvOp]) -> None:
        try:
            self._conns[worker].send(ops)
        except (BrokenPipeError, OSError):
            pass  # the worker is dead; `_receive` reports it

    def _receive(self, workers: list[int], timeout: float) -> list[tuple[int, Reply | str]]:
        by_conn = {self._conns[w]: w for w in workers}
        out: list[tuple[int, Reply | str]] = []
        for conn in wait(list(by_conn), timeout):
            w = by_conn[conn]
            try:
                while True:
                    out.append((w, conn.recv()))
                    if not conn.poll(0):
                        break
            except (EOFError, OSError):
                out.append((w, f"env worker process died (exit code {self._exitcode(w)})"))
        return out

    def _kill(self, worker: int) -> None:
        proc = self._procs.pop(worker)
        proc.kill()
        proc.join(timeout=10)
        self._conns.pop(worker).close()

    def close(self) -> None:
        for w in list(self._procs):
            try:
                self._conns[w].send(None)
            except (BrokenPipeError, OSError):
                pass
        for w in list(self._procs):
            proc = self._procs.pop(w)
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=5)
            self._conns.pop(w).close()


__all__ = [
    "EnvOp",
    "EnvPool",
    "HostedEnvPool",
    "InProcessEnvPool",
    "ProcessEnvPool",
    "Reply",
    "env_module",
    "run_op",
]

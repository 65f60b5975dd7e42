"""Worker processes that host envs for a `ProcessEnvPool`: starting them, answering ops, replacing one that
hangs or dies, and making each die with the process that started it.

Ctrl-C at a terminal reaches every process of the foreground group: the workers ignore it (each is started
with SIGINT blocked, which its new interpreter keeps until the worker sets it to be ignored), so only the parent
stops, says what it kept, and shuts them down; no worker prints a traceback.
"""

from __future__ import annotations

import importlib
import multiprocessing as mp
import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing.connection import Connection, wait
from typing import Any

from proctor.envs.base import TextEnv
from proctor.envs.registry import EnvSpec
from proctor.rollout.env_ops import STARTUP_TIMEOUT_S, EnvOp, Reply, close_envs, run_op
from proctor.rollout.pools import HostedEnvPool

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

    direct = os.getppid() == parent_pid  # spawn/fork; a forkserver's children have another parent
    if kernel_signal and direct and sys.platform.startswith("linux"):
        import ctypes

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


@contextmanager
def sigint_blocked() -> Iterator[None]:
    """SIGINT blocked in the calling thread meanwhile: a process started meanwhile inherits the block from its
    first instruction (through exec too); this process gets a Ctrl-C that came meanwhile when it ends."""
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def _worker_main(conn: Connection, spec: EnvSpec, module: str, parent_pid: int | None = None,
                 kernel_signal: bool = False) -> None:
    """A worker process: host envs by slot and answer batches of ops, one reply per op, in order; it ignores
    Ctrl-C (the parent shuts it down) and dies with its parent (`die_with_parent`)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # started with it blocked (`sigint_blocked`)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
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
        for w in workers:
            parent, child = self._ctx.Pipe(duplex=True)
            from_main = threading.current_thread() is threading.main_thread()
            proc = self._ctx.Process(target=_worker_main,
                                     args=(child, self.spec, self.module, os.getpid(), from_main),
                                     name=f"proctor-env-{w}", daemon=True)
            with sigint_blocked():
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

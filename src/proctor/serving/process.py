"""`ServerProcess`: a server run as a managed subprocess (the loop's vLLM server, its `proctor prm serve`).

It runs in its own process group with its output in a log file; `start` returns once a health URL answers 200
and fails with the log's last lines if the process exits first or does not answer within the timeout; `stop`
ends the whole group (SIGTERM, then SIGKILL), and is also called at interpreter exit. On Linux the server also gets
SIGKILL when the process that started it dies (`PR_SET_PDEATHSIG`), so no run leaves an orphan server.
"""

from __future__ import annotations

import atexit
import ctypes
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import httpx

log = logging.getLogger(__name__)


class ServerExited(RuntimeError):
    """A server a run manages exited by itself while the run needed it (the message is one line)."""


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the parent (the thread that started it) dies (Linux prctl(2))."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG = 1


class ServerProcess:
    """One server subprocess (see module docstring); `what` names it in messages, `error` is what it raises."""

    def __init__(self, what: str, log_file: Path, error: type[Exception] = RuntimeError):
        self.what, self.log_file, self.error = what, Path(log_file), error
        self._proc: subprocess.Popen | None = None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        """The server's process id (None when it is not running)."""
        return self._proc.pid if self._proc is not None and self.running else None

    def exited(self) -> int | None:
        """The exit code of a server that ended by itself (killed, crashed) since it started; None while it runs,
        and after `stop`."""
        return self._proc.poll() if self._proc is not None else None

    def start(self, command: list[str], env: Mapping[str, str], ready_url: str, timeout: float,
              headers: Mapping[str, str] | None = None) -> None:
        """Start `command` and wait until `ready_url` answers 200 (at most `timeout` s)."""
        if self._proc is not None:
            raise self.error(f"{self.what} is already running")
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        with self.log_file.open("ab") as out:
            out.write(f"$ {' '.join(command)}\n".encode())
            out.flush()
            self._proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=dict(env),
                                          start_new_session=True,  # stop() ends its group
                                          preexec_fn=_die_with_parent)  # noqa: PLW1509 - one prctl call, no locks
        atexit.register(self.stop)
        started = time.monotonic()
        while True:
            if self._proc.poll() is not None:
                code, self._proc = self._proc.returncode, None
                atexit.unregister(self.stop)
                raise self.error(f"{self.what} exited with code {code} during start-up; last lines of "
                                 f"{self.log_file}:\n{self.log_tail()}")
            try:
                if httpx.get(ready_url, headers=dict(headers or {}), timeout=5).status_code == 200:
                    log.info("%s ready after %.0f s", self.what, time.monotonic() - started)
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > started + timeout:
                self.stop()
                raise self.error(f"{self.what} did not answer within {timeout:.0f} s; last lines of "
                                 f"{self.log_file}:\n{self.log_tail()}")
            time.sleep(1.0)

    def stop(self, timeout: float = 30.0) -> None:
        """End the server's process group: SIGTERM, then SIGKILL after `timeout` s. Idempotent."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        atexit.unregister(self.stop)
        for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(wait)
                break
            except subprocess.TimeoutExpired:
                continue

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

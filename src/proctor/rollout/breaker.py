"""`CircuitBreaker`: stop a rollout whose agent fails on every one of its first calls (a server that is down, a
model that does not load), instead of recording an `agent_error` for every episode. Thread-safe: the async
engine's runners share one."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

log = logging.getLogger("proctor.rollout.engine")


class CircuitBreaker:
    """Counts the agent's calls; trips when its first `limit` calls all failed (None: never)."""

    def __init__(self, limit: int | None, store_root: Path):
        self.limit, self.store_root = limit, store_root
        self.calls_ok = 0
        self.failures: list[str] = []
        #: why the breaker stopped the run (None while it has not)
        self.tripped: str | None = None
        self._lock = threading.Lock()

    def succeeded(self) -> None:
        with self._lock:
            self.calls_ok += 1

    def failed(self, message: str) -> str | None:
        """Record a failed call (the first is logged); the reason to stop the run when this trips the breaker."""
        with self._lock:
            if not self.failures:
                log.error("agent failed: %s", message)
            self.failures.append(message)
            if (self.tripped is None and self.limit is not None and self.calls_ok == 0
                    and len(self.failures) >= self.limit):
                self.tripped = (f"the agent failed on all of its first {len(self.failures)} calls; stopped "
                                f"(finished episodes are kept in {self.store_root}). First error: {self.failures[0]}")
                return self.tripped
            return None

"""`GroupBatcher`: candidate-action groups of concurrent requests scored in one batched call.

`prm serve` answers many clients at once (a best-of-N or beam search with B envs sends B states at a time,
and several searches may share one server). Each request's (state, actions) groups are queued; one scoring
thread takes every group waiting (up to `max_groups`, after waiting `window_s` for more to arrive) and scores
them with one `score_action_groups` call, so the model runs full batches whatever the clients' sizes. When a
batch fails (an unscorable state), each request of it is scored alone, so one bad request fails only itself.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from queue import Empty, Queue
from typing import Any

from proctor.prompts.turns import Prefix


@dataclass
class _Job:
    prefixes: list[Prefix]
    actions: list[list[str]]
    done: Future = field(default_factory=Future)


class GroupBatcher:
    """Scores the queued groups of concurrent requests together (see module docstring); thread-safe."""

    def __init__(self, scorer: Any, max_groups: int = 64, window_s: float = 0.005):
        if max_groups < 1 or window_s < 0:
            raise ValueError(f"need max_groups >= 1 and window_s >= 0 (got {max_groups}, {window_s})")
        self.scorer, self.max_groups, self.window_s = scorer, max_groups, window_s
        self._queue: Queue[_Job] = Queue()
        self._thread = threading.Thread(target=self._loop, name="prm-batcher", daemon=True)
        self._thread.start()
        #: how many requests each scoring call served (the last 1000), for tests and monitoring
        self.batch_sizes: list[int] = []

    def score(self, prefixes: Sequence[Prefix], actions: Sequence[Sequence[str]],
              timeout: float | None = None) -> list[list[float]]:
        """The score of every action of every state; blocks until its batch is scored."""
        job = _Job(list(prefixes), [list(a) for a in actions])
        self._queue.put(job)
        return job.done.result(timeout)

    def _loop(self) -> None:
        while True:
            jobs = [self._queue.get()]
            deadline = time.monotonic() + self.window_s
            while sum(len(j.prefixes) for j in jobs) < self.max_groups:
                try:
                    jobs.append(self._queue.get(timeout=max(0.0, deadline - time.monotonic())))
                except Empty:
                    break
            self.batch_sizes = (self.batch_sizes + [len(jobs)])[-1000:]
            self._run(jobs)

    def _run(self, jobs: list[_Job]) -> None:
        try:
            scores = self.scorer.score_action_groups([p for j in jobs for p in j.prefixes],
                                                     [a for j in jobs for a in j.actions])
        except Exception as e:  # noqa: BLE001 - isolated below: each request alone
            if len(jobs) == 1:
                jobs[0].done.set_exception(e)
                return
            for job in jobs:
                self._run([job])
            return
        k = 0
        for job in jobs:
            job.done.set_result(scores[k:k + len(job.prefixes)])
            k += len(job.prefixes)

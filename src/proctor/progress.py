"""Progress for every long stage: a rich bar on a terminal, and a plain line every few seconds otherwise
(CI logs, `nohup`, notebooks), so a long run is never silent.

    with StageProgress("rollout", total=200) as bar:
        for ...:
            bar.advance(1, stats="success 41% of 73")
"""

from __future__ import annotations

import sys
import time
from typing import IO, Self

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

#: seconds between plain progress lines when the output is not a terminal
PLAIN_INTERVAL_S = 5.0


class StageProgress:
    """Done/total, rate and a free-form stats text for one stage; `enabled=False` is silent."""

    def __init__(self, label: str, total: int | None, completed: int = 0, enabled: bool = True,
                 console: Console | None = None, unit: str = "", stream: IO[str] | None = None,
                 interval_s: float = PLAIN_INTERVAL_S):
        self.label, self.total, self.completed, self.unit = label, total, completed, unit
        self.enabled = enabled
        self.stats = ""
        self.interval_s = interval_s
        self._stream = stream or sys.stderr
        self._console = console or Console(file=self._stream)
        self._fancy = enabled and self._console.is_terminal
        self._start = time.monotonic()
        self._first = completed
        self._last_line = 0.0
        self._progress: Progress | None = None
        if self._fancy:
            self._progress = Progress(TextColumn(f"[bold]{label}[/bold]"), BarColumn(), MofNCompleteColumn(),
                                      TextColumn("{task.fields[stats]}"), TimeElapsedColumn(),
                                      TimeRemainingColumn(), console=self._console)
            self._task = self._progress.add_task(label, total=total, completed=completed, stats="")

    def __enter__(self) -> Self:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()
        elif self.enabled:
            self._line(final=True)

    @property
    def rate(self) -> float:
        """Items per second since the stage started (this run's items only)."""
        elapsed = time.monotonic() - self._start
        return (self.completed - self._first) / elapsed if elapsed > 0 else 0.0

    def advance(self, n: int = 1, stats: str | None = None) -> None:
        self.completed += n
        if stats is not None:
            self.stats = stats
        if self._progress is not None:
            self._progress.update(self._task, advance=n, stats=self.stats)
        elif self.enabled and time.monotonic() - self._last_line >= self.interval_s:
            self._line()

    def _line(self, final: bool = False) -> None:
        self._last_line = time.monotonic()
        of = f"/{self.total}" if self.total is not None else ""
        unit = f" {self.unit}" if self.unit else ""
        elapsed = time.monotonic() - self._start
        text = f"[{self.label}] {self.completed}{of}{unit}, {self.rate:.2f}/s, {elapsed:.0f} s"
        if self.stats:
            text += f", {self.stats}"
        if final:
            text += " (done)"
        print(text, file=self._stream, flush=True)

"""The rollout progress bar (rich): episodes done out of the planned (task, sample) pairs, success so far."""

from __future__ import annotations

from typing import Self

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from proctor.trajectory import Trajectory


class RolloutProgress:
    """Context manager; call `episode_done(traj)` for each finished episode. `enabled=False` is silent."""

    def __init__(self, total: int, already_done: int = 0, enabled: bool = True, console: Console | None = None):
        self.enabled = enabled
        self.episodes = 0
        self.successes = 0
        self.errors = 0
        self._progress = Progress(
            TextColumn("[bold]rollout[/bold]"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[stats]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=console,
            disable=not enabled,
        )
        self._task = self._progress.add_task("rollout", total=total, completed=already_done, stats="")

    def __enter__(self) -> Self:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()

    @property
    def success_rate(self) -> float:
        return self.successes / self.episodes if self.episodes else 0.0

    def episode_done(self, traj: Trajectory) -> None:
        self.episodes += 1
        self.successes += traj.success
        self.errors += traj.termination in ("env_error", "agent_error")
        stats = f"success {self.success_rate:.1%} of {self.episodes}"
        if self.errors:
            stats += f", [red]{self.errors} errors[/red]"
        self._progress.update(self._task, advance=1, stats=stats)

"""Rollout progress: episodes done out of the planned (task, sample) pairs, with success so far, and the agent
steps taken, so a rollout whose first episodes are long still shows progress every few seconds."""

from __future__ import annotations

from typing import IO

from proctor.progress import StageProgress
from proctor.trajectory import Trajectory


class RolloutProgress(StageProgress):
    """A `StageProgress` that counts finished episodes (`episode_done(traj)` for each) and agent steps
    (`steps_taken(total)` after agent calls)."""

    def __init__(self, total: int, already_done: int = 0, enabled: bool = True, label: str = "rollout",
                 stream: IO[str] | None = None):
        super().__init__(label, total, already_done, enabled=enabled, unit="episodes", stream=stream)
        self.episodes = 0
        self.successes = 0
        self.errors = 0
        self.steps = 0

    @property
    def success_rate(self) -> float:
        return self.successes / self.episodes if self.episodes else 0.0

    def episode_done(self, traj: Trajectory) -> None:
        self.episodes += 1
        self.successes += traj.success
        self.errors += traj.termination in ("env_error", "agent_error")
        self.advance(1, self._stats())

    def steps_taken(self, total: int) -> None:
        """The agent steps taken so far in this run (the line shows them; no episode is counted)."""
        if total != self.steps:
            self.steps = total
            self.advance(0, self._stats())

    def _stats(self) -> str:
        stats = f"success {self.success_rate:.1%} of {self.episodes}" if self.episodes else "no episode ended yet"
        if self.errors:
            stats += f", {self.errors} errors"
        return f"{stats}, {self.steps} steps" if self.steps else stats

"""Rollout progress: episodes done out of the planned (task, sample) pairs, with success so far."""

from __future__ import annotations

from typing import IO

from proctor.progress import StageProgress
from proctor.trajectory import Trajectory


class RolloutProgress(StageProgress):
    """A `StageProgress` that counts finished episodes; call `episode_done(traj)` for each."""

    def __init__(self, total: int, already_done: int = 0, enabled: bool = True, label: str = "rollout",
                 stream: IO[str] | None = None):
        super().__init__(label, total, already_done, enabled=enabled, unit="episodes", stream=stream)
        self.episodes = 0
        self.successes = 0
        self.errors = 0

    @property
    def success_rate(self) -> float:
        return self.successes / self.episodes if self.episodes else 0.0

    def episode_done(self, traj: Trajectory) -> None:
        self.episodes += 1
        self.successes += traj.success
        self.errors += traj.termination in ("env_error", "agent_error")
        stats = f"success {self.success_rate:.1%} of {self.episodes}"
        if self.errors:
            stats += f", {self.errors} errors"
        self.advance(1, stats)

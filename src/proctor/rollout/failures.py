"""How a rollout that did not finish cleanly ends: with an error that says what was kept and how to go on.

The rule (docs/concepts/envs.md, "When an env fails"): an episode that ended in `env_error` (the env raised, hung
past the step timeout, or its worker died) has no outcome, so a rollout with any is a failed stage:
`run_rollout` raises `EnvFailures` after storing every episode, and the store keeps the failed ones. The same
call again resumes and redoes them (a resume retries `env_error` episodes; `retry_failed` also retries
`agent_error` ones). An `agent_error` is the agent's failure, not the env's: it is recorded and counted, a run
whose agent fails on every call stops with `AgentFailing`, and it does not fail the stage by itself.
`RolloutInterrupted` is Ctrl-C with the number of episodes kept.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from proctor.trajectory import Trajectory


class EnvFailures(RuntimeError):
    """Episodes of a rollout ended in `env_error`: `failed` of `total`, kept in the store; `result` is the
    rollout's result when one was made (the caller may still report it)."""

    def __init__(self, message: str, failed: int, total: int, result: Any = None):
        super().__init__(message)
        self.failed, self.total, self.result = failed, total, result


class RolloutInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped a rollout: `kept` of its `total` episodes are in the store at `root` (the same call
    again resumes from there)."""

    def __init__(self, root: str | os.PathLike, kept: int, total: int):
        super().__init__(f"interrupted: {kept} of {total} episodes are kept in {root}")
        self.root, self.kept, self.total = root, kept, total


def env_failures(trajectories: Iterable[Trajectory], where: str | os.PathLike, result: Any = None
                 ) -> EnvFailures | None:
    """The `EnvFailures` of these episodes (those of one run, stored in `where`), or None when no episode
    ended in `env_error`. Its message is one line: how many failed, and the first one's error."""
    trajs = list(trajectories)
    failed = [t for t in trajs if t.termination == "env_error"]
    if not failed:
        return None
    first = failed[0]
    lines = (first.error or "").strip().splitlines()
    return EnvFailures(
        f"{len(failed)} of {len(trajs)} episodes ended in env_error (the first, task {first.task_id!r} sample "
        f"{first.sample}: {lines[0] if lines else 'no message'}); {where} keeps them, and running the same "
        "command again retries them", len(failed), len(trajs), result)

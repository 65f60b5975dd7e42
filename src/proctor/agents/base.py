"""The `Agent` (policy) protocol: one batched call for many trajectory prefixes at once.

An agent sees a `Prefix` (the task, the completed steps, the current observation and its info) and
returns `n` `Candidate` actions for each prefix. Batching is the point: the rollout engine calls `act`
once per step for every active environment together, so a model backend can generate for all of them in
one padded batch.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from proctor.trajectory import Step


@dataclass
class Prefix:
    """What an agent sees before choosing its next action (the state s_t)."""

    env: str
    task_id: str
    task: str
    observation: str
    history: list[Step] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)
    sample: int = 0
    seed: int = 0

    @property
    def admissible_actions(self) -> list[str] | None:
        return self.info.get("admissible_actions")

    @property
    def step_index(self) -> int:
        return len(self.history)


@dataclass
class Candidate:
    """One proposed action: the parsed action plus what the model actually produced."""

    action: str
    reason: str | None = None
    raw_output: str | None = None
    logprobs: list[float] | None = None
    parsed: bool = True
    finished: bool = True
    meta: dict[str, Any] = field(default_factory=dict)


class AgentError(RuntimeError):
    """The agent could not produce an action (server down after retries, model failure, ...)."""


class Agent(ABC):
    """A policy over text environments (see module docstring)."""

    #: short description stored in every trajectory's `agent` field
    name: str = "agent"

    @abstractmethod
    def act(self, prefixes: Sequence[Prefix], n: int = 1) -> list[list[Candidate]]:
        """For each prefix, `n` candidate actions (the first is the one to take when n = 1)."""

    def describe(self) -> str:
        return self.name

    def reset(self, prefix: Prefix) -> None:
        """Called when a new episode starts, for agents that keep per-episode state."""

    def close(self) -> None:
        """Release resources (models, HTTP clients)."""

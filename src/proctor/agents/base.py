"""The `Agent` (policy) protocol: one batched call for many trajectory prefixes at once.

An agent sees a `Prefix` (the task, the completed steps, the current observation and its info) and
returns `n` `Candidate` actions for each prefix. Batching is the point: the rollout engine calls `act`
once per step for every active environment together, so a model backend can generate for all of them in
one padded batch.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from proctor.prompts.turns import Candidate, Prefix

__all__ = ["Agent", "AgentError", "Candidate", "Prefix"]


class AgentError(RuntimeError):
    """The agent could not produce an action (server down after retries, model failure, ...)."""


class Agent(ABC):
    """A policy over text environments (see module docstring)."""

    #: short description stored in every trajectory's `agent` field
    name: str = "agent"
    #: whether a server generates (the rollout engine then runs one task per episode; a local model batches)
    served: bool = False

    @property
    def needs_expert_hints(self) -> bool:
        """Whether the agent reads the env's privileged `info["expert_action"]` (the engine then makes the
        env with `expert_hints=True`)."""
        return False

    @abstractmethod
    def act(self, prefixes: Sequence[Prefix], n: int = 1) -> list[list[Candidate]]:
        """For each prefix, `n` candidate actions (the first is the one to take when n = 1)."""

    def describe(self) -> str:
        return self.name

    def reset(self, prefix: Prefix) -> None:
        """Called when a new episode starts, for agents that keep per-episode state."""

    def close(self) -> None:
        """Release resources (models, HTTP clients)."""

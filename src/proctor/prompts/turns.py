"""The vocabulary shared by every layer that reads or acts on a state: `Prefix` (what an agent sees before it
chooses its next action, the state s_t) and `Candidate` (one proposed action with what the model produced).

It sits just above `proctor.trajectory`, so envs (their scripted experts), agents, the PRM, search and RL all
import it without depending on each other.
"""

from __future__ import annotations

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
    token_ids: list[int] | None = None
    parsed: bool = True
    finished: bool = True
    meta: dict[str, Any] = field(default_factory=dict)

"""The one trajectory schema every stage reads and writes, and the parsing of one stored record.

`Step.observation` is what the agent saw *before* it chose `Step.action` (the state s_t); the env's reply
to the action is the next step's observation, and the reply to the last action is
`Trajectory.final_observation`. `Step.reward` is the reward the env returned for that action.

`parse_trajectory_line` reads one JSONL record; its errors (`StoreError`) name the file, line and field.
The on-disk store is `proctor.store`; Parquet / HF `datasets` conversion is `proctor.trajectory_export`.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

Termination = Literal["success", "failure", "max_steps", "env_error", "agent_error"]
TERMINATIONS: tuple[str, ...] = ("success", "failure", "max_steps", "env_error", "agent_error")


class Step(BaseModel):
    """One agent turn: the state it saw, the action it took, and what the env said about it."""

    model_config = ConfigDict(extra="forbid")

    observation: str
    action: str
    reason: str | None = None
    raw_output: str | None = Field(default=None, description="the model's full text for this turn")
    logprobs: list[float] | None = Field(default=None, description="sampling log-probs of `token_ids`")
    token_ids: list[int] | None = Field(default=None, description="the token ids the policy generated "
                                        "(policy-gradient losses train on these, never on a re-tokenization)")
    reward: float = 0.0
    done: bool = Field(default=False, description="the episode ended after this action (terminated or truncated)")
    truncated: bool = Field(default=False, description="it ended only because the step limit was reached")
    info: dict[str, Any] = Field(default_factory=dict)
    targets: dict[str, float] = Field(default_factory=dict, description="per-step targets by method")
    scores: dict[str, float] = Field(default_factory=dict, description="per-step scores by model")

    @model_validator(mode="after")
    def _truncation(self) -> Step:
        if self.truncated and not self.done:
            raise ValueError("truncated is True but done is False")
        return self

    @property
    def valid(self) -> bool:
        """Whether the env accepted the action (`info['valid']`, True when the env does not say)."""
        return bool(self.info.get("valid", True))

    @property
    def terminated(self) -> bool:
        """The episode reached a terminal state here (gymnasium's `terminated`): no value beyond it.

        A truncated step (the step limit) is not terminal: targets bootstrap from the next state."""
        return self.done and not self.truncated


class Trajectory(BaseModel):
    """One episode of one agent on one task."""

    model_config = ConfigDict(extra="forbid")

    id: str
    env: str
    task_id: str
    sample: int = Field(ge=0, description="index of this rollout among the K for its task")
    task: str
    split: str
    seed: int
    agent: str
    steps: list[Step] = Field(default_factory=list)
    final_observation: str = ""
    success: bool
    score: float
    termination: Termination
    error: str | None = None
    timings: dict[str, float] = Field(default_factory=dict)
    task_meta: dict[str, Any] = Field(default_factory=dict,
                                      description="the env's metadata of the task, e.g. {'task_type': ...}")
    meta: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _consistent(self) -> Trajectory:
        if self.termination == "success" and not self.success:
            raise ValueError("termination is 'success' but success is False")
        if self.success and self.termination != "success":
            raise ValueError(f"success is True but termination is {self.termination!r}")
        if self.termination in ("env_error", "agent_error") and not self.error:
            raise ValueError(f"termination {self.termination!r} needs an error message")
        return self

    @property
    def key(self) -> tuple[str, int]:
        """The (task_id, sample) pair that identifies this rollout in a store."""
        return (self.task_id, self.sample)

    @property
    def actions(self) -> list[str]:
        return [s.action for s in self.steps]

    @property
    def total_reward(self) -> float:
        return sum(s.reward for s in self.steps)

    @staticmethod
    def new_id() -> str:
        return uuid.uuid4().hex


class StoreError(ValueError):
    """A record that cannot be read as a trajectory (a store's line or manifest, a dataset row); the message
    names file, line and field."""


def describe_validation_error(err: ValidationError) -> str:
    """A pydantic error as `field 'a.b': message; ...` (what the errors of a record name)."""
    parts = []
    for e in err.errors():
        loc = ".".join(str(x) for x in e["loc"]) or "<record>"
        parts.append(f"field '{loc}': {e['msg']}")
    return "; ".join(parts)


def parse_trajectory_line(line: str | bytes, path: Path | str, lineno: int) -> Trajectory:
    """Parse one JSONL line; errors name the file, the 1-based line number and the field (or the byte)."""
    if isinstance(line, bytes):
        try:
            line = line.decode("utf-8")
        except UnicodeDecodeError as e:
            raise StoreError(f"{path}:{lineno}: not valid UTF-8 (byte {e.start} of the line is "
                             f"{line[e.start:e.start + 1]!r})") from None
    try:
        data = json.loads(line)
    except json.JSONDecodeError as e:
        raise StoreError(f"{path}:{lineno}: not valid JSON ({e.msg} at column {e.colno})") from None
    if not isinstance(data, dict):
        raise StoreError(f"{path}:{lineno}: expected a JSON object, got {type(data).__name__}")
    try:
        return Trajectory.model_validate(data)
    except ValidationError as e:
        raise StoreError(f"{path}:{lineno}: {describe_validation_error(e)}") from None

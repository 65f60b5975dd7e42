"""The OpenEnv types of a proctor env: the action (one command), the observation and the session's state."""

from __future__ import annotations

from typing import Any

from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field, model_validator

from proctor.serving.guards import GuardError


def bad_action(message: str) -> GuardError:
    """A refused command: 422 `bad_action`, in one line."""
    return GuardError(422, f"bad action: {message}", "bad_action")


class ProctorAction(Action):
    """One command for the env, e.g. one of the admissible actions the last observation listed."""

    command: str = Field(description="the command, e.g. one of the admissible actions")

    @model_validator(mode="before")
    @classmethod
    def _one_line_errors(cls, data: Any) -> Any:
        # a GuardError (not a ValueError) passes through pydantic unchanged, so that both of OpenEnv's transports
        # report it as one line rather than as a validation error list ("Invalid message" over the WebSocket)
        if not isinstance(data, dict):
            raise bad_action(f'expected an object {{"command": "..."}}, got {type(data).__name__}')
        unknown = sorted(set(data) - {"command", "metadata"})
        if unknown:
            raise bad_action(f"unknown field(s) {', '.join(unknown)}; an action is {{\"command\": \"...\"}}")
        command = data.get("command")
        if not isinstance(command, str):
            raise bad_action(f"'command' must be a string, got {type(command).__name__}")
        if not command.strip():
            raise bad_action("'command' is empty")
        return data


class ProctorObservation(Observation):
    """The env's reply (docs/integrations.md, "The mapping"); `reward` is the env's step reward, or the PRM's score with a PRM."""

    text: str = Field("", description="the env's observation text")
    task: str = Field("", description="the task instruction")
    task_id: str = ""
    admissible_actions: list[str] | None = Field(None, description="the valid commands now (None: not listed)")
    step: int = Field(0, description="steps taken in this episode")
    env_reward: float | None = Field(None, description="the env's reward of the last step (None after reset)")
    prm_score: float | None = Field(None, description="the PRM's score of the last step (None without a PRM)")
    valid: bool = Field(True, description="whether the env accepted the last command")
    won: bool = False
    score: float = Field(0.0, description="the env's grade of the episode so far")
    truncated: bool = Field(False, description="the env's step limit ended the episode")
    termination: str | None = Field(None, description="success, failure or max_steps once done")
    expert_action: str | None = Field(None, description="the expert's next action (only with expert_hints=true)")


class ProctorState(State):
    """The session's episode: OpenEnv's `episode_id` and `step_count`, and the env, split, task and seed."""

    env: str = ""
    split: str | None = None
    task_id: str | None = None
    seed: int | None = None
    done: bool = True

"""`ServeEnvConfig`: what an OpenEnv server of a proctor env serves, and its bounds."""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field, model_validator

from proctor.integrations.common import AdapterPRM


class ServeEnvConfig(AdapterPRM):
    """What `create_app` serves, and its bounds; the PRM's fields are `AdapterPRM`'s."""

    model_config = ConfigDict(extra="forbid")

    env: str = Field(description="a registered proctor env (`proctor envs`)")
    env_kwargs: dict[str, Any] = Field(default_factory=dict, description="the env's constructor arguments")
    split: str = Field("train", description="the split `reset` draws from when the client names no task or split")
    run_seed: int = Field(0, description="default env seeds: episode_seed(run_seed, task_id, 0)")
    max_sessions: int = Field(4, ge=1, description="concurrent WebSocket sessions (each holds one env)")
    session_timeout_s: float | None = Field(None, gt=0, description="OpenEnv's reaper drops sessions idle this "
                                            "long (None: never)")
    max_action_chars: int = Field(1000, ge=1, description="longest command accepted (422 above)")
    max_body_bytes: int = Field(64 * 1024, ge=1024, description="largest HTTP body or WebSocket message (413 / "
                                "MESSAGE_TOO_LARGE above)")
    ws_max_size: int = Field(16 * 1024 * 1024, ge=2048, description="largest WebSocket message the server reads "
                             "at all (uvicorn's ws_max_size, above max_body_bytes): uvicorn closes the socket on a "
                             "larger one with code 1009 and no error message")

    @model_validator(mode="after")
    def _bounds(self) -> ServeEnvConfig:
        if self.ws_max_size <= self.max_body_bytes:
            raise ValueError(f"field 'ws_max_size': {self.ws_max_size} must be above max_body_bytes "
                             f"({self.max_body_bytes}), or no too-large message gets proctor's MESSAGE_TOO_LARGE")
        return self


def uvicorn_options(cfg: ServeEnvConfig) -> dict[str, Any]:
    """What uvicorn is given beside the app (`proctor serve-env`, and `BackgroundServer` in tests): its WebSocket
    bound `ws_max_size`, above `max_body_bytes`, so that proctor's bound is the one that answers a message that
    is too large (MESSAGE_TOO_LARGE, then close 1009), up to `ws_max_size`."""
    return {"ws_max_size": cfg.ws_max_size}

"""The fields the online trainers share (`ppo`, and the ArCHer family: `archer`, `chai`, `fbc`): the policy, the
env and tasks its rollouts run on, its agent, and the optimiser of the policy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field

from proctor.agents.registry import AgentConfig
from proctor.rl.on_policy import OnPolicyConfig


class OnlineConfig(OnPolicyConfig):
    """Policy, env, rollouts and optimiser fields (see module docstring)."""

    policy: str = Field(description="the starting policy: a model folder or hub name")
    output_dir: Path = Field(description="a new or empty folder")
    env: str
    env_kwargs: dict[str, Any] = Field(default_factory=dict)
    env_module: str | None = None
    split: str = "train"
    tasks: int | list[str] | None = Field(default=None, description="first N tasks of the split, ids, or all")
    rollouts_per_task: int = Field(default=1, ge=1, description="episodes per task per iteration")
    batch: int = Field(default=8, ge=1, description="envs stepped together")
    workers: int = Field(default=0, ge=0)
    agent: AgentConfig = Field(description="the policy's agent config; its `model` is filled in (default hf)")
    iterations: int = Field(default=1, ge=1)
    learning_rate: float = Field(default=1e-6, gt=0, description="the policy's learning rate")
    weight_decay: float = Field(default=0.0, ge=0)
    max_grad_norm: float | None = Field(default=1.0, gt=0)
    lora: dict[str, Any] | None = Field(default=None, description="LoraConfig arguments; None trains every weight")
    dtype: str | None = None
    device: str | None = "auto"
    seed: int = 0
    progress: bool = True

"""The fields every online trainer shares (online DPO, `grpo`, `ppo`, and the ArCHer family: `archer`, `chai`,
`fbc`): the policy, the env tasks its rollouts run on (`TaskSelection`), its agent (`OnPolicyConfig`), and the
optimisation of the policy (`OptimizationConfig`): a config part (`proctor.parts`). A trainer's config adds only its
own fields."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from pydantic import Field

from proctor.agents.registry import AgentConfig
from proctor.parts import Part
from proctor.rl.on_policy import OnPolicyConfig
from proctor.training.config import OptimizationConfig, TaskSelection


class OnlineConfig(OnPolicyConfig, TaskSelection, OptimizationConfig, Part):
    """Policy, env, rollouts and optimiser fields (see module docstring)."""

    policy: str = Field(description="the starting policy: a model folder or hub name")
    output_dir: Path = Field(description="a new or empty folder")
    rollouts_per_task: int = Field(default=1, ge=1, description="episodes per task per iteration")
    agent: AgentConfig = Field(description="the policy's agent config; its `model` is filled in (default hf)")
    iterations: int = Field(default=1, ge=1, description="sample → train → save rounds")
    lora: dict[str, Any] | None = Field(default=None, description="LoraConfig arguments, e.g. {r: 8}; None trains "
                                        "every weight")


def start_run(cfg: OnlineConfig) -> tuple[torch.nn.Module, Any, str]:
    """An online trainer's first steps: refuse a non-empty `cfg.output_dir` (trainers do not resume; every
    process checks before any writes) and create it, seed torch with `cfg.seed`, load the starting policy `cfg.policy` for training (float32 weights, LoRA,
    on `cfg.device`). Returns (policy, tokenizer, device)."""
    from proctor.training.distributed import fresh_output_dir
    from proctor.training.policy import load_policy
    from proctor.training.precision import resolve_device

    fresh_output_dir(cfg.output_dir)
    torch.manual_seed(cfg.seed)
    device = resolve_device(cfg.device)
    policy, tokenizer = load_policy(cfg.policy, lora=cfg.lora, precision=cfg.precision, device=device)
    return policy, tokenizer, device

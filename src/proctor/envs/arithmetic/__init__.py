"""Stepwise arithmetic word problems; the full env is being written."""

from __future__ import annotations

from typing import Any

from proctor.envs.base import SPLITS, TextEnv
from proctor.envs.registry import register


@register("arithmetic")
class ArithmeticEnv(TextEnv):
    """Arithmetic word problems solved one step per line."""

    def __init__(self, max_steps: int = 10, seed: int = 0, expert_hints: bool = False):
        super().__init__(max_steps=max_steps, expert_hints=expert_hints, seed=seed)

    def task_ids(self, split: str) -> list[str]:
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}")
        return [f"{split}-0"]

    def _reset(self, task_id: str, seed: int) -> tuple[str, dict[str, Any]]:
        return "Tom has 2 apples and buys 3 more. How many apples does he have?", {"task": "Solve."}

    def _step(self, action: str) -> tuple[str, float, bool, dict[str, Any]]:
        won = action.strip() == "Answer: 5"
        return "", float(won), action.startswith("Answer:"), {"valid": True, "won": won}

"""Twenty questions (ArCHer's dialogue task); the full env is being written."""

from __future__ import annotations

from typing import Any

from proctor.envs.base import SPLITS, TextEnv
from proctor.envs.registry import register


@register("twenty_questions")
class TwentyQuestionsEnv(TextEnv):
    """Twenty questions: guess the secret object with yes/no questions."""

    def __init__(self, max_steps: int = 20, seed: int = 0, expert_hints: bool = False):
        super().__init__(max_steps=max_steps, expert_hints=expert_hints, seed=seed)
        self.secret = ""

    def task_ids(self, split: str) -> list[str]:
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}")
        return [f"{split}-0"]

    def _reset(self, task_id: str, seed: int) -> tuple[str, dict[str, Any]]:
        self.secret = "dog"
        return "Ask a yes/no question.", {"task": "Guess the object."}

    def _step(self, action: str) -> tuple[str, float, bool, dict[str, Any]]:
        won = action.strip().lower().rstrip("?") == f"is it a {self.secret}"
        return ("Yes." if won else "No."), (0.0 if won else -1.0), won, {"valid": True, "won": won}

"""The text-environment protocol every environment honours (gymnasium-style, text in, text out).

    obs, info = env.reset(task_id, seed)        # info["task"]: the instruction text
    obs, reward, done, info = env.step(action)  # info["valid"], info["admissible_actions"] (or None),
                                                # info["won"], info["score"], info["truncated"]

Subclasses implement `_reset` and `_step`; this base class adds what every env must do the same way:
the step limit (`truncated`), the action history (so any state can be re-created by exact replay),
`clone()`, the standard info keys, and optional expert hints (`info["expert_action"]`, for agents such as
an oracle that read privileged state, and for ALFWorld's handcoded expert).
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar, Self

SPLITS: tuple[str, ...] = ("train", "valid", "test")


class EnvError(RuntimeError):
    """An environment failed (crashed, hung, or was used out of protocol)."""


class TextEnv(ABC):
    """Base class for proctor's text environments (see module docstring)."""

    name: ClassVar[str] = ""
    #: whether `clone()` may deep-copy the object (pure-Python state) instead of replaying actions
    copyable: ClassVar[bool] = True

    def __init__(self, max_steps: int, expert_hints: bool = False, **spec_kwargs: Any):
        """`spec_kwargs` are the subclass's other constructor arguments: `type(self)(**spec.kwargs)` rebuilds it."""
        if max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps}")
        self.max_steps = max_steps
        self.expert_hints = expert_hints
        self._spec_kwargs = {"max_steps": max_steps, "expert_hints": expert_hints, **spec_kwargs}
        self.task_id: str | None = None
        self.seed: int | None = None
        self.task: str = ""
        #: what `_reset` reported about the task (`task`, and metadata such as `task_type`)
        self.task_info: dict[str, Any] = {}
        self.actions: list[str] = []
        self.done = True

    # -- to implement ---------------------------------------------------------------------------
    @abstractmethod
    def task_ids(self, split: str) -> list[str]:
        """The task ids of a split, a deterministic function of the env's construction seed."""

    @abstractmethod
    def _reset(self, task_id: str, seed: int) -> tuple[str, dict[str, Any]]:
        """Start `task_id`; return the first observation and info (must contain `task`)."""

    @abstractmethod
    def _step(self, action: str) -> tuple[str, float, bool, dict[str, Any]]:
        """Apply one action; return observation, reward, done, info (with `valid`, `won`)."""

    def admissible_actions(self) -> list[str] | None:
        """The actions valid in the current state, or None if the env does not know them."""
        return None

    def expert_action(self) -> str | None:
        """The privileged expert's next action, or None if this env has no such expert."""
        return None

    @classmethod
    def candidate_actions(cls) -> list[str] | None:
        """A fixed list of well-formed actions for an env without admissible-action lists (e.g. a question
        grammar's canonical questions), what a random agent draws from; None if the env has none."""
        return None

    def splits(self) -> tuple[str, ...]:
        return SPLITS

    # -- the protocol ---------------------------------------------------------------------------
    @property
    def spec_kwargs(self) -> dict[str, Any]:
        """The constructor arguments that rebuild this env: `type(self)(**env.spec_kwargs)`."""
        return dict(self._spec_kwargs)

    def reset(self, task_id: str, seed: int = 0) -> tuple[str, dict[str, Any]]:
        obs, info = self._reset(task_id, int(seed))
        if "task" not in info:
            raise EnvError(f"{self.name}: _reset did not report info['task']")
        self.task_id, self.seed, self.task = task_id, int(seed), info["task"]
        self.task_info = dict(info)
        self.actions = []
        self.done = False
        return obs, self._complete_info(info, valid=True, won=False)

    def step(self, action: str) -> tuple[str, float, bool, dict[str, Any]]:
        if self.done:
            raise EnvError(f"{self.name}: step() called on a finished episode; call reset() first")
        obs, reward, done, info = self._step(action)
        self.actions.append(action)
        won = bool(info.get("won", False))
        truncated = not done and len(self.actions) >= self.max_steps
        info["truncated"] = truncated
        self.done = bool(done or truncated)
        return obs, float(reward), self.done, self._complete_info(info, valid=info.get("valid", True), won=won)

    def _complete_info(self, info: dict[str, Any], valid: bool, won: bool) -> dict[str, Any]:
        info.setdefault("valid", bool(valid))
        info.setdefault("won", bool(won))
        info.setdefault("score", 1.0 if info["won"] else 0.0)
        info.setdefault("truncated", False)
        if "admissible_actions" not in info:
            info["admissible_actions"] = None if self.done else self.admissible_actions()
        if self.expert_hints and not self.done:
            info["expert_action"] = self.expert_action()
        return info

    def replay(self, task_id: str, seed: int, actions: Sequence[str]) -> tuple[str, dict[str, Any]]:
        """Reset and re-apply an action prefix; returns the observation and info after the last one."""
        obs, info = self.reset(task_id, seed)
        for i, a in enumerate(actions):
            if self.done:
                raise EnvError(f"{self.name}: replay of task {task_id!r} ended after {i} of {len(actions)} actions")
            obs, _, _, info = self.step(a)
        return obs, info

    def clone(self) -> TextEnv:
        """An independent copy in the same state (deep copy, or a fresh env replaying the actions)."""
        if self.copyable:
            return copy.deepcopy(self)
        twin = type(self)(**self._spec_kwargs)
        if self.task_id is not None:
            twin.replay(self.task_id, self.seed or 0, self.actions)
            twin.done = self.done
        return twin

    def close(self) -> None:
        """Release external resources (processes, servers); pure-Python envs have none."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

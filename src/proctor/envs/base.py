"""The text-environment protocol every environment honours (gymnasium-style, text in, text out).

    obs, info = env.reset(task_id, seed)   # info["task"]: the instruction text; info["admissible_actions"]
    result = env.step(action)              # a StepResult: observation, reward, terminated, truncated, won,
                                           # valid, admissible_actions (or None), info (score, extras)

As in gymnasium (>= 0.26), `terminated` (the task ended: won, or lost for good) and `truncated` (the step limit
cut the episode short) are separate, and `result.done` is either. Subclasses implement `_reset`, and `_step`
returning a `StepOutcome`; this base class adds what every env must do the same way: the step limit
(`truncated`), the action history (so any state can be re-created by exact replay), `clone()`, the admissible
actions of the new state, the default `info["score"]`, and optional expert hints (`info["expert_action"]`, at
reset and after each step, for agents such as an oracle that read privileged state, and for ALFWorld's
handcoded expert).
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

SPLITS: tuple[str, ...] = ("train", "valid", "test")


class EnvError(RuntimeError):
    """An environment failed (crashed, hung, or was used out of protocol)."""


@dataclass(frozen=True)
class StepOutcome:
    """What a subclass's `_step` reports: the new observation, the reward, whether the task ended
    (`terminated`: won, or lost for good), whether it was `won`, whether the action was `valid` (an invalid
    action is counted, not an error), `truncated` for an env with a time limit of its own, and env-specific
    `info` (e.g. `score` in [0, 1] when it is not simply 1 for a win and 0 otherwise)."""

    observation: str
    reward: float
    terminated: bool
    won: bool = False
    valid: bool = True
    truncated: bool = False
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class StepResult:
    """What `TextEnv.step` returns. `terminated` and `truncated` are never both true: `truncated` means the step
    limit (or the env's own time limit) ended an episode that did not terminate. `won` implies `terminated`.
    `admissible_actions`: the actions valid in the new state, None when the env does not know them or the
    episode is over. `info`: the rest (`score`; `expert_action` with expert hints while the episode runs;
    env-specific extras)."""

    observation: str
    reward: float
    terminated: bool
    truncated: bool
    won: bool
    valid: bool
    admissible_actions: list[str] | None
    info: dict[str, Any]

    @property
    def done(self) -> bool:
        """The episode is over (terminated or truncated)."""
        return self.terminated or self.truncated

    def as_info(self) -> dict[str, Any]:
        """The result as one flat dict, the shape of a stored `Step.info`: `info` plus `valid`, `won`,
        `truncated` and `admissible_actions`."""
        fields = {"valid": self.valid, "won": self.won}
        out = {**fields, **self.info}  # the keys in the order stored trajectories have them
        out.update(fields, truncated=self.truncated, admissible_actions=self.admissible_actions)
        return out


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
    def _step(self, action: str) -> StepOutcome:
        """Apply one action; return what happened (the base class adds the step limit, admissible actions,
        the default score and the expert hint)."""

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
        """Start `task_id`; returns the first observation and info: `_reset`'s (`task`, task metadata) plus
        `admissible_actions` (of the first state, or None) and, with expert hints, `expert_action`."""
        obs, info = self._reset(task_id, int(seed))
        if "task" not in info:
            raise EnvError(f"{self.name}: _reset did not report info['task']")
        self.task_id, self.seed, self.task = task_id, int(seed), info["task"]
        self.task_info = dict(info)
        self.actions = []
        self.done = False
        info = {**info, "admissible_actions": self.admissible_actions()}
        if self.expert_hints:
            info["expert_action"] = self.expert_action()
        return obs, info

    def step(self, action: str) -> StepResult:
        """Apply `action`; `truncated` when it is the `max_steps`-th action and the episode did not terminate."""
        if self.done:
            raise EnvError(f"{self.name}: step() called on a finished episode; call reset() first")
        out = self._step(action)
        if not isinstance(out, StepOutcome):
            raise EnvError(f"{self.name}: _step returned a {type(out).__name__}, not a StepOutcome; return "
                           "StepOutcome(observation, reward, terminated, won=..., valid=...) from proctor.envs "
                           "(an (obs, reward, done, info) tuple is the old protocol; docs: concepts/envs.md)")
        self.actions.append(action)
        terminated = bool(out.terminated)
        truncated = not terminated and (bool(out.truncated) or len(self.actions) >= self.max_steps)
        self.done = terminated or truncated
        info = dict(out.info)
        info.setdefault("score", 1.0 if out.won else 0.0)
        if self.expert_hints and not self.done:
            info["expert_action"] = self.expert_action()
        return StepResult(observation=out.observation, reward=float(out.reward), terminated=terminated,
                          truncated=truncated, won=bool(out.won), valid=bool(out.valid),
                          admissible_actions=None if self.done else self.admissible_actions(), info=info)

    def replay(self, task_id: str, seed: int, actions: Sequence[str]) -> tuple[str, dict[str, Any]]:
        """Reset and re-apply an action prefix; returns the observation and info of the state reached: reset's
        info when `actions` is empty, else the last step's result as one dict (`StepResult.as_info()`)."""
        obs, info = self.reset(task_id, seed)
        for i, a in enumerate(actions):
            if self.done:
                raise EnvError(f"{self.name}: replay of task {task_id!r} ended after {i} of {len(actions)} actions")
            result = self.step(a)
            obs, info = result.observation, result.as_info()
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

"""A small registry of named pure functions (verl's `core_algos` idea): each math family file
(`dpo_losses`, `advantages`, `policy_losses`) fills one `FunctionRegistry` with a decorator, and configs
name the entry they use.

    DPO_LOSSES = FunctionRegistry("DPO loss")

    @DPO_LOSSES.register("sigmoid")
    def sigmoid_loss(...): ...

    DPO_LOSSES.get("ipo")   # -> the function; an unknown name is an error listing the known ones
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


class FunctionRegistry:
    """Named functions of one family; `what` names the family in error messages."""

    def __init__(self, what: str):
        self.what = what
        self._fns: dict[str, Callable[..., Any]] = {}

    def register(self, name: str) -> Callable[[F], F]:
        def deco(fn: F) -> F:
            if name in self._fns:
                raise ValueError(f"{self.what} {name!r} is already registered")
            self._fns[name] = fn
            return fn

        return deco

    def get(self, name: str) -> Callable[..., Any]:
        try:
            return self._fns[name]
        except KeyError:
            raise KeyError(f"unknown {self.what} {name!r}; known: {', '.join(sorted(self._fns))}") from None

    def names(self) -> list[str]:
        return sorted(self._fns)

    def __contains__(self, name: object) -> bool:
        return name in self._fns

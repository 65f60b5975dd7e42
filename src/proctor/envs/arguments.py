"""An env's constructor arguments, checked before the env is built: a misspelt or missing one is one line naming
the env, the argument and those it takes (`make`, and the configs that name an env: `check_spec`).

The arguments an env takes are those of its class's `__init__`; an `__init__` with `**kwargs` also takes those of
the next `__init__` up its classes (where it passes them on), down to `TextEnv`'s `max_steps` and `expert_hints`
(whatever else reaches `TextEnv` is only recorded, so that is where the list ends). A factory that is not a
`TextEnv` class and takes `**kwargs` takes anything.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from proctor.envs.base import TextEnv
from proctor.registry import did_you_mean


def accepted_arguments(factory: Callable[..., Any]) -> tuple[list[str] | None, list[str]]:
    """(the keyword arguments `factory` takes, None for any; those it requires), in the order declared."""
    owners = [c for c in factory.__mro__ if "__init__" in vars(c)] if inspect.isclass(factory) else [factory]
    names: list[str] = []
    required: list[str] = []
    for i, owner in enumerate(owners):
        params = list(inspect.signature(owner.__init__ if inspect.isclass(owner) else owner).parameters.values())
        if inspect.isclass(owner):
            params = params[1:]  # self
        named = [p for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        names += [p.name for p in named if p.name not in names]
        if i == 0:
            required = [p.name for p in named if p.default is p.empty]
        if owner is TextEnv or not any(p.kind is p.VAR_KEYWORD for p in params):
            return names, required
    return None, required


def check_arguments(env: str, factory: Callable[..., Any], kwargs: Mapping[str, Any]) -> None:
    """A `ValueError` naming env `env`'s unknown argument (with the nearest one it takes) or missing one."""
    names, required = accepted_arguments(factory)
    if names is not None:
        for given in kwargs:
            if given not in names:
                raise ValueError(f"environment {env!r} has no argument {given!r}{did_you_mean(given, names)}; it takes "
                                 f"{', '.join(names)}")
    missing = [name for name in required if name not in kwargs]
    if missing:
        raise ValueError(f"environment {env!r} needs the argument {missing[0]!r} (--env-arg {missing[0]}=...)")

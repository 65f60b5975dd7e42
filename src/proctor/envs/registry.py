"""Environment registry: `make("household", **kwargs)`.

Built-in envs register with the `@register` decorator. Adapters for optional third-party packages are
registered by import path (`register_lazy`) so that nothing heavy is imported until the env is made, and
a missing extra produces an error that names the extra to install.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from proctor.envs.base import TextEnv


@dataclass(frozen=True)
class EnvSpec:
    """What is needed to build an env anywhere (another process, a Ray actor): name + kwargs."""

    name: str
    kwargs: dict[str, Any] = field(default_factory=dict)

    def make(self) -> TextEnv:
        return make(self.name, **self.kwargs)

    @classmethod
    def of(cls, env: TextEnv) -> EnvSpec:
        """The spec that rebuilds `env` (its registered name and constructor arguments)."""
        return cls(env.name, env.spec_kwargs)


@dataclass(frozen=True)
class EnvEntry:
    name: str
    target: str | Callable[..., TextEnv]
    extra: str | None = None
    description: str = ""

    def factory(self) -> Callable[..., TextEnv]:
        if callable(self.target):
            return self.target
        module_name, _, attr = self.target.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as e:
            if self.extra is None:
                raise
            raise ImportError(
                f"environment {self.name!r} needs the optional extra '{self.extra}': "
                f"pip install 'proctor[{self.extra}]' ({e})"
            ) from e
        return getattr(module, attr)


_REGISTRY: dict[str, EnvEntry] = {}


def register(name: str, description: str = "") -> Callable[[type[TextEnv]], type[TextEnv]]:
    """Class decorator: register a built-in env under `name` (also sets `cls.name`)."""

    def deco(cls: type[TextEnv]) -> type[TextEnv]:
        if name in _REGISTRY:
            raise ValueError(f"environment {name!r} is already registered")
        cls.name = name
        doc = description or (cls.__doc__ or "").strip().splitlines()[0]
        _REGISTRY[name] = EnvEntry(name, cls, None, doc)
        return cls

    return deco


def register_lazy(name: str, target: str, extra: str | None, description: str) -> None:
    """Register an env by `module:attr` import path, imported only when made."""
    if name in _REGISTRY:
        raise ValueError(f"environment {name!r} is already registered")
    _REGISTRY[name] = EnvEntry(name, target, extra, description)


def make(name: str, **kwargs: Any) -> TextEnv:
    """Build a registered environment."""
    try:
        entry = _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown environment {name!r}; known: {', '.join(sorted(_REGISTRY))}") from None
    return entry.factory()(**kwargs)


def entries() -> dict[str, EnvEntry]:
    return dict(sorted(_REGISTRY.items()))


def import_env_module(name: str) -> None:
    """Import the module that registers a user's env (`--env-module`, `env_module:`), looking in the current
    folder too (as `python -m` does), so `my_env.py` beside the command needs no PYTHONPATH. Worker processes
    inherit the path. An ImportError names the module and where it was looked for."""
    import importlib
    import os
    import sys

    here = os.getcwd()
    if here not in sys.path:
        sys.path.insert(0, here)
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name != name.split(".")[0] and e.name != name:
            raise  # the module exists; one of its own imports is missing
        raise ModuleNotFoundError(f"env module {name!r} not found in the current folder ({here}) or on the import "
                                  "path", name=e.name) from None

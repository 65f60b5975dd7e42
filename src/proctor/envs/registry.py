"""Environment registry: `make("household", **kwargs)`.

Built-in envs register with the `@register` decorator, in `ENVS` (a `proctor.registry.Registry`). Adapters for optional third-party packages are
registered by import path (`register_lazy`) so that nothing heavy is imported until the env is made, and
a missing extra is an `ImportError` naming the extra to install, raised when the env is resolved (`make`,
`check_spec`), before any episode: the modules the extra installs (`requires`) are looked for, not imported.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from proctor.envs.arguments import check_arguments
from proctor.envs.base import TextEnv
from proctor.registry import Registry


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
    #: the top-level modules the extra installs, each looked for before the adapter is imported
    requires: tuple[str, ...] = ()

    def factory(self) -> Callable[..., TextEnv]:
        """The env's class (its adapter module imported); a missing extra is an ImportError naming it."""
        if callable(self.target):
            return self.target
        for module in self.requires:
            if not _installed(module):
                raise self._missing_extra(f"no module named {module!r}")
        module_name, _, attr = self.target.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as e:
            if self.extra is None:
                raise
            raise self._missing_extra(str(e)) from e
        return getattr(module, attr)

    def _missing_extra(self, why: str) -> ImportError:
        return ImportError(f"environment {self.name!r} needs the optional extra '{self.extra}' ({why}): "
                           f'pip install -e ".[{self.extra}]"')


def _installed(module: str) -> bool:
    """Whether `module` can be imported, found without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


#: the environments by name
ENVS = Registry[EnvEntry]("environment")


def register(name: str, description: str = "") -> Callable[[type[TextEnv]], type[TextEnv]]:
    """Class decorator: register a built-in env under `name` (also sets `cls.name`)."""

    def deco(cls: type[TextEnv]) -> type[TextEnv]:
        ENVS.add(name, EnvEntry(name, cls, None, description or (cls.__doc__ or "").strip().splitlines()[0]))
        cls.name = name
        return cls

    return deco


def register_lazy(name: str, target: str, extra: str | None, description: str,
                  requires: tuple[str, ...] = ()) -> None:
    """Register an env by `module:attr` import path, imported only when made; `requires`: the modules its
    extra installs (a missing one is an error naming the extra before anything is imported)."""
    ENVS.add(name, EnvEntry(name, target, extra, description, tuple(requires)))


def entry(name: str) -> EnvEntry:
    """The registry entry of env `name`; a KeyError naming the closest and the known envs."""
    return ENVS[name]


def check_spec(name: str, kwargs: Mapping[str, Any]) -> Callable[..., TextEnv]:
    """The factory of env `name`, after checking what building it with `kwargs` needs: a KeyError for an
    unknown env, an ImportError naming a missing extra, a ValueError naming a bad argument
    (`proctor.envs.arguments`). Builds nothing."""
    factory = entry(name).factory()
    check_arguments(name, factory, kwargs)
    return factory


def make(name: str, **kwargs: Any) -> TextEnv:
    """Build a registered environment (its spec checked first: `check_spec`)."""
    return check_spec(name, kwargs)(**kwargs)


def entries() -> dict[str, EnvEntry]:
    return ENVS.sorted()


def import_env_module(name: str) -> None:
    """Import the module that registers a user's env (`--env-module`, `env_module:`): a dotted module name, looked
    for in the current folder too (as `python -m` does), so `my_env.py` beside the command needs no PYTHONPATH;
    or a `.py` file's path, imported under its file name from its folder. Worker processes inherit the path. An
    ImportError names the module and where it was looked for."""
    import os
    import sys
    from pathlib import Path

    if name.endswith(".py") or os.sep in name:
        path = Path(name).resolve()
        if not path.is_file():
            raise ModuleNotFoundError(f"env module file {name} does not exist", name=path.stem)
        folder, name = str(path.parent), path.stem
        loaded = sys.modules.get(name)
        if loaded is not None and Path(getattr(loaded, "__file__", None) or "").resolve() != path:
            raise ImportError(f"env module file {path}: a module named {name!r} is already imported from "
                              f"{getattr(loaded, '__file__', None) or 'elsewhere'}; rename the file")
    else:
        folder = os.getcwd()
    if folder not in sys.path:
        sys.path.insert(0, folder)
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name != name.split(".")[0] and e.name != name:
            raise  # the module exists; one of its own imports is missing
        raise ModuleNotFoundError(f"env module {name!r} not found in the current folder ({folder}) or on the "
                                  "import path", name=e.name) from None

"""The one registry helper: a typed name → entry mapping that every registry of the package is (envs, experts,
agents, credit methods, search methods, trainers, PRM objectives, the RL math families).

    CREDIT = Registry[Method]("credit method")

    @CREDIT.register("mc-q")          # a decorator adds the decorated object ...
    def run_mc_q(...): ...

    CREDIT.add("mc-v", Method(...))   # ... or `add` an entry made by the registry's module
    CREDIT["mc_q"]                    # UnknownName: unknown credit method 'mc_q' (did you mean 'mc-q'?); known: ...

A registry is a read-only `Mapping` in registration order (`names()` lists the names sorted); an unknown name is an
`UnknownName`, both a `KeyError` and a `ValueError` (so pydantic validators report it as a field error), whose
message names the kind of entry, the closest known name (`did_you_mean`, the hint of every message about an unknown
name or field) and every known one. `validate_config` validates an entry's
parameters against its pydantic config in one line naming the entry and the field.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)


class UnknownName(KeyError, ValueError):
    """A name that is not in a registry (its message says which names are)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def did_you_mean(name: object, known: Iterable[str]) -> str:
    """" (did you mean 'x'?)" with the known name closest to `name`, or "" when none is close: the one hint of
    every message about an unknown name or field."""
    close = difflib.get_close_matches(name, list(known), 1) if isinstance(name, str) else []
    return f" (did you mean {close[0]!r}?)" if close else ""


def unknown_name(what: str, name: object, known: list[str]) -> UnknownName:
    """The error for `name`, not among the `known` names of `what`: with the closest name, and every known one."""
    return UnknownName(f"unknown {what} {name!r}{did_you_mean(name, known)}; known: {', '.join(known) or 'none'}")


class Registry(Mapping[str, T]):
    """Named entries of one kind; `what` names the kind in messages ("credit method")."""

    def __init__(self, what: str, entries: Mapping[str, T] | None = None):
        self.what = what
        self._entries: dict[str, T] = {}
        for name, entry in (entries or {}).items():
            self.add(name, entry)

    def add(self, name: str, entry: T) -> T:
        """Register `entry` as `name`; a name registered twice is an error."""
        if name in self._entries:
            raise ValueError(f"{self.what} {name!r} is already registered")
        self._entries[name] = entry
        return entry

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator: register the decorated object as `name` (and return it unchanged)."""
        return lambda entry: self.add(name, entry)

    def __getitem__(self, name: str) -> T:
        try:
            return self._entries[name]
        except KeyError:
            raise unknown_name(self.what, name, self.names()) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def names(self) -> list[str]:
        """The registered names, sorted."""
        return sorted(self._entries)

    def sorted(self) -> dict[str, T]:
        """The entries by name, sorted (for listings)."""
        return dict(sorted(self._entries.items()))

    def __repr__(self) -> str:
        return f"Registry({self.what!r}: {', '.join(self._entries)})"


def validate_config(config: type[M], params: Mapping[str, Any] | BaseModel | None, where: str) -> M:
    """`params` validated as `config` (a config already made passes as it is); a ValueError of one line naming
    `where` ("search method 'beam'") and each bad field."""
    if isinstance(params, config):
        return params
    if isinstance(params, BaseModel):
        params = params.model_dump()
    try:
        return config.model_validate(dict(params or {}))
    except ValidationError as e:
        parts = [f"{'.'.join(str(x) for x in err['loc']) or '<config>'}: {err['msg']}" for err in e.errors()]
        raise ValueError(f"bad parameters for {where}: {'; '.join(parts)}") from None

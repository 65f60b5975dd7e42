"""Registry of named credit methods: each is a runner plus a pydantic config of its parameters.

    run_method("mc-q", Sources(trajectories), {"gamma": 0.9})   # -> MethodResult(records, dropped)

A family file registers its runners with `@register_method(name, Config, ...)`; `proctor.credit` imports
every family, so importing the package fills the registry.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from proctor.credit.records import Record
from proctor.trajectory import Trajectory

#: V(s_t) for every step t of a trajectory, on the ±1 return scale (or [0,1] with value_scale="unit")
ValueFn = Callable[[Trajectory], Sequence[float]]


@dataclass(frozen=True)
class Sources:
    """What a method reads: the trajectories, and for some methods more (see each method's `needs`).

    `completions`: rollouts continued from prefixes of `trajectories` (layout in `proctor.credit.completions`).
    `policy`: policy rollouts (inverse PRM negatives). `value`: a value function (shaping).
    """

    trajectories: Sequence[Trajectory]
    completions: Sequence[Trajectory] | None = None
    policy: Sequence[Trajectory] | None = None
    value: ValueFn | None = None


@dataclass
class MethodResult:
    """A method's records; `record_type` names their kind even when there are none (an empty table still
    has its columns); `notes["empty"]` says why a method found nothing to label."""

    records: list[Record]
    dropped: int = 0
    notes: dict[str, Any] = field(default_factory=dict)
    record_type: type | None = None


Runner = Callable[[Sources, Any], MethodResult]


@dataclass(frozen=True)
class Method:
    name: str
    config: type[BaseModel]
    run: Runner
    description: str
    needs: tuple[str, ...] = ()


_METHODS: dict[str, Method] = {}


def register_method(name: str, config: type[BaseModel], description: str,
                    needs: tuple[str, ...] = ()) -> Callable[[Runner], Runner]:
    """Decorator: register `run(sources, config) -> MethodResult` under `name`."""

    def deco(run: Runner) -> Runner:
        if name in _METHODS:
            raise ValueError(f"credit method {name!r} is already registered")
        _METHODS[name] = Method(name, config, run, description, needs)
        return run

    return deco


def methods() -> dict[str, Method]:
    return dict(sorted(_METHODS.items()))


def get_method(name: str) -> Method:
    try:
        return _METHODS[name]
    except KeyError:
        raise KeyError(f"unknown credit method {name!r}; known: {', '.join(sorted(_METHODS))}") from None


def make_config(name: str, params: Mapping[str, Any] | BaseModel | None = None) -> BaseModel:
    """Validate `params` against the method's config; errors name the method and the field."""
    method = get_method(name)
    if isinstance(params, method.config):
        return params
    try:
        return method.config.model_validate(dict(params or {}))
    except ValidationError as e:
        parts = [f"{'.'.join(str(x) for x in err['loc'])}: {err['msg']}" for err in e.errors()]
        raise ValueError(f"bad parameters for method {name!r}: {'; '.join(parts)}") from None


def run_method(name: str, sources: Sources, params: Mapping[str, Any] | BaseModel | None = None
               ) -> MethodResult:
    """Run a registered method on `sources` with validated parameters."""
    method = get_method(name)
    cfg = make_config(name, params)
    for need in method.needs:
        if getattr(sources, need) is None:
            raise ValueError(f"method {name!r} needs {need!r} (see its documentation)")
    return method.run(sources, cfg)

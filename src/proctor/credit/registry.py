"""Registry of named credit methods: each is a runner plus a pydantic config of its parameters.

    run_method("mc-q", Sources(trajectories), {"gamma": 0.9})   # -> MethodResult(records, dropped)

A family file registers its runners with `@register_method(name, Config, ...)` in `METHODS` (a
`proctor.registry.Registry`); `proctor.credit` imports every family, so importing the package fills it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from proctor.credit.records import Record
from proctor.registry import Registry, validate_config
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


#: the credit methods by name
METHODS = Registry[Method]("credit method")


def register_method(name: str, config: type[BaseModel], description: str,
                    needs: tuple[str, ...] = ()) -> Callable[[Runner], Runner]:
    """Decorator: register `run(sources, config) -> MethodResult` under `name`."""

    def deco(run: Runner) -> Runner:
        METHODS.add(name, Method(name, config, run, description, needs))
        return run

    return deco


def methods() -> dict[str, Method]:
    return METHODS.sorted()


def get_method(name: str) -> Method:
    return METHODS[name]


def make_config(name: str, params: Mapping[str, Any] | BaseModel | None = None) -> BaseModel:
    """Validate `params` against the method's config; errors name the method and the field."""
    return validate_config(get_method(name).config, params, f"method {name!r}")


def run_method(name: str, sources: Sources, params: Mapping[str, Any] | BaseModel | None = None
               ) -> MethodResult:
    """Run a registered method on `sources` with validated parameters."""
    method = get_method(name)
    cfg = make_config(name, params)
    for need in method.needs:
        if getattr(sources, need) is None:
            raise ValueError(f"method {name!r} needs {need!r} (see its documentation)")
    return method.run(sources, cfg)

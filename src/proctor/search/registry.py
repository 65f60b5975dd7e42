"""Registry of search methods: each is a validated pydantic config (a `SearchSpec` subclass) plus a runner.

    run_search(SearchRunConfig(env="household", tasks=20, out="runs/beam",
                               search={"method": "beam", "agent": {"kind": "random"}, "prm": "runs/prm",
                                       "beams": 4, "expansions": 4}))

A method module registers its runner with `@register_search(name, Config, description)` in `METHODS` (a
`proctor.registry.Registry`); `proctor.search` imports every method module, so importing the package fills it.
A runner `run(config, job)` plays the job's (task, sample) pairs that are not yet in the store and appends one
trajectory per pair, with its budget on `Trajectory.meta["budget"]` (`proctor.search.budget`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from proctor.envs.registry import EnvSpec
from proctor.envs.versions import env_versions
from proctor.episode import WorkItem
from proctor.prm.ref import PRMRef
from proctor.registry import Registry, validate_config
from proctor.rollout.engine import open_store, plan
from proctor.store import TrajectoryStore


class SearchSpec(BaseModel):
    """Base of every search method's config: `method` names the registry entry."""

    model_config = ConfigDict(extra="forbid")

    method: str = Field(description="the search method: a name in the search registry (`proctor eval --help` "
                        "lists them), which selects the config's other fields")

    def describe(self) -> str:
        """The method with all its parameters (the store's run identity: a resumed run must match it)."""
        fields = self.model_dump(mode="json", exclude={"method"}, serialize_as_any=True)  # nested agents whole
        return f"{self.method} {json.dumps(fields, sort_keys=True)}"


class PRMSearchSpec(PRMRef, SearchSpec):
    """The fields of every method that scores with a PRM (`PRMRef`'s)."""


@dataclass
class SearchJob:
    """What a runner plays: (task, sample) pairs of one env split, into one trajectory store."""

    spec: EnvSpec
    task_ids: list[str]
    samples: int
    out: Path
    split: str = "test"
    seed: int = 0
    batch: int = 8
    workers: int = 0
    backend: str = "local"
    step_timeout: float | None = 60.0
    progress: bool = True

    def env_spec(self, needs_expert_hints: bool) -> EnvSpec:
        """The env spec, with expert hints on when the policy reads them (as the rollout engine does)."""
        if needs_expert_hints and not self.spec.kwargs.get("expert_hints"):
            return EnvSpec(self.spec.name, {**self.spec.kwargs, "expert_hints": True})
        return self.spec

    def identity(self, spec: EnvSpec, agent: str, start_from: str | None = None) -> dict[str, Any]:
        """The store's run identity, with the fields `proctor.rollout.engine.open_store` checks, and the versions
        of the env's packages."""
        return {"env": spec.name, "env_kwargs": spec.kwargs, "split": self.split, "seed": self.seed,
                "agent": agent, "start_from": start_from, "env_versions": env_versions(spec.name)}

    def open(self, spec: EnvSpec, describe: str) -> tuple[TrajectoryStore, list[WorkItem]]:
        """The output store (locked; a store of another run is an error) and the pairs still to play."""
        store = open_store(self.out, self.identity(spec, describe)).lock()
        done = {t.key for t in store}
        return store, plan(self.task_ids, self.samples, self.seed, done)


Runner = Callable[[Any, SearchJob], None]


@dataclass(frozen=True)
class SearchMethod:
    name: str
    config: type[SearchSpec]
    run: Runner
    description: str


#: the search methods by name
METHODS = Registry[SearchMethod]("search method")


def register_search(name: str, config: type[SearchSpec], description: str) -> Callable[[Runner], Runner]:
    """Decorator: register `run(config, job)` as search method `name` with its config class."""

    def deco(run: Runner) -> Runner:
        METHODS.add(name, SearchMethod(name, config, run, description))
        return run

    return deco


def search_methods() -> dict[str, SearchMethod]:
    return METHODS.sorted()


def get_search(name: str) -> SearchMethod:
    return METHODS[name]


def search_config(data: SearchSpec | Mapping[str, Any] | str) -> SearchSpec:
    """Validate a search config: a dict with `method` (or a config already made); errors name the method and
    the field."""
    if isinstance(data, SearchSpec):
        return data
    if isinstance(data, str):
        data = {"method": data}
    if not isinstance(data, Mapping) or "method" not in data:
        raise ValueError(f"a search config needs a 'method' (one of {', '.join(METHODS.names())}), got {data!r}")
    method = get_search(data["method"])
    return validate_config(method.config, data, f"search method {method.name!r}")


#: a nested search config (a dict with `method` in YAML)
SearchConfig = Annotated[SearchSpec, BeforeValidator(search_config)]

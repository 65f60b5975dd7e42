"""`make_pool`: the env pool of a run, in this process, in worker processes or in Ray actors (Ray itself is imported
when its pool starts). Apart from the pools (`proctor.rollout.pools`), which the worker modules build on, so that no
module imports one that imports it."""

from __future__ import annotations

from typing import Any

from proctor.envs.registry import EnvSpec
from proctor.rollout.pools import EnvPool, InProcessEnvPool
from proctor.rollout.ray_backend import RayEnvPool
from proctor.rollout.worker_process import ProcessEnvPool


def make_pool(spec: EnvSpec, n_slots: int, workers: int = 0, backend: str = "local",
              step_timeout: float | None = 60.0, **backend_options: Any) -> EnvPool:
    """`workers=0`: in-process; `workers>0`: that many worker processes (`backend="local"`) or Ray actors
    (`backend="ray"`, needs the `ray` extra)."""
    if backend == "ray":
        return RayEnvPool(spec, n_slots, max(1, workers), step_timeout, **backend_options)
    if backend != "local":
        raise ValueError(f"unknown rollout backend {backend!r}; choose 'local' or 'ray'")
    if workers <= 0:
        return InProcessEnvPool(spec, n_slots)
    return ProcessEnvPool(spec, n_slots, workers, step_timeout, **backend_options)



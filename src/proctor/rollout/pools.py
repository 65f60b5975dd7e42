"""`make_pool`: the env pool for a run (in-process, worker processes, or Ray actors)."""

from __future__ import annotations

from typing import Any

from proctor.envs.registry import EnvSpec
from proctor.rollout.workers import EnvPool, InProcessEnvPool, ProcessEnvPool


def make_pool(spec: EnvSpec, n_slots: int, workers: int = 0, backend: str = "local",
              step_timeout: float | None = 60.0, **backend_options: Any) -> EnvPool:
    """`workers=0`: in-process; `workers>0`: that many worker processes (`backend="local"`) or Ray actors
    (`backend="ray"`, needs the `ray` extra)."""
    if backend == "ray":
        from proctor.rollout.ray_backend import RayEnvPool

        return RayEnvPool(spec, n_slots, max(1, workers), step_timeout, **backend_options)
    if backend != "local":
        raise ValueError(f"unknown rollout backend {backend!r}; choose 'local' or 'ray'")
    if workers <= 0:
        return InProcessEnvPool(spec, n_slots)
    return ProcessEnvPool(spec, n_slots, workers, step_timeout, **backend_options)



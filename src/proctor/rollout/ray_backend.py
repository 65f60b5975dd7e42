"""Ray backend (extra `ray`): env workers as Ray actors; the agent stays local (a model or a remote server).

Same semantics as the process pool (`HostedEnvPool`): per-op timeouts, a dead or hung actor is killed and
replaced, the other envs it hosted are re-created by replay. Uses the running Ray cluster if there is one
(`ray.init()` was called, or `RAY_ADDRESS` is set), else starts a local one.
"""

from __future__ import annotations

import importlib
import sys
from collections import deque
from typing import Any

from proctor.envs.base import TextEnv
from proctor.envs.registry import EnvSpec
from proctor.rollout.env_ops import STARTUP_TIMEOUT_S, EnvOp, Reply, close_envs, run_op
from proctor.rollout.pools import HostedEnvPool


def _import_ray():
    try:
        import ray
    except ImportError as e:
        raise ImportError("the Ray rollout backend needs the optional extra 'ray': pip install 'proctor[ray]'") from e
    return ray


class EnvHost:
    """The body of one Ray actor: hosts envs by slot and runs ops on them, one call per op."""

    def __init__(self, spec: EnvSpec, module: str, sys_path: list[str]):
        for entry in reversed(sys_path):
            if entry not in sys.path:
                sys.path.insert(0, entry)
        importlib.import_module(module)
        self.spec = spec
        self.envs: dict[int, TextEnv] = {}

    def ready(self) -> bool:
        return True

    def run(self, op: EnvOp) -> Reply:
        return run_op(self.envs, self.spec, op)

    def close(self) -> None:
        close_envs(self.envs)


class RayEnvPool(HostedEnvPool):
    """Envs hosted by `workers` Ray actors, each reserving `cpus_per_worker` CPUs."""

    def __init__(self, spec: EnvSpec, n_slots: int, workers: int, step_timeout: float | None = 60.0,
                 cpus_per_worker: float = 1.0, address: str | None = None):
        super().__init__(spec, n_slots, workers, step_timeout)
        self._ray = _import_ray()
        if not self._ray.is_initialized():
            self._ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
        self._actor_cls = self._ray.remote(num_cpus=cpus_per_worker, max_restarts=0)(EnvHost)
        self._actors: dict[int, Any] = {}
        self._refs: dict[int, deque] = {}
        self._start(list(range(self.n_workers)))

    def _start(self, workers: list[int]) -> None:
        for w in workers:
            self._actors[w] = self._actor_cls.remote(self.spec, self.module, list(sys.path))
            self._refs[w] = deque()
        for w in workers:
            try:
                self._ray.get(self._actors[w].ready.remote(), timeout=STARTUP_TIMEOUT_S)
            except Exception as e:
                raise RuntimeError(f"Ray env actor {w} did not start: {type(e).__name__}: {e}") from e

    def _send(self, worker: int, ops: list[EnvOp]) -> None:
        actor = self._actors[worker]
        self._refs[worker].extend(actor.run.remote(op) for op in ops)

    def _receive(self, workers: list[int], timeout: float) -> list[tuple[int, Reply | str]]:
        heads = {self._refs[w][0]: w for w in workers if self._refs[w]}
        ready, _ = self._ray.wait(list(heads), num_returns=1, timeout=timeout)
        out: list[tuple[int, Reply | str]] = []
        for ref in ready:
            w = heads[ref]
            self._refs[w].popleft()
            try:
                out.append((w, self._ray.get(ref)))
            except self._ray.exceptions.RayActorError as e:
                out.append((w, f"env worker (Ray actor) died: {type(e).__name__}: {str(e)[:500]}"))
        return out

    def _kill(self, worker: int) -> None:
        self._ray.kill(self._actors.pop(worker), no_restart=True)
        self._refs.pop(worker, None)

    def close(self) -> None:
        for w in list(self._actors):
            try:
                self._ray.get(self._actors[w].close.remote(), timeout=10)
            except Exception:  # noqa: BLE001, S110 - best effort at shutdown; the actor is killed next
                pass
            self._ray.kill(self._actors.pop(w), no_restart=True)
        self._refs.clear()

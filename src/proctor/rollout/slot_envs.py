"""`SlotEnvs`: env slots that many threads use at once, each op answered on its own (the async engine's pool).

The lockstep pools (`proctor.rollout.pools`) queue ops for many slots and answer them all in one
`collect()`, so a slot waits for the slowest op of its batch. Here every slot has its own way in:

- `workers=0`: one `InProcessEnvPool` per slot; only the slot's own thread touches it.
- `workers=W`: W pools of one worker each (processes, or Ray actors); slot `s` lives on worker `s % W`,
  and an op runs as a one-op `collect()` under that worker's lock. A slot waits only for ops of slots on
  its own worker that were sent first (that worker steps its envs one at a time anyway), never for other
  workers. Each one-worker pool keeps every guarantee of `HostedEnvPool`: a hung op (no answer within
  `step_timeout`) or a dead worker gives an error reply for that op's slot; the worker is replaced and its
  other envs are re-created by replay, so the episodes of the other slots on it go on.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Self

from proctor.envs.registry import EnvSpec
from proctor.rollout.backends import make_pool
from proctor.rollout.env_ops import Reply
from proctor.rollout.pools import EnvPool, InProcessEnvPool


class SlotEnvs:
    """`n_slots` env slots; `reset`/`start`/`step` run one op for one slot and return its `Reply`."""

    def __init__(self, spec: EnvSpec, n_slots: int, workers: int = 0, backend: str = "local",
                 step_timeout: float | None = 60.0, **backend_options: Any):
        if n_slots < 1:
            raise ValueError(f"need at least one env slot, got {n_slots}")
        if backend not in ("local", "ray"):
            raise ValueError(f"unknown rollout backend {backend!r}; choose 'local' or 'ray'")
        self.n_slots = n_slots
        if workers <= 0 and backend == "local":
            self._pools: list[EnvPool] = [InProcessEnvPool(spec, 1) for _ in range(n_slots)]
            self._where = [(s, 0) for s in range(n_slots)]
        else:
            n_workers = min(max(1, workers), n_slots)
            sizes = [len(range(w, n_slots, n_workers)) for w in range(n_workers)]
            self._pools = _start_pools(spec, sizes, backend, step_timeout, backend_options)
            self._where = [(s % n_workers, s // n_workers) for s in range(n_slots)]
        self._locks = [threading.Lock() for _ in self._pools]

    @property
    def replacements(self) -> int:
        """Workers replaced so far (hung or dead), over all workers."""
        return sum(getattr(p, "replacements", 0) for p in self._pools)

    def reset(self, slot: int, task_id: str, seed: int) -> Reply:
        return self._run(slot, "reset", task_id, seed)

    def start(self, slot: int, task_id: str, seed: int, actions: list[str]) -> Reply:
        """Reset and replay `actions`; the reply's value is `(observation, info, done)`."""
        return self._run(slot, "start", task_id, seed, list(actions))

    def step(self, slot: int, action: str) -> Reply:
        return self._run(slot, "step", action)

    def release(self, slot: int) -> None:
        """The slot's episode is over (a replaced worker no longer re-creates its env)."""
        p, local = self._where[slot]
        with self._locks[p]:
            self._pools[p].release(local)

    def _run(self, slot: int, kind: str, *args: Any) -> Reply:
        p, local = self._where[slot]
        pool = self._pools[p]
        with self._locks[p]:
            getattr(pool, kind)(local, *args)
            reply = pool.collect()[local]
        return Reply(slot, reply.ok, reply.value, reply.seconds)

    def close(self) -> None:
        for pool, lock in zip(self._pools, self._locks, strict=True):
            with lock:
                pool.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _start_pools(spec: EnvSpec, sizes: list[int], backend: str, step_timeout: float | None,
                 backend_options: dict[str, Any]) -> list[EnvPool]:
    """One single-worker pool per entry of `sizes` (its number of slots). Local worker processes start in
    parallel (each pool waits for its worker to import the env); Ray actors one after another (one
    `ray.init`)."""

    def one(size: int) -> EnvPool:
        return make_pool(spec, size, 1, backend, step_timeout, **backend_options)

    if backend == "ray" or len(sizes) == 1:
        pools: list[EnvPool] = []
        try:
            for size in sizes:
                pools.append(one(size))
        except BaseException:
            _close_all(pools)
            raise
        return pools
    with ThreadPoolExecutor(max_workers=len(sizes), thread_name_prefix="proctor-env-start") as ex:
        futures = [ex.submit(one, size) for size in sizes]
    started = [f.result() for f in futures if f.exception() is None]
    errors = [f.exception() for f in futures if f.exception() is not None]
    if errors:
        _close_all(started)
        raise errors[0]
    return started


def _close_all(pools: list[EnvPool]) -> None:
    for pool in pools:
        try:
            pool.close()
        except Exception:  # noqa: BLE001, S110 - best effort while reporting the start failure
            pass


__all__ = ["SlotEnvs"]

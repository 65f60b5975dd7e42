"""The requests an env pool sends to the host of its envs (`EnvOp`), their answers (`Reply`), and `run_op`,
which executes one on a host's envs: the protocol shared by the in-process pool, worker processes
(`proctor.rollout.worker_process`) and Ray actors (`proctor.rollout.ray_backend`)."""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass
from typing import Any

from proctor.envs.base import TextEnv
from proctor.envs.registry import EnvSpec

#: how long a new worker may take to start (import proctor and the env's module) before it is declared dead
STARTUP_TIMEOUT_S = 180.0
_MAX_ERROR_CHARS = 4000


@dataclass
class EnvOp:
    """One request for one slot: `reset(task_id, seed)`, `step(action)`, `start(task_id, seed, actions)`
    (reset and replay an action prefix; replies `(observation, info, done)`, info with the reset's task keys), `fork(source_slot)` (this slot
    becomes an independent copy of another slot's live env, same worker), or the pool-internal
    `replay(task_id, seed, actions)` that re-creates envs on a replaced worker."""

    slot: int
    kind: str
    args: tuple
    timeout: float | None = None


@dataclass
class Reply:
    """The answer to an `EnvOp`: the env's return value (a step's is a `StepResult`), or an error message;
    `seconds` spent in the env."""

    slot: int
    ok: bool
    value: Any
    seconds: float = 0.0

    @property
    def error(self) -> str:
        return "" if self.ok else str(self.value)


def env_module(spec: EnvSpec) -> str:
    """The module that defines (and registers) the env, imported by workers before `spec.make()`."""
    from proctor.envs.registry import entries

    entry = entries().get(spec.name)
    if entry is None:
        raise KeyError(f"unknown environment {spec.name!r}; known: {', '.join(entries())}")
    module = entry.target.__module__ if callable(entry.target) else entry.target.partition(":")[0]
    if module == "__main__":
        raise ValueError(
            f"environment {spec.name!r} is defined in __main__, which worker processes cannot import; "
            "move it to a module or use workers=0"
        )
    return module


def run_op(envs: dict[int, TextEnv], spec: EnvSpec, op: EnvOp) -> Reply:
    """Execute one op on the slot's env (built from `spec` on first use); exceptions become error replies."""
    start = time.perf_counter()
    try:
        if op.kind in ("reset", "replay", "start"):
            env = envs.get(op.slot)
            if env is None:
                env = envs[op.slot] = spec.make()
            if op.kind == "reset":
                value = env.reset(*op.args)
            else:
                obs, info = env.replay(*op.args)
                value = (obs, {**env.task_info, **info}, env.done) if op.kind == "start" else (obs, info)
        elif op.kind == "fork":
            source = envs.get(op.args[0])
            if source is None:
                raise RuntimeError(f"slot {op.args[0]} has no env to fork")
            twin = source.clone()
            old = envs.pop(op.slot, None)
            if old is not None:
                old.close()
            envs[op.slot] = twin
            value = None
        elif op.kind == "step":
            if op.slot not in envs:
                raise RuntimeError(f"slot {op.slot} has no env (step before reset)")
            value = envs[op.slot].step(*op.args)
        else:
            raise ValueError(f"unknown env op {op.kind!r}")
        return Reply(op.slot, True, value, time.perf_counter() - start)
    except Exception as e:  # noqa: BLE001 - the env's failure is the result; the caller records it
        broken = envs.pop(op.slot, None)
        if broken is not None:
            try:
                broken.close()
            except Exception:  # noqa: BLE001, S110 - closing an env that already failed; its error is reported
                pass
        head = f"{type(e).__name__}: {e}"[:_MAX_ERROR_CHARS // 2]  # the first line says what failed
        message = f"{head}\n{traceback.format_exc()[-(_MAX_ERROR_CHARS - len(head)):]}"
        return Reply(op.slot, False, message, time.perf_counter() - start)


def close_envs(envs: dict[int, TextEnv]) -> None:
    for env in envs.values():
        try:
            env.close()
        except Exception:  # noqa: BLE001, S110 - best effort at shutdown
            pass
    envs.clear()

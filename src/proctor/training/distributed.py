"""Several training processes (torchrun / accelerate launch): sampling happens on the main process (rank 0)
and its result is broadcast to every process, which then trains on its shard of each batch (`engine`).

Rank 0 samples with the policy it holds; the processes hold the same weights after every optimizer step (DDP),
so the samples are the policy's whatever process draws them. Only the main process writes files and prints.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def is_main_process() -> bool:
    return int(os.environ.get("RANK", "0")) == 0


def _process_group() -> Any:
    """torch.distributed, initialised (gloo on the CPU, nccl on CUDA) by Accelerate's `PartialState`."""
    import torch
    from accelerate import PartialState

    PartialState(cpu=not torch.cuda.is_available())
    return torch.distributed


def on_main_then_broadcast(fn: Callable[[], T]) -> T:
    """`fn()` run on the main process and its (picklable) result sent to every process; `fn()` itself with one
    process. An exception on the main process is raised on every process, so none waits forever."""
    if world_size() == 1:
        return fn()
    dist = _process_group()
    box: list[Any] = [None]
    if is_main_process():
        try:
            box[0] = ("ok", fn())
        except Exception as e:  # noqa: BLE001 - re-raised below on every process
            box[0] = ("error", e)
    dist.broadcast_object_list(box, src=0)
    status, value = box[0]
    if status == "error":
        raise value
    return value


def barrier() -> None:
    """Wait for every process (a no-op with one)."""
    if world_size() > 1:
        _process_group().barrier()


def finish(wait: bool = True) -> None:
    """End a multi-process run: wait for every process (`wait`), then tear the process group down. A process
    that exits with its group alive can abort in the backend's destructor (gloo: "terminate called without an
    active exception"). Called by the `proctor` entry point after every command; `wait=False` after a failure,
    when the other processes may never reach the barrier. A no-op when torch was never imported."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.distributed.is_available() or not torch.distributed.is_initialized():
        return
    if wait:
        torch.distributed.barrier()
    torch.distributed.destroy_process_group()


def fresh_output_dir(folder: Path, alternatives: str = "") -> None:
    """Refuse a non-empty `folder` (trainers do not resume), then create it; every process checks before the
    main one writes to it. `alternatives`: what else the refusal offers (a trainer's way to write into it)."""
    if folder.exists() and any(folder.iterdir()):
        raise FileExistsError(f"{folder}: output_dir is not empty; choose a new folder{alternatives}")
    barrier()
    folder.mkdir(parents=True, exist_ok=True)

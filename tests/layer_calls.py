"""Counting the forward calls of one module class in a run (a global forward pre-hook), to see gradient
checkpointing at work: a checkpointed decoder layer runs its forward again in the backward pass, so its sub-modules'
forward calls grow by the training ones. (transformers checkpoints the layer's `forward`, not its `__call__`, so the
layer's own hooks fire once; and torch stops a recomputation once it has the tensors it needs, before the last
sub-module returns, so a pre-hook counts it where a forward hook may not.)"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch


@dataclass
class Calls:
    total: int = 0
    with_grad: int = 0  # calls with autograd recording (a training forward, or its recomputation)


@contextmanager
def forward_calls(class_name: str = "LlamaMLP") -> Iterator[Calls]:
    """The forward calls of every module of class `class_name` while the block runs."""
    calls = Calls()

    def hook(module: torch.nn.Module, args: object) -> None:
        if type(module).__name__ == class_name:
            calls.total += 1
            calls.with_grad += torch.is_grad_enabled()

    handle = torch.nn.modules.module.register_module_forward_pre_hook(hook)
    try:
        yield calls
    finally:
        handle.remove()

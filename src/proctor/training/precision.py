"""One precision policy for every trainer.

Trainable weights and optimizer state are float32 (a bf16 checkpoint, as Llama and Qwen ship, is upcast when
loaded for training); the forward and backward passes autocast to bf16 where the device supports it (CUDA with
bf16), and run in float32 on the CPU. Plain AdamW on bf16 weights loses every update smaller than the weight's
bf16 spacing: at lr 1e-6 one step changed 2% of N(0, 0.02) weights (float32: 100%), so pure-bf16 training is
only done when asked (`bf16-pure`), with a warning. Models are saved in float32 unless `save_dtype` says
otherwise (Micikevicius et al. 2018, "Mixed Precision Training": an fp32 master copy of the weights).
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any, Literal

from proctor.models.loading import cuda_bf16, inference_dtype, resolve_device

log = logging.getLogger(__name__)

#: the inference rules every loader shares (`proctor.models.loading`), re-used here by the trainers
__all__ = [
    "PRECISIONS",
    "Precision",
    "autocast",
    "autocast_dtype",
    "cuda_bf16",
    "inference_dtype",
    "resolve_device",
    "trainer_precision_args",
    "weights_dtype",
]

#: `auto`: bf16 autocast on a CUDA device with bf16, else float32; `fp32`: no autocast; `bf16` / `fp16`:
#: autocast to that type (fp32 master weights); `bf16-pure`: weights and optimizer state in bf16 (not advised)
Precision = Literal["auto", "fp32", "bf16", "fp16", "bf16-pure"]
PRECISIONS: tuple[str, ...] = ("auto", "fp32", "bf16", "fp16", "bf16-pure")

PURE_BF16_WARNING = ("precision bf16-pure: weights and optimizer state in bf16; AdamW updates smaller than a "
                     "weight's bf16 spacing are lost (at lr 1e-6 about 98% of them); use `auto` or `bf16` for "
                     "fp32 master weights")


def autocast_dtype(precision: str, device: str) -> str | None:
    """The autocast type of a precision on a device ("bfloat16", "float16" or None for float32 compute)."""
    if precision == "auto":
        return "bfloat16" if device.startswith("cuda") and cuda_bf16() else None
    return {"bf16": "bfloat16", "fp16": "float16"}.get(precision)


def weights_dtype(precision: str) -> str:
    """The dtype trainable weights are loaded and kept in: float32, except for `bf16-pure`."""
    if precision == "bf16-pure":
        log.warning(PURE_BF16_WARNING)
        return "bfloat16"
    return "float32"


def autocast(precision: str, device: str) -> contextlib.AbstractContextManager:
    """The autocast the engine's training forward runs under (`autocast_dtype`), for the passes outside the
    Trainer that must match it (old and reference log-probs: the first ratio is then 1); a null context for
    float32 compute."""
    import torch

    kind = autocast_dtype(precision, device)
    if kind is None:
        return contextlib.nullcontext()
    return torch.autocast(torch.device(device).type, dtype=getattr(torch, kind))


def trainer_precision_args(precision: str, device: str) -> dict[str, Any]:
    """The `TrainingArguments` that realise a precision on a device (`bf16` / `fp16` autocast flags)."""
    kind = autocast_dtype(precision, device)
    return {"bf16": kind == "bfloat16", "fp16": kind == "float16"}

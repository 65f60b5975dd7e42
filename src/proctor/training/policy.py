"""The model a trainer updates: any HF causal LM loaded for training under the precision policy, fully or with
LoRA adapters (peft), its frozen reference, and the saved `save_pretrained` folder every other verb loads.

With LoRA, `save_policy` writes the merged model (base weights + adapters) to the folder, so it loads like any
model, and the adapters alone to `<folder>/adapter/` (peft's format). The merge is done on a copy, so training
can go on with the adapters afterwards.
"""

from __future__ import annotations

import contextlib
import copy
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from proctor.models.loading import load, resolve_dtype
from proctor.training.precision import weights_dtype

ADAPTER_DIR = "adapter"


def is_peft(model: Any) -> bool:
    return hasattr(model, "peft_config") and hasattr(model, "merge_and_unload")


def load_policy(name_or_path: str | os.PathLike, *, lora: dict[str, Any] | None = None, precision: str = "auto",
                device: Any = None) -> tuple[torch.nn.Module, Any]:
    """(model, tokenizer) ready to train: the weights in float32 whatever the checkpoint's dtype (bf16 only
    for `precision: bf16-pure`); `lora` (LoraConfig keyword arguments, e.g. {"r": 8}) wraps the model with
    trainable adapters (the base weights frozen); None trains every weight."""
    model, tokenizer = load(name_or_path, dtype=weights_dtype(precision), device=device)
    if lora is not None:
        from peft import LoraConfig, get_peft_model

        try:
            config = LoraConfig(task_type="CAUSAL_LM", **lora)
        except TypeError as e:
            raise ValueError(f"lora: {e}") from None
        model = get_peft_model(model, config)
    return model, tokenizer


def trainable_parameters(model: torch.nn.Module) -> list[torch.nn.Parameter]:
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("the policy has no trainable parameters")
    return params


def frozen_copy(model: torch.nn.Module) -> torch.nn.Module:
    """A detached copy of `model` in eval mode with no trainable parameter: a target network that a trainer
    moves towards the online one by Polyak averaging (ArCHer's target critic). Not a KL reference: see
    `reference_logprobs_context`."""
    ref = copy.deepcopy(model).eval()
    for p in ref.parameters():
        p.requires_grad_(False)
    return ref


@contextlib.contextmanager
def adapters_disabled(model: Any) -> Iterator[Any]:
    """`model` with its LoRA adapters switched off (the base model, i.e. the starting policy: the KL reference
    without a second copy of the weights); a model without adapters is yielded as it is."""
    if is_peft(model):
        with model.disable_adapter():
            yield model
    else:
        yield model


def cast_state_dict(state_dict: dict[str, torch.Tensor], dtype: str) -> dict[str, torch.Tensor]:
    """Floating-point tensors in `dtype` (the others, e.g. integer buffers, as they are)."""
    target = resolve_dtype(dtype)
    return {k: v.to(target) if v.is_floating_point() else v for k, v in state_dict.items()}


def save_policy(model: torch.nn.Module, tokenizer: Any, folder: str | os.PathLike, *, save_dtype: str = "float32",
                state_dict: dict[str, torch.Tensor] | None = None) -> Path:
    """Write `model` (LoRA merged into a copy; adapters also to `adapter/`) and its tokenizer to `folder`, the
    weights in `save_dtype`. `state_dict`: the full state dict when the Trainer gathered it (FSDP / ZeRO-3,
    `saving_state_dict`); None: the model's own."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    if is_peft(model):
        model.save_pretrained(out / ADAPTER_DIR, safe_serialization=True, state_dict=state_dict)
        merged = copy.deepcopy(model).merge_and_unload()
        merged.save_pretrained(out, safe_serialization=True,
                               state_dict=cast_state_dict(merged.state_dict(), save_dtype))
    else:
        full = state_dict if state_dict is not None else model.state_dict()
        model.save_pretrained(out, safe_serialization=True, state_dict=cast_state_dict(full, save_dtype))
    if save_dtype != "float32":
        import json

        config = json.loads((out / "config.json").read_text())
        config["dtype"] = save_dtype
        (out / "config.json").write_text(json.dumps(config, indent=2))
    tokenizer.save_pretrained(out)
    return out


def save_trained(model: torch.nn.Module, tokenizer: Any, folder: str | os.PathLike, save_dtype: str,
                 trainer: Any = None) -> Path:
    """Save a trained model from every process's call: the full state dict gathered from the processes under
    FSDP / ZeRO-3 (`saving_state_dict`; `trainer` None: nothing trained, the model as it is), written by the main
    process (`save_policy`); returns once the folder is complete."""
    from proctor.training.distributed import barrier, is_main_process

    state_dict = saving_state_dict(trainer) if trainer is not None else None
    if is_main_process():
        unwrapped = trainer.accelerator.unwrap_model(trainer.model) if trainer is not None else model
        save_policy(unwrapped, tokenizer, folder, save_dtype=save_dtype, state_dict=state_dict)
    barrier()
    return Path(folder)


def saving_state_dict(trainer: Any) -> dict[str, torch.Tensor] | None:
    """The full state dict of a Trainer's model, gathered from every process under FSDP / DeepSpeed ZeRO-3
    (every process must call this); None when the model holds it whole (no sharding)."""
    if getattr(trainer, "is_fsdp_enabled", False) or getattr(trainer, "is_deepspeed_enabled", False):
        return trainer.accelerator.get_state_dict(trainer.model_wrapped)
    return None

"""The policy a trainer updates: any HF causal LM loaded for training, fully or with LoRA adapters (peft),
and saved as an ordinary `save_pretrained` folder (safetensors) that every other verb loads.

With LoRA, `save_policy` writes the merged model (base weights + adapters) to the folder, so it loads like any
model, and the adapters alone to `<folder>/adapter/` (peft's format). The merge is done on a copy, so
training can go on with the adapters afterwards.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import torch

from proctor.models.loading import load

ADAPTER_DIR = "adapter"


def is_peft(model: Any) -> bool:
    return hasattr(model, "peft_config") and hasattr(model, "merge_and_unload")


def load_policy(name_or_path: str | os.PathLike, *, lora: dict[str, Any] | None = None, dtype: Any = None,
                device: Any = None) -> tuple[torch.nn.Module, Any]:
    """(model, tokenizer) ready to train: `lora` (LoraConfig keyword arguments, e.g. {"r": 8}) wraps the model
    with trainable adapters (the base weights frozen); None trains every weight."""
    model, tokenizer = load(name_or_path, dtype=dtype, device=device)
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


def save_policy(model: torch.nn.Module, tokenizer: Any, folder: str | os.PathLike) -> Path:
    """Write `model` (LoRA merged into a copy; adapters also to `adapter/`) and its tokenizer to `folder`."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    if is_peft(model):
        model.save_pretrained(out / ADAPTER_DIR, safe_serialization=True)
        merged = copy.deepcopy(model).merge_and_unload()
        merged.save_pretrained(out, safe_serialization=True)
    else:
        model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    return out


def start_run(cfg: Any) -> tuple[torch.nn.Module, Any, str | None]:
    """A trainer's first steps: refuse a non-empty `cfg.output_dir` (trainers do not resume) and create it, seed
    torch with `cfg.seed`, load the starting policy `cfg.policy` (LoRA, dtype, device as the config says).
    Returns (policy, tokenizer, device)."""
    from proctor.models.loading import resolve_device

    if cfg.output_dir.exists() and any(cfg.output_dir.iterdir()):
        raise FileExistsError(f"{cfg.output_dir}: output_dir is not empty; choose a new folder")
    cfg.output_dir.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(cfg.seed)
    device = resolve_device(cfg.device)
    policy, tokenizer = load_policy(cfg.policy, lora=cfg.lora, dtype=cfg.dtype, device=device)
    return policy, tokenizer, device

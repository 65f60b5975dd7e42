"""Load any Hugging Face causal LM and its tokenizer, by hub name or local folder, ready for generation.

`load()` leaves the tokenizer padding on the left (what batched generation needs), guarantees a pad token,
and keeps a locally trained fast tokenizer's ids: a folder whose `tokenizer_config.json` declares the
generic fast class (`TokenizersBackend` / `PreTrainedTokenizerFast`) is loaded with that class, because
`AutoTokenizer` would otherwise rebuild some model types' tokenizers (qwen2) with different ids.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

GENERIC_FAST_CLASSES = ("TokenizersBackend", "PreTrainedTokenizerFast")


def resolve_dtype(dtype: Any):
    """`None`/"auto" → None (the checkpoint's own), a name like "bfloat16" → `torch.bfloat16`, a dtype as is."""
    import torch

    if dtype is None or dtype == "auto":
        return None
    if isinstance(dtype, torch.dtype):
        return dtype
    if isinstance(dtype, str) and isinstance(getattr(torch, dtype, None), torch.dtype):
        return getattr(torch, dtype)
    raise ValueError(f"unknown dtype {dtype!r}; use e.g. 'float32', 'bfloat16', 'float16' or 'auto'")


def resolve_device(device: Any) -> str | None:
    """None → leave the model where it is; "auto" → "cuda" when available, else "cpu"."""
    if device is None:
        return None
    if str(device) == "auto":
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    return str(device)


def _looks_local(name_or_path: str) -> bool:
    """A path rather than a hub id ("org/name" or "name"): absolute, relative-dotted, or deeper than 2 parts."""
    return os.path.isabs(name_or_path) or name_or_path.startswith((".", "~")) or name_or_path.count("/") > 1


def _offline_hint(name: str) -> str:
    return (
        f"could not load {name!r} from the Hugging Face hub (no network, or no such model). "
        f"On a machine with network run `huggingface-cli download {name}` (the cache is then used offline "
        f"with HF_HUB_OFFLINE=1), or pass a local model folder; for tests, build a tiny model with "
        f"`proctor.models.build_tiny(out_dir)`"
    )


def _declared_tokenizer_class(name_or_path: str) -> str | None:
    path = Path(name_or_path) / "tokenizer_config.json"
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text()).get("tokenizer_class")
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON ({e.msg})") from None


def load_tokenizer(name_or_path: str | os.PathLike, *, trust_remote_code: bool = False):
    """The tokenizer of a model (see module docstring), left-padded, with a pad token."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    name = str(name_or_path)
    declared = _declared_tokenizer_class(name)
    if declared in GENERIC_FAST_CLASSES and (Path(name) / "tokenizer.json").is_file():
        tok = PreTrainedTokenizerFast.from_pretrained(name)
    else:
        tok = AutoTokenizer.from_pretrained(name, trust_remote_code=trust_remote_code)
    return prepare_tokenizer(tok)


def prepare_tokenizer(tokenizer):
    """Pad on the left (for generation) and make sure there is a pad token (the EOS token if none)."""
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        if tokenizer.eos_token is None:
            raise ValueError(f"tokenizer {tokenizer.name_or_path!r} has neither a pad nor an EOS token")
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load(
    name_or_path: str | os.PathLike,
    *,
    dtype: Any = None,
    device: Any = None,
    trust_remote_code: bool = False,
) -> tuple[Any, Any]:
    """Load `(model, tokenizer)`: a causal LM (safetensors) in eval mode and its prepared tokenizer.

    `dtype`: None/"auto" (checkpoint dtype), a name ("bfloat16") or a torch dtype. `device`: None (CPU, as
    loaded), "auto", "cpu", "cuda", "cuda:1", ... Errors say what to do when a local folder is missing or
    a hub name cannot be fetched (offline).
    """
    from transformers import AutoModelForCausalLM

    name = str(name_or_path)
    local = Path(name).expanduser()
    if local.exists():
        if not (local / "config.json").is_file():
            raise FileNotFoundError(f"{local} is not a model folder (no config.json in it)")
        name = str(local)
    elif _looks_local(name):
        raise FileNotFoundError(
            f"no model folder at {name}; build a tiny one with `proctor.models.build_tiny({name!r})` "
            f"or give a hub name such as 'Qwen/Qwen2.5-0.5B-Instruct'"
        )
    try:
        tokenizer = load_tokenizer(name, trust_remote_code=trust_remote_code)
        model = AutoModelForCausalLM.from_pretrained(
            name, dtype=resolve_dtype(dtype), trust_remote_code=trust_remote_code, use_safetensors=True
        )
    except OSError as e:
        if local.exists():
            raise
        raise OSError(f"{_offline_hint(name)} ({e})") from e
    target = resolve_device(device)
    if target is not None:
        model.to(target)
    model.eval()
    if model.generation_config.pad_token_id is None:
        model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


def add_step_marker(tokenizer, model=None, marker: str | None = None) -> int:
    """Make sure the PRM step marker (`STEP_MARKER`) is one special token; resize `model`'s embeddings if
    it had to be added. Returns its id."""
    from proctor.models.tiny import STEP_MARKER

    marker = marker or STEP_MARKER
    ids = tokenizer.encode(marker, add_special_tokens=False)
    if len(ids) != 1:
        tokenizer.add_tokens([marker], special_tokens=True)
        if model is not None:
            model.resize_token_embeddings(len(tokenizer))
        ids = tokenizer.encode(marker, add_special_tokens=False)
    return ids[0]

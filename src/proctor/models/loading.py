"""Load any Hugging Face causal LM and its tokenizer, by hub name or local folder, ready for generation.

`load()` leaves the tokenizer padding on the left (what batched generation needs), guarantees a pad token,
and keeps a locally trained fast tokenizer's ids: a folder whose `tokenizer_config.json` declares the
generic fast class (`TokenizersBackend` / `PreTrainedTokenizerFast`) is loaded with that class, because
`AutoTokenizer` would otherwise rebuild some model types' tokenizers (qwen2) with different ids. `load()` and
`load_tokenizer()` also take a GGUF checkpoint (a `.gguf` file, or a folder holding exactly one), dequantized
into a plain model by `proctor.models.gguf`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from proctor.models.gguf import find_gguf, gguf_tokenizer, load_gguf

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


def resolve_device(device: Any) -> str:
    """`auto`/None → "cuda" when torch sees a GPU, else "cpu"; anything else as given. A CUDA device on a
    machine without one is one clear `ValueError`, not a traceback from deep inside torch."""
    import torch

    if device in (None, "auto"):
        return "cuda" if torch.cuda.is_available() else "cpu"
    if str(device).startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {device!r}: this torch build sees no CUDA device "
                         f"(torch {torch.__version__}); use device: auto or cpu")
    return str(device)


def cuda_bf16() -> bool:
    """Whether the default CUDA device computes in bf16 (Ampere or newer)."""
    import torch

    return torch.cuda.is_available() and torch.cuda.is_bf16_supported()


def inference_dtype(dtype: Any, device: str) -> Any:
    """The dtype a model is loaded in for inference (agents, PRM scorers): `auto` is bf16 on a CUDA device
    with bf16 and float32 elsewhere (never bf16 on a CPU); None keeps the checkpoint's; a name as given."""
    if dtype == "auto":
        return "bfloat16" if device.startswith("cuda") and cuda_bf16() else "float32"
    return dtype


def placement(device: Any, dtype: Any) -> tuple[str, Any]:
    """(device, dtype) for inference: `resolve_device(device)` and `inference_dtype(dtype, that device)`."""
    device = resolve_device(device)
    return device, inference_dtype(dtype, device)


def move_model(model: Any, device: Any) -> None:
    """Move a model object a caller made to `device`; `auto`/None leave it where the caller put it (a
    trainer's policy stays on the trainer's device)."""
    if device not in (None, "auto"):
        model.to(resolve_device(device))


def _looks_local(name_or_path: str) -> bool:
    """A path rather than a hub id ("org/name" or "name"): absolute, relative-dotted, deeper than 2 parts,
    not a valid repo id, or under a folder that exists here ("runs/tiny" when ./runs exists)."""
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    if os.path.isabs(name_or_path) or name_or_path.startswith((".", "~")) or name_or_path.count("/") > 1:
        return True
    if "/" in name_or_path and Path(name_or_path.split("/", 1)[0]).is_dir():
        return True
    try:
        validate_repo_id(name_or_path)
    except HFValidationError:
        return True
    return False


def hub_offline() -> bool:
    """Whether the Hugging Face hub is switched off (`HF_HUB_OFFLINE` / `TRANSFORMERS_OFFLINE` set)."""
    return any(os.environ.get(v, "").upper() in ("1", "ON", "YES", "TRUE")
               for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def _in_hub_cache(repo_id: str) -> bool:
    from huggingface_hub import try_to_load_from_cache

    return any(isinstance(try_to_load_from_cache(repo_id, f), str)
               for f in ("config.json", "tokenizer_config.json"))


def check_model_source(name_or_path: str | os.PathLike, *, need_config: bool = True) -> str:
    """The local folder or hub id to load, checked without touching the network: a local path that does
    not exist, a folder that is not a model (no config.json, with `need_config`), or a hub id that is not
    in the cache while the hub is switched off (`HF_HUB_OFFLINE`) is a `FileNotFoundError` at once."""
    name = str(name_or_path)
    local = Path(name).expanduser()
    if local.exists():
        if need_config and find_gguf(local) is not None:
            raise FileNotFoundError(f"{local} is a GGUF checkpoint, not a model folder; convert it once with "
                                    f"`proctor models convert {local} OUT_DIR` and use OUT_DIR")
        if not local.is_dir():
            raise FileNotFoundError(f"{local} is a file, not a model folder")
        if need_config and not (local / "config.json").is_file():
            raise FileNotFoundError(f"{local} is not a model folder (no config.json in it)")
        return str(local)
    offline = " (and the machine is offline: HF_HUB_OFFLINE is set)" if hub_offline() else ""
    if _looks_local(name):
        raise FileNotFoundError(
            f"no model folder at {name}: the path does not exist{offline}; build a tiny one with "
            f"`proctor models tiny --out {name}` or give a hub name such as 'Qwen/Qwen2.5-0.5B-Instruct'"
        )
    if offline and not _in_hub_cache(name):
        raise FileNotFoundError(
            f"{name!r}: no such local folder, and the machine is offline (HF_HUB_OFFLINE is set) with no copy "
            f"in the Hugging Face cache; give a local model folder, or download it where there is network"
        )
    return name


def _offline_hint(name: str) -> str:
    return (
        f"could not load {name!r} from the Hugging Face hub (no network, or no such model). "
        f"On a machine with network run `huggingface-cli download {name}` (the cache is then used offline "
        f"with HF_HUB_OFFLINE=1), or pass a local model folder; for tests, build a tiny model with "
        f"`proctor models tiny --out DIR`"
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

    gguf = find_gguf(name_or_path)
    if gguf is not None:
        return prepare_tokenizer(gguf_tokenizer(gguf))
    name = check_model_source(name_or_path, need_config=False)
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


def _load_pretrained(name_or_path: str | os.PathLike, dtype: Any, trust_remote_code: bool) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM

    name = check_model_source(name_or_path)
    try:
        tokenizer = load_tokenizer(name, trust_remote_code=trust_remote_code)
        model = AutoModelForCausalLM.from_pretrained(
            name, dtype=resolve_dtype(dtype), trust_remote_code=trust_remote_code, use_safetensors=True
        )
    except OSError as e:
        if Path(name).exists():
            raise
        raise OSError(f"{_offline_hint(name)} ({e})") from e
    return model, tokenizer


def load(
    name_or_path: str | os.PathLike,
    *,
    dtype: Any = "auto",
    device: Any = "auto",
    trust_remote_code: bool = False,
) -> tuple[Any, Any]:
    """Load `(model, tokenizer)`: a causal LM (safetensors) in eval mode on `device`, and its prepared tokenizer.

    `device`: "auto" (CUDA when torch sees one, else the CPU), "cpu", "cuda", "cuda:1", ... (`resolve_device`).
    `dtype`: "auto" (`inference_dtype`: bf16 on a CUDA device with bf16, else float32), None (the checkpoint's),
    a name ("bfloat16") or a torch dtype. Errors say what to do when a local folder is missing or a hub name
    cannot be fetched (offline). A GGUF checkpoint loads dequantized (float32 unless `dtype`).
    """
    device, dtype = placement(device, dtype)
    gguf = find_gguf(name_or_path)
    if gguf is not None:
        model, tokenizer = load_gguf(gguf, dtype)
        tokenizer = prepare_tokenizer(tokenizer)
    else:
        model, tokenizer = _load_pretrained(name_or_path, dtype, trust_remote_code)
    model.to(device)
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

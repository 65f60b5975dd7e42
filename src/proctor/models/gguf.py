"""GGUF checkpoints (llama.cpp's single-file format): load one as a plain float model, or convert it once to
an ordinary model folder.

transformers reads a `.gguf` file (`from_pretrained(folder, gguf_file=NAME)`, needs `pip install gguf`) and
dequantizes its weights, but the model it returns keeps its GGUF quantizer: `save_pretrained` refuses it
("quantized with gguf and is not serializable") and trainers treat it as quantized. `load_gguf` therefore
copies the dequantized weights into a fresh model built from the same config without its
`quantization_config`: a plain model that saves, trains and takes LoRA adapters like any other.
`convert_gguf` writes that model (safetensors) with the GGUF's tokenizer and chat template as a regular
folder, so later runs skip the slow dequantization and every loader (PRM backbones included) reads it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from pathlib import Path
from typing import Any

MARKER_FILE = "proctor_gguf.json"


def find_gguf(path: str | os.PathLike) -> Path | None:
    """The GGUF file `path` names: a `.gguf` file, or a folder without config.json holding exactly one;
    None when it is neither (a model folder, a hub name, a missing path)."""
    p = Path(path).expanduser()
    if p.is_file():
        return p if p.suffix.lower() == ".gguf" else None
    if not p.is_dir() or (p / "config.json").is_file():
        return None
    found = sorted(f for f in p.iterdir() if f.suffix.lower() == ".gguf" and f.is_file())
    if len(found) > 1:
        raise ValueError(f"{p} holds {len(found)} .gguf files ({', '.join(f.name for f in found)}); "
                         f"pass the path of the one to load")
    return found[0] if found else None


def _require_gguf() -> None:
    if importlib.util.find_spec("gguf") is None:
        raise ImportError("reading a GGUF checkpoint needs the gguf package: pip install gguf")


def gguf_tokenizer(file: str | os.PathLike) -> Any:
    """The tokenizer stored in a `.gguf` file, its chat template included (not yet prepared)."""
    from transformers import AutoTokenizer

    _require_gguf()
    file = Path(file)
    return AutoTokenizer.from_pretrained(str(file.parent), gguf_file=file.name)


def load_gguf(file: str | os.PathLike, dtype: Any = None) -> tuple[Any, Any]:
    """`(model, tokenizer)` from a `.gguf` file: the dequantized weights in a plain (not quantized) model of
    `dtype` (None: float32), the tokenizer with the file's chat template, neither yet prepared."""
    import torch
    from transformers import AutoModelForCausalLM

    from proctor.models.loading import resolve_dtype

    file = Path(file)
    tokenizer = gguf_tokenizer(file)
    gguf_model = AutoModelForCausalLM.from_pretrained(str(file.parent), gguf_file=file.name, dtype=torch.float32)
    config = gguf_model.config.to_dict()
    config.pop("quantization_config", None)
    model = AutoModelForCausalLM.from_config(type(gguf_model.config).from_dict(config), dtype=torch.float32)
    model.load_state_dict(gguf_model.state_dict(), strict=True)
    model.generation_config = gguf_model.generation_config
    target = resolve_dtype(dtype)
    if target is not None:
        model.to(target)
    return model, tokenizer


def convert_gguf(src: str | os.PathLike, out_dir: str | os.PathLike, dtype: str = "float32") -> Path:
    """Write the GGUF checkpoint `src` (a `.gguf` file or a folder holding one) as a regular model folder at
    `out_dir` (safetensors weights in `dtype`, tokenizer with its chat template; see module docstring);
    returns it. A folder this function already wrote from the same file and dtype is reused."""
    file = find_gguf(src)
    if file is None:
        what = "not a .gguf file nor a folder holding one" if Path(src).exists() else "no such file or folder"
        raise FileNotFoundError(f"{src}: {what}")
    from proctor.models.loading import resolve_dtype

    resolve_dtype(dtype)  # an unknown name fails before the slow load
    out = Path(out_dir)
    made = {"source": str(file.resolve()), "bytes": file.stat().st_size, "dtype": dtype}
    if (out / MARKER_FILE).is_file():
        if {k: v for k, v in json.loads((out / MARKER_FILE).read_text()).items() if k in made} != made:
            raise FileExistsError(f"{out} holds a conversion of another GGUF file or dtype; delete it or "
                                  f"choose another folder")
        return out
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise FileExistsError(f"{out} exists and is not an empty folder")
    model, tokenizer = load_gguf(file, dtype)
    tmp = out.parent / f".{out.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    made["parameters"] = sum(p.numel() for p in model.parameters())
    (tmp / MARKER_FILE).write_text(json.dumps(made, indent=2))
    if out.exists():
        out.rmdir()
    out.parent.mkdir(parents=True, exist_ok=True)
    os.replace(tmp, out)
    return out

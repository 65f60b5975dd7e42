"""Loading the PRM a search scores with (shared by every method's config)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from proctor.prm.protocol import StepScorer


def check_prm_folder(path: str) -> str:
    """A config validator: the PRM path must be a folder (a `proctor prm train` or TRL PRMTrainer output)."""
    if not Path(path).is_dir():
        raise ValueError(f"{path}: no PRM folder there")
    return path


def load_scorer(path: str, batch_size: int = 16, device: str = "auto", dtype: str | None = "auto",
                server: Any = None) -> StepScorer:
    """The scorer of the PRM saved in `path` (safetensors only): a `PRMScorer`, or a `LikelihoodScorer` for a
    likelihood PRM (`proctor.prm.likelihood`), on `device` in `dtype` (auto: CUDA when torch sees one, bf16
    there, else CPU float32), or on `server` (a `ServerRef`: vLLM serving the likelihood PRM's LM)."""
    from proctor.prm.likelihood import open_scorer

    return open_scorer(path, batch_size, device, dtype, server=server)

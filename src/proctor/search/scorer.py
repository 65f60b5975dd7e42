"""The PRM a search scores with: `PRMScoring`, the fields every PRM-guided config shares (the search methods' and
the `best-of-n` agent's), and loading its scorer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from proctor.agents.registry import Device, Dtype, ServerRef
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


class PRMScoring(BaseModel):
    """The PRM a config scores with: its folder, how many states one batched pass scores, where it runs."""

    model_config = ConfigDict(extra="forbid")

    prm: str = Field(description="PRM folder (`proctor prm train` output)")
    prm_batch: int = Field(default=16, ge=1, description="states scored together in one batched PRM pass")
    device: Device = "auto"
    dtype: Dtype = "auto"
    prm_server: ServerRef | None = Field(default=None, description="score on a server: vLLM serving a "
                                         "likelihood PRM's LM (prompt_logprobs; the PRM folder gives β, b, prompt and "
                                         "tokenizer), or `proctor prm serve` serving a PRM head")

    @field_validator("prm")
    @classmethod
    def _prm_folder(cls, v: str) -> str:
        return check_prm_folder(v)

    def scorer(self) -> StepScorer:
        return load_scorer(self.prm, self.prm_batch, self.device, self.dtype, self.prm_server)

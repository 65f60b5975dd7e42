"""`PRMRef`: which PRM a config scores with and how to reach it, each field declared once, and `PRMRef.open`, the
one way a PRM is opened (search, evaluation, the trainers, the integrations, `proctor prm score`).

A config whose PRM fields are `PRMRef`'s takes it as a base (the search methods, the `best-of-n` agent); one with
other keys or an optional PRM types its fields with `PRMServer` / `PRMBatch` (and `Device` / `Dtype`) and builds a
`PRMRef` where it scores (evaluation, the trainers, the integrations). Importing this module imports no model
library; `open` imports the scorer it returns.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from proctor.agents.registry import Device, Dtype, ServerRef
from proctor.prm.protocol import StepScorer

#: a served PRM: the one description of every config's `prm_server`
PRMServer = Annotated[ServerRef | None, Field(description="score on a server: vLLM serving a likelihood PRM's LM "
                                              "(prompt_logprobs; the PRM folder gives β, b, prompt and tokenizer), "
                                              "vLLM serving a PRM head on its pooling runner (`pooling: true`; the "
                                              "folder gives the tokenization), or `proctor prm serve` serving a PRM "
                                              "head (`prm` then only names it)")]
#: how much one batched PRM pass scores: the one description of `prm_batch` (and of the integrations'
#: `prm_batch_size`)
PRMBatch = Annotated[int, Field(ge=1, description="states (or, scoring stored trajectories, trajectories) scored "
                                "together in one batched PRM pass or request")]


def check_prm_folder(path: str) -> str:
    """The PRM path must be a folder (a `proctor prm train` / `train-likelihood` or TRL PRMTrainer output)."""
    if not Path(path).is_dir():
        raise ValueError(f"{path}: no PRM folder there")
    return path


class PRMRef(BaseModel):
    """Which PRM and how to reach it: a PRM folder of any kind (a head, a head trained on stepwise text, a
    likelihood PRM) on `device` in `dtype`, or a served PRM (`prm_server`); `prm_batch` at a time."""

    model_config = ConfigDict(extra="forbid")

    prm_server: PRMServer = None
    prm: str | None = Field(default=None, validate_default=True, description="PRM folder (`proctor prm train` / "
                            "`train-likelihood` output, or a TRL PRM); with `prm_server` serving a PRM head, only its "
                            "name")
    prm_batch: PRMBatch = 16
    device: Device = "auto"
    dtype: Dtype = "auto"

    @field_validator("prm", mode="before")
    @classmethod
    def _path_text(cls, v: Any) -> Any:
        return os.fspath(v) if isinstance(v, os.PathLike) else v

    @field_validator("prm")
    @classmethod
    def _reachable(cls, v: str | None, info: ValidationInfo) -> str | None:
        """A folder, unless `prm_server` (validated first) serves the PRM."""
        if info.data.get("prm_server") is None:
            if v is None:
                raise ValueError("a PRM folder is needed (or `prm_server`, a served PRM)")
            check_prm_folder(v)
        return v

    def open(self) -> StepScorer:
        """The PRM's scorer: a `LikelihoodScorer` for a likelihood PRM (in process, or its LM on the vLLM
        `prm_server`), a `RemotePRMScorer` for a head on `proctor prm serve`, else a head's `PRMScorer`, in process
        or, with `prm_server.pooling`, on vLLM's pooling runner (`proctor.prm.pooling.PooledPRMScorer`), inside a
        `TextStepScorer` when it was trained on stepwise text (`proctor.prm.text_scorer`). `device` auto: CUDA when
        torch sees one; `dtype` auto: bf16 on a CUDA device with bf16, else float32."""
        from proctor.prm.likelihood import LikelihoodScorer, is_likelihood_prm
        from proctor.training.precision import resolve_device

        server = self.prm_server
        if self.prm is not None and is_likelihood_prm(self.prm):
            if server is not None and server.pooling:
                raise ValueError(f"{self.prm} is a likelihood PRM, scored by prompt_logprobs: prm_server.pooling "
                                 "serves a PRM head")
            return LikelihoodScorer(self.prm, self.prm_batch, resolve_device(self.device), self.dtype, server=server)
        if server is not None and server.pooling:
            from proctor.prm.pooling import PooledPRMScorer

            if self.prm is None or not Path(self.prm).is_dir():
                raise ValueError(f"prm_server.pooling: a PRM head on vLLM is scored with its folder's tokenization; "
                                 f"`prm` must be that folder, not {self.prm!r}")
            scorer = PooledPRMScorer(self.prm, server.base_url, server.model, server.api_key_env, self.prm_batch)
        elif server is not None:
            from proctor.prm.remote import RemotePRMScorer

            return RemotePRMScorer(server.base_url, api_key_env=server.api_key_env, batch_size=self.prm_batch)
        else:
            from proctor.prm.model import ProcessRewardModel
            from proctor.prm.scoring import PRMScorer

            model = ProcessRewardModel.from_pretrained(self.prm, dtype=self.dtype, device=resolve_device(self.device))
            scorer = PRMScorer(model, batch_size=self.prm_batch)
        from proctor.prm.text_scorer import TextStepScorer

        return TextStepScorer(scorer) if scorer.prm.spec.trained_on == "text" else scorer


def open_scorer(path: str | Path, batch_size: int = 16, device: str | None = "auto", dtype: str | None = "auto",
                server: ServerRef | None = None) -> StepScorer:
    """The earlier call, `PRMRef(prm=path, prm_batch=batch_size, ...).open()`, which the old names
    `proctor.prm.likelihood.open_scorer` and `proctor.search.scorer.load_scorer` still reach (with a warning)."""
    return PRMRef(prm=path, prm_batch=batch_size, device=device or "auto", dtype=dtype, prm_server=server).open()

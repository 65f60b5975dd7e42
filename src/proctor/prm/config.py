"""The `proctor prm train CONFIG.yaml` configuration (pydantic; unknown keys are errors).

Example:

    model: {backbone: runs/tiny, head: scalar, dtype: auto, lora: {r: 8}}
    tokenization: {mode: marked, max_length: 2048}
    loss: bce
    data: {train: data/steps.jsonl, format: stepwise, eval: data/eval.jsonl}
    training: {output_dir: runs/prm, num_train_epochs: 1, learning_rate: 1.0e-5, report_to: none}

`training` is passed to `transformers.TrainingArguments` as is (checkpointing, resume, logging, report_to).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from proctor.prm.heads import HeadKind
from proctor.prm.tokenize import TokenizeConfig

LossName = Literal["bce", "mse", "progress_sum", "ce", "soft_ce"]
#: which head each loss trains (ALGORITHMS.md §7)
LOSS_HEADS: dict[str, tuple[str, ...]] = {
    "bce": ("scalar",),
    "mse": ("scalar",),
    "progress_sum": ("scalar",),
    "ce": ("classification", "reward_tokens"),
    "soft_ce": ("classification", "reward_tokens"),
}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ModelSection(_Strict):
    backbone: str = Field(description="HF hub name or local folder of the backbone LM")
    head: HeadKind = "scalar"
    dtype: str = "auto"
    gradient_checkpointing: bool = False
    lora: dict[str, Any] | None = Field(default=None, description="peft.LoraConfig keyword arguments")
    reward_tokens: tuple[str, str] = ("-", "+")
    trust_remote_code: bool = False


class DataSection(_Strict):
    train: str
    eval: str | None = None
    format: Literal["stepwise", "math_shepherd", "prm800k", "processbench", "trajectories"] = "stepwise"
    target: str | None = Field(default=None, description="trajectories: the Step.targets key to learn")
    allow_missing_targets: bool = False


class PRMTrainConfig(_Strict):
    model: ModelSection
    tokenization: TokenizeConfig = Field(default_factory=TokenizeConfig)
    loss: LossName = "bce"
    data: DataSection
    training: dict[str, Any] = Field(default_factory=dict)
    seed: int = 0

    @model_validator(mode="after")
    def _consistent(self) -> PRMTrainConfig:
        if self.model.head not in LOSS_HEADS[self.loss]:
            raise ValueError(
                f"loss {self.loss!r} trains a {' or '.join(LOSS_HEADS[self.loss])} head, "
                f"not {self.model.head!r}"
            )
        if self.data.format == "trajectories" and not self.data.target:
            raise ValueError("data.format 'trajectories' needs data.target (the Step.targets key)")
        if "output_dir" not in self.training:
            raise ValueError("training.output_dir is required")
        return self


def load_config(path: str | Path) -> PRMTrainConfig:
    """Read and validate a YAML config; errors name the file and the field."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise ValueError(f"{path}: not valid YAML ({e})") from None
    try:
        return PRMTrainConfig.model_validate(raw or {})
    except ValidationError as e:
        fields = "; ".join(
            f"{'.'.join(str(x) for x in err['loc']) or '<config>'}: {err['msg']}" for err in e.errors()
        )
        raise ValueError(f"{path}: {fields}") from None

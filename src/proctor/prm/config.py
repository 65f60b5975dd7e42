"""The `proctor prm train CONFIG.yaml` configuration (pydantic; unknown keys are errors).

Example:

    model: {backbone: runs/tiny, head: scalar, dtype: auto, lora: {r: 8}}
    tokenization: {mode: marked, max_length: 2048}
    loss: bce
    data: {train: data/steps.jsonl, format: stepwise, eval: data/eval.jsonl}
    packing: true
    training: {output_dir: runs/prm, num_train_epochs: 1, learning_rate: 1.0e-5, report_to: none}

`loss` names an objective of `proctor.prm.objectives` (its head and its data kind). Data formats:
`stepwise`, `math_shepherd`, `prm800k`, `processbench` (files of examples), `pairs` (preference pairs,
`records.PairExample` JSON/JSONL), `trajectories` (a TrajectoryStore whose steps hold `data.target`) and
`targets` (the `targets.parquet` of `proctor targets`, read with the trajectories in `data.trajectories`).
`packing` puts several examples in one row (`tokenize.pack`, attention kept within each example).
`training` is passed to `transformers.TrainingArguments` as is (checkpointing, resume, logging, report_to).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from proctor.prm.heads import HeadKind
from proctor.prm.objectives import OBJECTIVES
from proctor.prm.tokenize import TokenizeConfig

LossName = Literal["bce", "mse", "progress_sum", "ce", "soft_ce", "bradley_terry", "td_bce"]
#: which head each loss trains (docs/methods.md §7.2)
LOSS_HEADS: dict[str, tuple[str, ...]] = {name: o.heads for name, o in OBJECTIVES.items()}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ModelSection(_Strict):
    backbone: str = Field(description="HF hub name or local folder of the backbone LM")
    head: HeadKind = Field(default="scalar", description="scalar (one logit per step, σ for a score), "
                           "classification (two classes, TRL's format) or reward_tokens (the LM's logits at two "
                           "tokens)")
    dtype: str = Field(default="auto", description="dtype of the trained weights: auto = float32 (the precision "
                       "policy: fp32 weights and optimizer state; bf16 autocast on CUDA comes from `training`'s "
                       "bf16, on by default there), or a torch dtype name (bfloat16: pure bf16 weights, whose "
                       "small AdamW updates are lost)")
    gradient_checkpointing: bool = Field(default=False, description="recompute activations in the backward pass "
                                         "(also `training: {gradient_checkpointing: true}`)")
    lora: dict[str, Any] | None = Field(default=None, description="peft.LoraConfig keyword arguments")
    reward_tokens: tuple[str, str] = Field(default=("-", "+"), description="reward_tokens head: the (wrong, "
                                           "correct) tokens whose logits give the score")
    trust_remote_code: bool = Field(default=False, description="let transformers run the backbone's own code "
                                    "from its repository (only for a backbone you trust)")


class DataSection(_Strict):
    train: str = Field(description="the training data: a file of examples (stepwise, math_shepherd, prm800k, "
                       "processbench, pairs), a trajectory store (trajectories) or a targets.parquet (targets)")
    eval: str | None = None
    format: Literal[
        "stepwise", "math_shepherd", "prm800k", "processbench", "trajectories", "pairs", "targets"
    ] = Field(default="stepwise", description="what `train` holds: stepwise text in one of four file formats, "
              "trajectories with step targets, preference pairs, or the records of `proctor targets`")
    target: str | None = Field(default=None, description="trajectories: the Step.targets key to learn")
    allow_missing_targets: bool = Field(default=False, description="trajectories: a step without `target` is "
                                        "scored, not supervised; false: it is an error naming the step")
    trajectories: list[str] = Field(
        default_factory=list, description="targets: the trajectory stores / Parquet files the records name"
    )
    unlabelled_rows: Literal["error", "keep", "skip"] = Field(
        default="error",
        description="an example whose labelled steps truncation cuts away: an error naming its row, 'keep' it "
        "with no labels (TRL's behaviour: scored, not supervised), or 'skip' it (counted in the output)",
    )
    score_at: Literal["action", "state"] = Field(
        default="action",
        description="trajectories/targets: read the score after each action (PRM, Q) or at the end of each "
        "state (a value model V(s))",
    )


class PRMTrainConfig(_Strict):
    model: ModelSection = Field(description="the backbone and its head")
    tokenization: TokenizeConfig = Field(default_factory=TokenizeConfig, description="how examples become "
                                         "tokens, and where each step's label sits")
    loss: LossName = Field(default="bce", description="the objective (docs/methods.md §7): bce or mse on step "
                           "targets (scalar head), ce or soft_ce (two-class heads), bradley_terry on pairs, "
                           "progress_sum on outcomes (SPA), td_bce on transitions (inverse PRM)")
    gamma: float = Field(default=0.95, ge=0.0, le=1.0, description="td_bce: discount of Q(s', a')")
    data: DataSection = Field(description="the training (and held-out) data and its format")
    packing: bool = Field(default=False, description="put several examples in one row (attention kept within "
                          "each example) instead of padding each")
    pack_width: int | None = Field(default=None, gt=0, description="packed row length (default: longest)")
    training: dict[str, Any] = Field(default_factory=dict)
    seed: int = 0

    @model_validator(mode="after")
    def _consistent(self) -> PRMTrainConfig:
        if self.model.head not in LOSS_HEADS[self.loss]:
            raise ValueError(
                f"loss {self.loss!r} trains a {' or '.join(LOSS_HEADS[self.loss])} head, "
                f"not {self.model.head!r}"
            )
        fmt, pairs = self.data.format, OBJECTIVES[self.loss].data == "pairs"
        if fmt == "trajectories" and not self.data.target and self.loss != "progress_sum":
            raise ValueError("data.format 'trajectories' needs data.target (the Step.targets key)")
        if pairs and fmt not in ("pairs", "targets"):
            raise ValueError(f"loss {self.loss!r} reads preference pairs: data.format 'pairs' or 'targets'")
        if fmt == "pairs" and not pairs:
            raise ValueError(
                f"data.format 'pairs' holds preference pairs, which loss {self.loss!r} cannot use"
            )
        if fmt == "targets" and not self.data.trajectories:
            raise ValueError("data.format 'targets' needs data.trajectories (the stores the records name)")
        if self.data.score_at == "state" and fmt not in ("trajectories", "targets"):
            raise ValueError(
                "data.score_at 'state' renders trajectories: data.format 'trajectories'/'targets'"
            )
        if "output_dir" not in self.training:
            raise ValueError("training.output_dir is required")
        return self


def load_config(path: str | Path) -> PRMTrainConfig:
    """Read and validate a YAML config; errors name the file and the field."""
    from proctor.yaml_config import read_yaml_config

    path = Path(path)
    raw = read_yaml_config(path)
    try:
        return PRMTrainConfig.model_validate(raw)
    except ValidationError as e:
        fields = "; ".join(
            f"{'.'.join(str(x) for x in err['loc']) or '<config>'}: {err['msg']}" for err in e.errors()
        )
        raise ValueError(f"{path}: {fields}") from None

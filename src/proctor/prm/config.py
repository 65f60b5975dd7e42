"""The `proctor prm train CONFIG.yaml` configuration (pydantic; unknown keys are errors).

Example:

    model: {backbone: runs/tiny, head: scalar, lora: {r: 8}}
    tokenization: {mode: marked, max_length: 2048}
    loss: bce
    data: {train: data/steps.jsonl, format: stepwise, eval: data/eval.jsonl}
    packing: true
    output_dir: runs/prm
    steps: 500
    batch_size: 8
    learning_rate: 3.0e-4

`loss` names an objective of `proctor.prm.objectives` (its head and its data kind). Data formats:
`stepwise`, `math_shepherd`, `prm800k`, `processbench` (files of examples), `pairs` (preference pairs,
`records.PairExample` JSON/JSONL), `trajectories` (a TrajectoryStore whose steps hold `data.target`) and
`targets` (the `targets.parquet` of `proctor targets`, read with the trajectories in `data.trajectories`).
`packing` puts several examples in one row (`tokenize.pack`, attention kept within each example).
The optimisation fields are every trainer's (`proctor.training.config.OptimizationConfig`: precision, device,
gradient accumulation and checkpointing, `training_args` for any other `TrainingArguments` field).

A config written for the earlier trainer (a `training:` section of `TrainingArguments`, `model.dtype`,
`model.gradient_checkpointing`) still loads: each old field is read as its new one, with a one-line note naming
it (`upgrade_old_fields`).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from proctor.prm.heads import HeadKind
from proctor.prm.objectives import OBJECTIVES
from proctor.prm.tokenize import TokenizeConfig
from proctor.training.config import RENAMED_FIELDS, OptimizationConfig

log = logging.getLogger(__name__)

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
    lora: dict[str, Any] | None = Field(default=None, description="peft.LoraConfig keyword arguments")
    reward_tokens: tuple[str, str] = Field(default=("-", "+"), description="reward_tokens head: the (wrong, "
                                           "correct) tokens whose logits give the score")
    trust_remote_code: bool = Field(default=False, description="let transformers run the backbone's own code "
                                    "from its repository (only for a backbone you trust)")


class DataSection(_Strict):
    train: str = Field(description="the training data: a file of examples (stepwise, math_shepherd, prm800k, "
                       "processbench, pairs), a trajectory store (trajectories) or a targets.parquet (targets)")
    eval: str | None = Field(default=None, description="held-out data in the training data's format, whose loss "
                             "is computed after training (`eval_loss`)")
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


class PRMTrainConfig(OptimizationConfig):
    """A PRM head's training (see module docstring); the defaults of `steps`/`epochs`, `batch_size`,
    `learning_rate` and the schedule are the earlier trainer's (transformers' `TrainingArguments` defaults)."""

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
    output_dir: Path = Field(description="where the PRM folder is written: a new or empty folder (`proctor prm "
                             "train --overwrite` writes over one, `--resume` continues its checkpoints)")
    steps: int | None = Field(default=None, ge=1, description="optimizer steps (None: `epochs` passes over the "
                              "training examples)")
    epochs: int = Field(default=3, ge=1, description="passes over the training examples when `steps` is None")
    batch_size: int = Field(default=8, ge=1, description="examples (or preference pairs) per optimizer step: the "
                            "global batch, split between the processes and the gradient accumulation steps")
    learning_rate: float = Field(default=5e-5, gt=0, description="peak learning rate of AdamW")
    lr_scheduler_type: str = Field(default="linear", description="a transformers scheduler name: linear (decay to "
                                   "0 after the warm-up), cosine, constant_with_warmup, ...")

    @model_validator(mode="before")
    @classmethod
    def _old_fields(cls, data: Any) -> Any:
        return upgrade_old_fields(data) if isinstance(data, dict) else data

    def inputs(self) -> list[tuple[str, str, bool]]:
        """What training reads, as (field, path, whether it may be a hub name): the backbone (a folder or a hub
        name), the training and held-out data, and the stores the records of `targets` data name."""
        data = [("data.train", self.data.train), ("data.eval", self.data.eval),
                *((f"data.trajectories[{i}]", p) for i, p in enumerate(self.data.trajectories))]
        return [("model.backbone", self.model.backbone, True), *((k, v, False) for k, v in data if v is not None)]

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
        return self


#: the earlier `training:` keys (TrainingArguments) that are fields of the config now, and their names
TRAINING_FIELDS = {
    "output_dir": "output_dir", "max_steps": "steps", "num_train_epochs": "epochs",
    "per_device_train_batch_size": "batch_size", "activation_checkpointing": "gradient_checkpointing",
    **{name: name for name in ("learning_rate", "weight_decay", "warmup_ratio", "lr_scheduler_type", "max_grad_norm",
                               "gradient_accumulation_steps", "gradient_checkpointing", "seed", "report_to",
                               "logging_steps")},
}
#: earlier `training:` keys the engine sets itself now
ENGINE_SET = ("disable_tqdm", "remove_unused_columns", "gradient_checkpointing_kwargs",
              "activation_checkpointing_kwargs")


def upgrade_old_fields(data: dict[str, Any], where: str = "") -> dict[str, Any]:
    """A config of the earlier PRM trainer in today's fields, one note (a logged warning) per moved field naming
    its new one; `where` prefixes the names (`prm.` in a pipeline config). `training:` was passed to
    `TrainingArguments`: its keys become the config's fields (`TRAINING_FIELDS`; `per_device_train_batch_size`
    times the processes and accumulation steps is the global `batch_size`, `warmup_steps` of `max_steps` the
    `warmup_ratio`, `bf16` / `fp16` / `use_cpu` the `precision` / `device`), or `training_args`;
    `model.dtype` bfloat16 is `precision: bf16-pure` (float32 and auto are today's float32 weights);
    `model.gradient_checkpointing` is `gradient_checkpointing`. A field given in both spellings is an error."""
    from proctor.training.distributed import is_main_process, world_size

    out, notes = dict(data), []

    def move(old: str, new: str, value: Any, shown: Any = None) -> None:
        if new in data:
            raise ValueError(f"{where}{old} and {where}{new} both given; keep {where}{new}")
        out[new] = value
        notes.append(f"{where}{old}: now `{where}{new}` (read as {new}: {value if shown is None else shown})")

    model = data.get("model")
    if isinstance(model, dict) and ("dtype" in model or "gradient_checkpointing" in model):
        model = out["model"] = dict(model)
        if "gradient_checkpointing" in model:
            move("model.gradient_checkpointing", "gradient_checkpointing", model.pop("gradient_checkpointing"))
        if "dtype" in model:
            dtype = str(model.pop("dtype"))
            if dtype in ("bfloat16", "bf16"):
                move("model.dtype", "precision", "bf16-pure")
            elif dtype in ("auto", "float32", "fp32"):
                notes.append(f"{where}model.dtype: dropped (trained weights are float32; `{where}precision` sets "
                             "the autocast)")
            else:
                raise ValueError(f"{where}model.{RENAMED_FIELDS['dtype']}")
    training = data.get("training")
    if isinstance(training, dict):
        del out["training"]
        training = dict(training)
        steps = training.get("max_steps")
        if "warmup_steps" in training:
            warmup = training.pop("warmup_steps")
            if not isinstance(steps, int) or steps <= 0:
                raise ValueError(f"{where}training.{RENAMED_FIELDS['warmup_steps']}")
            move("training.warmup_steps", "warmup_ratio", warmup / steps)
        if "per_device_train_batch_size" in training:
            per_device = training.pop("per_device_train_batch_size")
            accumulation, processes = training.get("gradient_accumulation_steps", 1), world_size()
            move("training.per_device_train_batch_size", "batch_size", per_device * accumulation * processes,
                 f"{per_device * accumulation * processes}, the global batch: {per_device} × {accumulation} "
                 f"accumulation steps × {processes} processes")
        flags = {key: training.pop(key) for key in ("bf16", "fp16") if key in training}
        if flags:
            precision = "bf16" if flags.get("bf16") else "fp16" if flags.get("fp16") else "fp32"
            move(f"training.{'/'.join(flags)}", "precision", precision)
        if training.pop("use_cpu", False):
            move("training.use_cpu", "device", "cpu")
        for key in [k for k in ENGINE_SET if k in training]:
            training.pop(key)
            notes.append(f"{where}training.{key}: dropped (the training engine sets it)")
        for key, value in training.items():
            if key in TRAINING_FIELDS:
                move(f"training.{key}", TRAINING_FIELDS[key], value)
            else:
                out.setdefault("training_args", {})[key] = value
                notes.append(f"{where}training.{key}: now `{where}training_args.{key}`")
    if notes and is_main_process():
        for note in notes:
            log.warning(note)
    return out


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

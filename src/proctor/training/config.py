"""The parts every trainer's config is composed of (`proctor.parts`; as TRL's `_BaseConfig` → `GRPOConfig`): a
trainer's config inherits `OptimizationConfig` (and, when it rolls out, `TaskSelection`) and adds only its own
fields.

`OptimizationConfig` holds the `transformers.TrainingArguments` fields a trainer exposes by name; any other
`TrainingArguments` field (FSDP, DeepSpeed, `optim`, `save_steps`, ...) goes in `training_args`, checked by name
before anything loads. The engine (`proctor.training.engine`) turns them into `TrainingArguments`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from proctor.envs.ref import EnvRef, TaskChoice
from proctor.parts import Part
from proctor.registry import did_you_mean
from proctor.training.precision import Precision, resolve_device

#: fields that an earlier version had, and what a config says now (one line each, before anything runs)
RENAMED_FIELDS = {
    "dtype": "dtype: replaced by `precision` (auto | fp32 | bf16 | fp16 | bf16-pure): trainable weights are "
             "float32 unless precision is bf16-pure; remove `dtype`",
    "warmup_steps": "warmup_steps: replaced by `warmup_ratio`, the share of the steps that warm up (e.g. 50 of "
                    "1500 steps: 0.0333)",
    "log_every": "log_every: replaced by `logging_steps`",
}

#: TrainingArguments fields the engine sets itself (from the fields above or the trainer's data)
ENGINE_ARGS = frozenset({"output_dir", "per_device_train_batch_size", "max_steps", "num_train_epochs",
                         "remove_unused_columns", "bf16", "fp16", "use_cpu", "disable_tqdm",
                         "learning_rate", "weight_decay", "warmup_steps", "lr_scheduler_type", "max_grad_norm",
                         "gradient_accumulation_steps", "gradient_checkpointing", "activation_checkpointing",
                         "gradient_checkpointing_kwargs", "activation_checkpointing_kwargs", "seed", "report_to",
                         "logging_steps"})


def training_argument_names() -> set[str]:
    from transformers import TrainingArguments

    return {f.name for f in dataclasses.fields(TrainingArguments)}


class OptimizationConfig(Part):
    """How the trained weights are optimised: the `TrainingArguments` a trainer exposes, its precision and
    device (see `proctor.training.precision`)."""

    learning_rate: float = Field(default=1e-6, gt=0, description="peak learning rate of AdamW")
    weight_decay: float = Field(default=0.0, ge=0, description="AdamW's decoupled weight decay")
    warmup_ratio: float = Field(default=0.0, ge=0, lt=1, description="share of the steps with a linear warm-up")
    lr_scheduler_type: str = Field(default="constant_with_warmup", description="a transformers scheduler name: "
                                   "constant_with_warmup, linear, cosine, ...")
    max_grad_norm: float | None = Field(default=1.0, gt=0, description="gradient clipping norm (None: no clipping)")
    gradient_accumulation_steps: int = Field(default=1, ge=1, description="micro-batches per optimizer step; the "
                                             "loss is normalised by the whole step's weight (tokens, pairs, "
                                             "states), so the step equals one of the full batch")
    gradient_checkpointing: bool = Field(default=False, description="recompute activations in the backward pass "
                                         "(less memory, about a third more compute)")
    precision: Precision = Field(default="auto", description="auto: bf16 autocast on a CUDA device with bf16, "
                                 "float32 elsewhere; fp32; bf16 / fp16: autocast, float32 weights; bf16-pure: bf16 "
                                 "weights and optimizer state (warns: small updates are lost)")
    save_dtype: Literal["float32", "bfloat16", "float16"] = Field(default="float32", description="dtype of the "
                                                                  "saved weights")
    device: str = Field(default="auto", description="auto: CUDA when there is one (each process its own under "
                        "torchrun / accelerate launch), else the CPU; or cpu, cuda, cuda:1")
    seed: int = Field(default=0, description="seeds torch, the data order and the sampling")
    report_to: str | list[str] = Field(default="none", description="TrainingArguments.report_to: none, "
                                       "tensorboard, wandb, trackio, ...")
    logging_steps: int = Field(default=10, ge=1, description="optimizer steps between logged lines")
    training_args: dict[str, Any] = Field(default_factory=dict, description="further TrainingArguments fields "
                                          "(fsdp, deepspeed, optim, save_steps, ...) passed as they are")
    progress: bool = Field(default=True, description="a progress line per stage on the main process")

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for old, says in RENAMED_FIELDS.items():
                if old in data and old not in cls.model_fields:
                    raise ValueError(says)
        return data

    @model_validator(mode="after")
    def _device_and_precision(self) -> OptimizationConfig:
        """The device exists (`cuda` on a CPU-only build is refused here, before anything loads) and can run the
        precision (fp16 mixed precision needs CUDA)."""
        device = resolve_device(self.device)
        if self.precision == "fp16" and device == "cpu":
            raise ValueError("precision fp16: fp16 mixed precision needs a CUDA device; on a CPU use fp32 or bf16")
        return self

    @field_validator("training_args")
    @classmethod
    def _known_args(cls, v: dict[str, Any]) -> dict[str, Any]:
        if not v:
            return v
        known = training_argument_names()
        for key in v:
            if key in ENGINE_ARGS:
                raise ValueError(f"training_args.{key}: set by the trainer (use the config's own field)")
            if key not in known:
                raise ValueError(f"training_args.{key}: not a transformers.TrainingArguments field"
                                 f"{did_you_mean(key, known)}")
        return v


class TaskSelection(TaskChoice, EnvRef, Part):
    """Which env tasks a trainer rolls out on (`EnvRef`, `TaskChoice`: the train split by default), and how the
    envs are stepped."""

    split: str = TaskChoice.field_with("split", default="train")
    batch: int = Field(default=8, ge=1, description="envs stepped together, and states per agent call")
    workers: int = Field(default=0, ge=0, description="env worker processes (0: in this process)")

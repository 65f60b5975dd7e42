"""PRM training on the HF `Trainer` (checkpointing, resume, logging/report_to, Accelerate/DDP for free).

`PRMTrainer.compute_loss` runs the PRM once per batch (padded, or packed with `packing`) and applies the
configured objective (`proctor.prm.objectives`: pointwise step losses, Bradley–Terry pairs, SPA progress sum,
inverse-PRM TD difference). Checkpoints hold the full PRM state (`prm_state.safetensors`, LoRA adapters
unmerged) so `resume_from_checkpoint` continues exactly; the final model is saved with
`ProcessRewardModel.save_pretrained` (an HF folder + `prm_config.json`).
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import torch
from transformers import Trainer, TrainingArguments

from proctor.prm.config import PRMTrainConfig
from proctor.prm.data import DataError, StepwiseExample, from_trajectories, load_examples
from proctor.prm.model import ProcessRewardModel
from proctor.prm.objectives import objective
from proctor.prm.records import (
    PairExample,
    examples_from_records,
    load_trajectory_index,
    read_pairs,
    read_targets,
    trajectory_rows,
)
from proctor.prm.tokenize import PRMCollator, TokenizationError

#: the `targets.parquet` record kind each objective's data kind reads
RECORD_KINDS = {"steps": "step", "pairs": "preference", "progress": "progress", "transitions": "transition"}


def prm_loss(
    name: str, logits: torch.Tensor, batch: dict[str, torch.Tensor], gamma: float = 0.95
) -> torch.Tensor:
    """The named objective's loss (config.LossName) of per-token head logits against a collated batch;
    `gamma` is the td_bce discount."""
    return objective(name).loss(logits, batch, gamma)


class PRMTrainer(Trainer):
    """`transformers.Trainer` for a `ProcessRewardModel` with one of proctor's PRM objectives."""

    def __init__(self, *args: Any, loss_name: str = "bce", gamma: float = 0.95, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.loss_name = loss_name
        self.gamma = gamma

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        out = model(
            inputs["input_ids"],
            attention_mask=inputs.get("attention_mask"),
            position_ids=inputs.get("position_ids"),
        )
        loss = prm_loss(self.loss_name, out.logits, inputs, self.gamma)
        return (loss, out) if return_outputs else loss

    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
        inputs = self._prepare_inputs(inputs)
        with torch.no_grad():
            loss = self.compute_loss(model, inputs)
        return loss.detach(), None, None

    def _save(self, output_dir: str | None = None, state_dict: dict | None = None) -> None:
        output_dir = output_dir or self.args.output_dir
        self.accelerator.unwrap_model(self.model).save_checkpoint(output_dir)
        torch.save(self.args, Path(output_dir) / "training_args.bin")

    def _load_from_checkpoint(self, resume_from_checkpoint: str, model=None) -> None:
        (model or self.model).load_checkpoint(resume_from_checkpoint)


def launched_distributed() -> bool:
    """Whether this process is one of several started by torchrun / accelerate (WORLD_SIZE > 1)."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def training_defaults(cfg: PRMTrainConfig) -> dict[str, Any]:
    """TrainingArguments defaults under `cfg.training`. Launched by torchrun on a machine without CUDA, the
    processes must run as CPU ranks of one job (`use_cpu`, gloo), or transformers gives each one the whole
    data set and they train as identical separate jobs."""
    defaults: dict[str, Any] = {"report_to": "none", "seed": cfg.seed, "ddp_find_unused_parameters": False}
    if launched_distributed() and not torch.cuda.is_available():
        defaults["use_cpu"] = True
    return defaults


def load_training_examples(
    cfg: PRMTrainConfig, path: str, tokenizer: Any
) -> list[StepwiseExample] | list[PairExample]:
    """The examples of one data file as `cfg.data` describes (see `config`)."""
    data, marker = cfg.data, cfg.tokenization.marker
    if data.format == "pairs":
        return read_pairs(path)
    if data.format == "targets":
        rows = read_targets(path)
        want = RECORD_KINDS[objective(cfg.loss).data]
        kinds = sorted({str(r.get("kind")) for r in rows})
        if kinds != [want]:
            raise DataError(f"{path}: holds {kinds} records; loss {cfg.loss!r} reads {want!r} records")
        index = load_trajectory_index(data.trajectories)
        return examples_from_records(tokenizer, rows, index, marker, score_at=data.score_at)
    if data.format != "trajectories":
        return load_examples(path, data.format)
    from proctor.trajectory import TrajectoryStore

    trajs = TrajectoryStore.open(path).load()
    if data.score_at == "action" and data.target:
        return from_trajectories(
            tokenizer, trajs, data.target, marker=marker, allow_missing=data.allow_missing_targets
        )
    rows = trajectory_rows(trajs, data.target, data.allow_missing_targets)
    return examples_from_records(tokenizer, rows, {t.id: t for t in trajs}, marker, score_at=data.score_at)


def tokenize_examples(
    prm: ProcessRewardModel,
    examples: list[StepwiseExample] | list[PairExample],
    loss: str,
    is_eval: bool = False,
) -> list[dict[str, Any]]:
    """Features for the Trainer: one per example, `{"chosen", "rejected"}` per pair. The td_bce objective
    needs every step of an example (its last step is terminal), so truncating one is an error there."""
    out = []
    for ex in examples:
        if isinstance(ex, PairExample):
            chosen, rejected = ex.branches()
            out.append({"chosen": prm.tokenize(chosen, is_eval), "rejected": prm.tokenize(rejected, is_eval)})
            continue
        f = prm.tokenize(ex, is_eval)
        if loss == "td_bce" and sum(f["step_mask"]) != ex.num_steps:
            raise TokenizationError(
                f"example {ex.id!r}: truncation cut {ex.num_steps - sum(f['step_mask'])} of its steps, which "
                f"would turn its last transition terminal (raise tokenization.max_length)"
            )
        out.append(f)
    return out


def build_trainer(cfg: PRMTrainConfig) -> tuple[ProcessRewardModel, PRMTrainer]:
    """The PRM and a ready `PRMTrainer` for a config (data read and tokenized)."""
    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    m = cfg.model
    prm = ProcessRewardModel.build(
        m.backbone,
        m.head,
        sigmoid=objective(cfg.loss).sigmoid,
        tokenization=cfg.tokenization,
        reward_tokens=m.reward_tokens,
        dtype=m.dtype,
        lora=m.lora,
        gradient_checkpointing=m.gradient_checkpointing,
        trust_remote_code=m.trust_remote_code,
    )
    prm.spec = prm.spec.model_copy(update={"score_at": cfg.data.score_at})  # saved in prm_config.json
    train = tokenize_examples(prm, load_training_examples(cfg, cfg.data.train, prm.tokenizer), cfg.loss)
    evals = None
    if cfg.data.eval:
        evals = tokenize_examples(
            prm, load_training_examples(cfg, cfg.data.eval, prm.tokenizer), cfg.loss, is_eval=True
        )
    args = TrainingArguments(**{**training_defaults(cfg), **cfg.training, "remove_unused_columns": False})
    if prm.tokenizer.pad_token_id is None:
        raise ValueError(f"tokenizer of {m.backbone!r} has no pad token")
    trainer = PRMTrainer(
        model=prm,
        args=args,
        train_dataset=train,
        eval_dataset=evals,
        data_collator=PRMCollator(prm.tokenizer.pad_token_id, cfg.packing, cfg.pack_width),
        loss_name=cfg.loss,
        gamma=cfg.gamma,
    )
    return prm, trainer


def train_prm(
    cfg: PRMTrainConfig, resume_from_checkpoint: str | bool | None = None
) -> tuple[ProcessRewardModel, Any, PRMTrainer]:
    """Train, save the final PRM to `training.output_dir`; return it, the TrainOutput and the trainer."""
    prm, trainer = build_trainer(cfg)
    result = trainer.train(resume_from_checkpoint=resume_from_checkpoint)
    if trainer.args.should_save:
        prm.save_pretrained(trainer.args.output_dir)
    return prm, result, trainer

"""PRM training on the HF `Trainer` (checkpointing, resume, logging/report_to, Accelerate/DDP for free).

`PRMTrainer.compute_loss` runs the PRM once per batch and applies the configured loss (`prm_loss`) at the
labelled step positions. Checkpoints hold the full PRM state (`prm_state.safetensors`, LoRA adapters
unmerged) so `resume_from_checkpoint` continues exactly; the final model is saved with
`ProcessRewardModel.save_pretrained` (an HF folder + `prm_config.json`).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import torch
from transformers import Trainer, TrainingArguments

from proctor.prm import losses
from proctor.prm.config import PRMTrainConfig
from proctor.prm.data import StepwiseExample, from_trajectories, load_examples
from proctor.prm.model import ProcessRewardModel
from proctor.prm.tokenize import IGNORE, PRMCollator


def prm_loss(name: str, logits: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """The named loss (config.LossName) of per-token head logits against a collated batch."""
    if name == "progress_sum":
        if "outcome" not in batch:
            raise ValueError("loss 'progress_sum' needs an 'outcome' per example (StepwiseExample.outcome)")
        return losses.progress_sum_loss(logits.float(), batch["step_mask"], batch["outcome"])
    labelled = batch["labels"] != IGNORE
    z, y = logits[labelled].float(), batch["labels"][labelled]
    if name == "bce":
        return losses.soft_bce_loss(z, y)
    if name == "mse":
        return losses.mse_loss(z, y)
    if name == "ce":
        return losses.cross_entropy_loss(z, y)
    if name == "soft_ce":
        return losses.soft_cross_entropy_loss(z, y)
    raise ValueError(f"unknown PRM loss {name!r}")


class PRMTrainer(Trainer):
    """`transformers.Trainer` for a `ProcessRewardModel` with one of proctor's PRM losses."""

    def __init__(self, *args: Any, loss_name: str = "bce", **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.loss_name = loss_name

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        out = model(inputs["input_ids"], attention_mask=inputs["attention_mask"])
        loss = prm_loss(self.loss_name, out.logits, inputs)
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


def load_training_examples(cfg: PRMTrainConfig, path: str, tokenizer: Any) -> list[StepwiseExample]:
    if cfg.data.format != "trajectories":
        return load_examples(path, cfg.data.format)
    from proctor.trajectory import TrajectoryStore

    trajs = TrajectoryStore.open(path).load()
    return from_trajectories(
        tokenizer,
        trajs,
        cfg.data.target,
        marker=cfg.tokenization.marker,
        allow_missing=cfg.data.allow_missing_targets,
    )


def build_trainer(cfg: PRMTrainConfig) -> tuple[ProcessRewardModel, PRMTrainer]:
    """The PRM and a ready `PRMTrainer` for a config (data read and tokenized)."""
    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    m = cfg.model
    prm = ProcessRewardModel.build(
        m.backbone,
        m.head,
        sigmoid=cfg.loss == "bce",
        tokenization=cfg.tokenization,
        reward_tokens=m.reward_tokens,
        dtype=m.dtype,
        lora=m.lora,
        gradient_checkpointing=m.gradient_checkpointing,
        trust_remote_code=m.trust_remote_code,
    )
    train = [prm.tokenize(ex) for ex in load_training_examples(cfg, cfg.data.train, prm.tokenizer)]
    evals = None
    if cfg.data.eval:
        evals = [
            prm.tokenize(ex, is_eval=True) for ex in load_training_examples(cfg, cfg.data.eval, prm.tokenizer)
        ]
    args = TrainingArguments(
        **{"report_to": "none", "seed": cfg.seed, **cfg.training, "remove_unused_columns": False}
    )
    if prm.tokenizer.pad_token_id is None:
        raise ValueError(f"tokenizer of {m.backbone!r} has no pad token")
    trainer = PRMTrainer(
        model=prm,
        args=args,
        train_dataset=train,
        eval_dataset=evals,
        data_collator=PRMCollator(prm.tokenizer.pad_token_id),
        loss_name=cfg.loss,
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

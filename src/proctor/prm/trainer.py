"""PRM training on the HF `Trainer` (checkpointing, resume, logging/report_to, Accelerate/DDP for free).

`PRMTrainer.compute_loss` runs the PRM once per batch (padded, or packed with `packing`) and applies the
configured objective (`proctor.prm.objectives`: pointwise step losses, Bradley–Terry pairs, SPA progress sum,
inverse-PRM TD difference). Checkpoints hold the full PRM state (`prm_state.safetensors`, LoRA adapters
unmerged) so `resume_from_checkpoint` continues exactly; the final model is saved with
`ProcessRewardModel.save_pretrained` (an HF folder + `prm_config.json`).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import torch
from transformers import Trainer, TrainingArguments

from proctor.prm.config import PRMTrainConfig
from proctor.prm.data import DataError, StepwiseExample, load_examples, row_name
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
from proctor.prm.rendering import from_trajectories
from proctor.prm.tokenize import PRMCollator, TokenizationError
from proctor.training.distributed import world_size
from proctor.training.policy import saving_state_dict
from proctor.training.precision import resolve_device, trainer_precision_args

#: the `targets.parquet` record kind each objective's data kind reads
#: data formats of plain stepwise text (a problem and its steps), not rendered agent states
TEXT_FORMATS = ("stepwise", "math_shepherd", "prm800k", "processbench")
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
            score_mask=inputs["step_mask"],  # every objective reads the logits at step ends only
        )
        loss = prm_loss(self.loss_name, out.logits, inputs, self.gamma)
        return (loss, out) if return_outputs else loss

    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
        inputs = self._prepare_inputs(inputs)
        with torch.no_grad():
            loss = self.compute_loss(model, inputs)
        return loss.detach(), None, None

    def _save(self, output_dir: str | None = None, state_dict: dict | None = None) -> None:
        """The PRM checkpoint, from the main process: `state_dict` is the full one the Trainer gathered under
        FSDP / ZeRO-3 (every process took part), None the model's own."""
        if not self.args.should_save:
            return
        output_dir = output_dir or self.args.output_dir
        self.accelerator.unwrap_model(self.model).save_checkpoint(output_dir, state_dict=state_dict)
        torch.save(self.args, Path(output_dir) / "training_args.bin")

    def _load_from_checkpoint(self, resume_from_checkpoint: str, model=None) -> None:
        (model or self.model).load_checkpoint(resume_from_checkpoint)


def training_defaults(cfg: PRMTrainConfig) -> dict[str, Any]:
    """TrainingArguments defaults under `cfg.training`: the precision policy's autocast (`bf16` on a CUDA
    device with bf16, float32 compute on the CPU; unless `training` sets bf16 or fp16) and, launched by
    torchrun on a machine without CUDA, CPU ranks of one job (`use_cpu`, gloo), or transformers gives each
    process the whole data set and they train as identical separate jobs."""
    defaults: dict[str, Any] = {"report_to": "none", "seed": cfg.seed, "ddp_find_unused_parameters": False}
    if world_size() > 1 and not torch.cuda.is_available():
        defaults["use_cpu"] = True
    if not {"bf16", "fp16"} & set(cfg.training):
        device = "cpu" if cfg.training.get("use_cpu", defaults.get("use_cpu")) else resolve_device("auto")
        defaults.update(trainer_precision_args("auto", device))
    return defaults


def _check_targets(trajs: list[Any], path: str, target: str) -> None:
    for traj in trajs:
        for t, step in enumerate(traj.steps):
            if target not in step.targets:
                raise DataError(f"{path}: trajectory {traj.id} step {t} has no target {target!r} "
                                f"(has {sorted(step.targets)}); run `proctor targets --write-back` first, or set "
                                f"data.allow_missing_targets")


def read_data(cfg: PRMTrainConfig, path: str) -> Any:
    """One data file or store as `cfg.data` describes, read and checked row by row without a tokenizer (so a
    bad row is reported before any model loads); `render_data` turns it into training examples."""
    data = cfg.data
    if not Path(path).exists():
        raise DataError(f"{path}: no such data {'folder' if data.format == 'trajectories' else 'file'}")
    if data.format == "pairs":
        return read_pairs(path)
    if data.format == "targets":
        rows = read_targets(path)
        want = RECORD_KINDS[objective(cfg.loss).data]
        kinds = sorted({str(r.get("kind")) for r in rows})
        if kinds != [want]:
            raise DataError(f"{path}: holds {kinds} records; loss {cfg.loss!r} reads {want!r} records")
        return rows, load_trajectory_index(data.trajectories)
    if data.format != "trajectories":
        return load_examples(path, data.format)
    from proctor.store import TrajectoryStore

    trajs = TrajectoryStore.open(path).load()
    if data.target and not data.allow_missing_targets:
        _check_targets(trajs, path, data.target)
    return trajs


def render_data(cfg: PRMTrainConfig, raw: Any, tokenizer: Any) -> list[StepwiseExample] | list[PairExample]:
    """The training examples of what `read_data` read (trajectories rendered with the tokenizer's template)."""
    data, marker = cfg.data, cfg.tokenization.marker
    if data.format == "targets":
        rows, index = raw
        return examples_from_records(tokenizer, rows, index, marker, score_at=data.score_at)
    if data.format != "trajectories":
        return raw
    if data.score_at == "action" and data.target:
        return from_trajectories(tokenizer, raw, data.target, marker=marker, allow_missing=data.allow_missing_targets)
    rows = trajectory_rows(raw, data.target, data.allow_missing_targets)
    return examples_from_records(tokenizer, rows, {t.id: t for t in raw}, marker, score_at=data.score_at)


def load_training_examples(
    cfg: PRMTrainConfig, path: str, tokenizer: Any
) -> list[StepwiseExample] | list[PairExample]:
    """The examples of one data file as `cfg.data` describes (see `config`)."""
    return render_data(cfg, read_data(cfg, path), tokenizer)


def check_inputs(cfg: PRMTrainConfig) -> dict[str, Any]:
    """Everything that can be checked before a model loads: the backbone reference (a missing local folder,
    or a hub name while offline and not cached) and every data row. Returns the data as `read_data` read it."""
    from proctor.models.loading import check_model_source

    check_model_source(cfg.model.backbone)
    for path in cfg.data.trajectories:
        if not Path(path).exists():
            raise DataError(f"data.trajectories: {path}: no such trajectory store or file")
    raw = {"train": read_data(cfg, cfg.data.train)}
    if cfg.data.eval:
        raw["eval"] = read_data(cfg, cfg.data.eval)
    return raw


def _no_labels_left(err: TokenizationError) -> bool:
    return "survive" in str(err)


def tokenize_examples(
    prm: ProcessRewardModel,
    examples: list[StepwiseExample] | list[PairExample],
    loss: str,
    is_eval: bool = False,
    unlabelled_rows: str = "error",
    report: dict[str, int] | None = None,
) -> list[dict[str, Any]]:
    """Features for the Trainer: one per example, `{"chosen", "rejected"}` per pair. The td_bce objective
    needs every step of an example (its last step is terminal), so truncating one is an error there.

    An example whose labelled steps truncation cuts away is an error naming its row, or (`unlabelled_rows`)
    kept with no labels (TRL's behaviour; one with no step position left at all is skipped) or skipped;
    `report` counts them ("kept_unlabelled", "skipped")."""
    report = report if report is not None else {}
    out = []
    for ex in examples:
        if isinstance(ex, PairExample):
            chosen, rejected = ex.branches()
            out.append({"chosen": prm.tokenize(chosen, is_eval), "rejected": prm.tokenize(rejected, is_eval)})
            continue
        try:
            f = prm.tokenize(ex, is_eval)
        except TokenizationError as e:
            if not _no_labels_left(e):
                raise TokenizationError(f"{row_name(ex)}: {e}") from None
            if unlabelled_rows == "error":
                raise TokenizationError(
                    f"{row_name(ex)}: no labelled step is left after truncation to "
                    f"tokenization.max_length={prm.spec.tokenization.max_length}; raise it, or set "
                    f"data.unlabelled_rows: keep (TRL's behaviour: the row stays, unsupervised) or skip") from None
            f = None
            if unlabelled_rows == "keep":
                try:
                    f = prm.tokenize(ex.model_copy(update={"labels": [None] * ex.num_steps}), is_eval)
                except TokenizationError:
                    f = None  # not even one step position is left: nothing to keep
            key = "kept_unlabelled" if f is not None else "skipped"
            report[key] = report.get(key, 0) + 1
            if f is None:
                continue
        if loss == "td_bce" and sum(f["step_mask"]) != ex.num_steps:
            raise TokenizationError(
                f"{row_name(ex)}: truncation cut {ex.num_steps - sum(f['step_mask'])} of its steps, which "
                f"would turn its last transition terminal (raise tokenization.max_length)"
            )
        out.append(f)
    return out


def check_training_args(training: dict[str, Any]) -> None:
    """`training:` keys must be `TrainingArguments` fields (a typo is named before any model loads)."""
    import dataclasses

    known = {f.name for f in dataclasses.fields(TrainingArguments)}
    unknown = sorted(set(training) - known)
    if unknown:
        import difflib

        hints = [f"{k!r}" + (f" (did you mean {close[0]!r}?)" if (close := difflib.get_close_matches(k, known, 1))
                             else "") for k in unknown]
        raise ValueError(f"training: {', '.join(hints)} not a TrainingArguments field")


def build_trainer(cfg: PRMTrainConfig) -> tuple[ProcessRewardModel, PRMTrainer]:
    """The PRM and a ready `PRMTrainer` for a config (inputs checked first, then data read and tokenized).
    `trainer.data_report` counts the examples `data.unlabelled_rows` kept without labels or skipped."""
    check_training_args(cfg.training)
    raw = check_inputs(cfg)
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
    trained_on = "text" if cfg.data.format in TEXT_FORMATS else "trajectories"
    prm.spec = prm.spec.model_copy(update={"score_at": cfg.data.score_at, "trained_on": trained_on})  # prm_config.json
    report: dict[str, int] = {}
    train = tokenize_examples(prm, render_data(cfg, raw["train"], prm.tokenizer), cfg.loss,
                              unlabelled_rows=cfg.data.unlabelled_rows, report=report)
    if not train:
        raise DataError(f"{cfg.data.train}: no training example is left ({report})")
    evals = None
    if cfg.data.eval:
        evals = tokenize_examples(prm, render_data(cfg, raw["eval"], prm.tokenizer), cfg.loss, is_eval=True,
                                  unlabelled_rows=cfg.data.unlabelled_rows, report=report)
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
    trainer.data_report = report
    return prm, trainer


def train_prm(
    cfg: PRMTrainConfig,
    resume_from_checkpoint: str | bool | None = None,
    built: tuple[ProcessRewardModel, PRMTrainer] | None = None,
) -> tuple[ProcessRewardModel, Any, PRMTrainer]:
    """Train, save the final PRM to `training.output_dir`; return it, the TrainOutput and the trainer.
    `built`: what `build_trainer(cfg)` returned, when the caller built it first (to report its errors)."""
    prm, trainer = built or build_trainer(cfg)
    result = trainer.train(resume_from_checkpoint=resume_from_checkpoint)
    state_dict = saving_state_dict(trainer)  # gathered by every process under FSDP / ZeRO-3
    if trainer.args.should_save:
        prm.save_pretrained(trainer.args.output_dir, state_dict=state_dict)
    return prm, result, trainer

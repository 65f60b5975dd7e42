"""`fit`: a `transformers.Trainer` over rows with a proctor loss, the one optimisation loop of every trainer.

A trainer builds its rows (SFT examples, preference pairs, GRPO step rows, PRM targets, ...) and orders them into
global batches, one per optimizer step, with its own random generator (so the data order does not depend on the
number of processes). `fit` hands them to HF `Trainer`, which then supplies everything proctor does not write:
`torchrun` / `accelerate launch`, DDP, FSDP and DeepSpeed ZeRO, mixed precision with fp32 master weights,
gradient accumulation and checkpointing, `report_to` logging, checkpoints and resume.

The loss (`RowLoss`) is a *sum* over a batch's items (tokens, pairs, states) with a `weight(rows)` that counts
them. Each global batch is split into P·G micro-batches (P processes, G accumulation steps); the Trainer counts
the weight of the whole step across processes and accumulation (`num_items_in_batch`), and each micro-batch's sum
is divided by it. The averaged, accumulated gradient is then exactly the gradient of Σ loss / Σ weight over the
global batch, whatever P and G are: one process at batch B, two at B/2 each, or accumulation by G, follow the
same curve (up to float rounding).
"""

from __future__ import annotations

import json
import logging
import random
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch
from transformers import PrinterCallback, Trainer, TrainerCallback, TrainingArguments
from transformers.trainer import TRAINER_STATE_NAME, TRAINING_ARGS_NAME

from proctor.progress import StageProgress
from proctor.training.config import OptimizationConfig
from proctor.training.distributed import world_size
from proctor.training.precision import resolve_device, trainer_precision_args

log = logging.getLogger(__name__)


class RowLoss(Protocol):
    """A loss over rows: `weight(rows)` counts the items the loss sums over (known before the forward pass),
    and a call returns (Σ loss over the rows' items, {stat: Σ over the items}), both on the model's graph or
    detached; the engine divides both by the optimizer step's total weight."""

    def weight(self, rows: Sequence[Any]) -> float: ...

    def __call__(self, model: torch.nn.Module, rows: Sequence[Any]) -> tuple[torch.Tensor, dict[str, Any]]: ...


@dataclass
class FitResult:
    """What `fit` returns: one record per optimizer step (`step`, `loss`, `lr`, the loss's stats, all global
    means over the step's items), the tokens/s and wall time, and the Trainer (its model is the trained one)."""

    curve: list[dict[str, float]] = field(default_factory=list)
    seconds: float = 0.0
    trainer: Trainer | None = None


def shard_batches(batches: Sequence[Sequence[Any]], processes: int, accumulation: int) -> list[list[Any]]:
    """The Trainer's items: each global batch split into `processes`·`accumulation` micro-batches, ordered so
    that the Trainer's sequential sampler, sharded by Accelerate (process r takes items r, r + P, ...), gives
    process r micro-batches g·P + r, g = 0..G−1, of every step. Row i of a batch goes to micro-batch i mod (P·G)."""
    parts = processes * accumulation
    items: list[list[Any]] = []
    for k, batch in enumerate(batches):
        if len(batch) < parts:
            raise ValueError(f"batch {k} has {len(batch)} rows, fewer than processes × gradient_accumulation_steps "
                             f"= {processes} × {accumulation}; raise the batch size or lower the accumulation")
        items.extend([list(batch[c::parts]) for c in range(parts)])
    return items


class RowsTrainer(Trainer):
    """`transformers.Trainer` whose items are micro-batches of rows and whose loss is a `RowLoss` (see module
    docstring). `optimizer_groups(model)` gives AdamW parameter groups with their own settings (e.g. a second
    learning rate); None: the Trainer's own groups. `clipped(model)`: the parameters whose gradient norm
    `max_grad_norm` clips (e.g. an LM without a scalar head next to it); None: all of them. A model with its own
    checkpoint format (`save_checkpoint(folder, state_dict=None)`, `load_checkpoint(folder)`, e.g. a PRM with its
    LoRA adapters unmerged) is checkpointed and resumed through it."""

    loss_is_scaled_for_ga = True

    def __init__(self, *args: Any, row_loss: RowLoss, optimizer_groups: Callable[[Any], list[dict]] | None = None,
                 clipped: Callable[[Any], Any] | None = None, **kwargs: Any):
        super().__init__(*args, data_collator=_one_item, **kwargs)
        self.row_loss = row_loss
        self.optimizer_groups = optimizer_groups
        self.clipped = clipped
        self._step_weight: torch.Tensor | None = None
        self._sums: dict[str, torch.Tensor] = {}
        self._lr = 0.0

    def _get_train_sampler(self, train_dataset=None):
        return torch.utils.data.SequentialSampler(train_dataset or self.train_dataset)

    def _get_num_items_in_batch(self, batch_samples: list, device: torch.device) -> torch.Tensor:
        weight = torch.tensor(float(sum(self.row_loss.weight(b["rows"]) for b in batch_samples)), device=device)
        if self.args.world_size > 1:
            weight = self.accelerator.reduce(weight, reduction="sum")
        self._step_weight = weight
        return weight

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        rows = inputs["rows"]
        if not self._sums:  # the step's first micro-batch: the learning rate this step trains at
            self._lr = float(self.lr_scheduler.get_last_lr()[0])
        total, stats = self.row_loss(model, rows)
        denominator = num_items_in_batch if num_items_in_batch is not None else self.row_loss.weight(rows)
        # DDP averages the processes' gradients: scaling by P makes the average that of Σ total / Σ weight
        loss = total * self.accelerator.num_processes / denominator
        for name, value in {"loss": total, **stats}.items():
            value = torch.as_tensor(value, dtype=torch.float32).detach().to(self.args.device)
            self._sums[name] = self._sums.get(name, 0) + value
        return (loss, None) if return_outputs else loss

    def pop_step(self) -> dict[str, float]:
        """The finished step's global means (Σ over processes and micro-batches / the step's weight)."""
        names = sorted(self._sums)
        sums = torch.stack([self._sums[n] for n in names])
        if self.args.world_size > 1:
            sums = self.accelerator.reduce(sums, reduction="sum")
        weight = float(self._step_weight) if self._step_weight is not None else 1.0
        self._sums = {}
        means = {n: float(v) / max(weight, 1e-12) for n, v in zip(names, sums.tolist(), strict=True)}
        return {**means, "lr": self._lr}

    def create_scheduler(self, num_training_steps: int, optimizer=None):
        """The Trainer's scheduler, with warm-up counted from the first step: step s < W trains at
        lr·(s + 1)/W, not lr·s/W (transformers' warm-up spends step 0 at lr 0, so a one-step run would not train);
        after the warm-up, the schedule's own factor."""
        if self.lr_scheduler is None:
            scheduler = super().create_scheduler(num_training_steps, optimizer)
            warmup = self.args.get_warmup_steps(num_training_steps)
            if warmup > 0 and hasattr(scheduler, "lr_lambdas"):
                scheduler.lr_lambdas = [_warm_from_first_step(f, warmup) for f in scheduler.lr_lambdas]
                scheduler.last_epoch = -1
                with warnings.catch_warnings():  # "step() before optimizer.step()": no step is skipped here
                    warnings.simplefilter("ignore", UserWarning)
                    scheduler.step()  # re-applies the factor of step 0
        return self.lr_scheduler

    def _clip_grad_norm(self, model):
        if self.clipped is None:
            return super()._clip_grad_norm(model)
        params = list(self.clipped(self.accelerator.unwrap_model(model)))
        return self.accelerator.clip_grad_norm_(params, self.args.max_grad_norm)

    def _save(self, output_dir: str | None = None, state_dict: dict | None = None) -> None:
        """A checkpoint from the main process; `state_dict`: the full one the Trainer gathered under FSDP / ZeRO-3
        (every process took part), None: the model's own."""
        model = self.accelerator.unwrap_model(self.model)
        if not hasattr(model, "save_checkpoint"):
            return super()._save(output_dir, state_dict)
        if self.args.should_save:
            output_dir = output_dir or self.args.output_dir
            model.save_checkpoint(output_dir, state_dict=state_dict)
            torch.save(self.args, Path(output_dir) / TRAINING_ARGS_NAME)

    def _load_from_checkpoint(self, resume_from_checkpoint: str, model=None) -> None:
        target = model if model is not None else self.model
        target = self.accelerator.unwrap_model(target)
        if not hasattr(target, "load_checkpoint"):
            return super()._load_from_checkpoint(resume_from_checkpoint, model)
        target.load_checkpoint(resume_from_checkpoint)

    def create_optimizer(self, model=None):
        if self.optimizer is None and self.optimizer_groups is not None:
            cls, kwargs = Trainer.get_optimizer_cls_and_kwargs(self.args, self.model)
            self.optimizer = cls(self.optimizer_groups(self.model), **kwargs)
            return self.optimizer
        return super().create_optimizer(model)


def _warm_from_first_step(factor: Callable[[int], float], warmup: int) -> Callable[[int], float]:
    """A transformers schedule's factor with its linear warm-up s/W replaced by (s + 1)/W."""
    return lambda step: (step + 1) / warmup if step < warmup else factor(step)


def _one_item(items: list[list[Any]]) -> dict[str, Any]:
    return {"rows": items[0]}


class _StepRecorder(TrainerCallback):
    """Records each optimizer step's global means and advances the stage's progress line."""

    def __init__(self, trainer: RowsTrainer, bar: StageProgress, curve: list[dict[str, float]]):
        self.trainer, self.bar, self.curve = trainer, bar, curve

    def on_step_end(self, args, state, control, **kwargs):
        row = {"step": state.global_step - 1, **self.trainer.pop_step()}
        self.curve.append(row)
        recent = self.curve[-10:]
        self.bar.advance(1, stats=f"loss {sum(r['loss'] for r in recent) / len(recent):.4f}")


def warmup_steps(ratio: float, steps: int) -> int:
    """The warm-up's steps: round(ratio·steps), at least 1 when ratio > 0 (transformers' own ceil of a float share
    turns 0.07 of 100 steps, 7.000000000000001 in floating point, into 8)."""
    return max(1, round(ratio * steps)) if ratio > 0 else 0


def training_arguments(opt: OptimizationConfig, output_dir: Path, steps: int, **overrides: Any) -> TrainingArguments:
    """The `TrainingArguments` of an optimisation config for `steps` optimizer steps (see `config`)."""
    device = resolve_device(opt.device)
    args = {
        "output_dir": str(output_dir), "per_device_train_batch_size": 1, "max_steps": steps,
        "learning_rate": opt.learning_rate, "weight_decay": opt.weight_decay,
        "warmup_steps": warmup_steps(opt.warmup_ratio, steps),
        "lr_scheduler_type": opt.lr_scheduler_type,
        "max_grad_norm": opt.max_grad_norm if opt.max_grad_norm is not None else 0.0,
        "gradient_accumulation_steps": opt.gradient_accumulation_steps,
        "activation_checkpointing": opt.gradient_checkpointing,
        "activation_checkpointing_kwargs": {"use_reentrant": False},
        "seed": opt.seed, "report_to": opt.report_to, "logging_steps": opt.logging_steps,
        "save_strategy": "no", "remove_unused_columns": False, "disable_tqdm": True,
        "dataloader_pin_memory": False, "ddp_find_unused_parameters": False,
        "use_cpu": device == "cpu", **trainer_precision_args(opt.precision, device),
        **opt.training_args, **overrides,
    }
    return TrainingArguments(**args)


def shuffled_batches(rows: Sequence[Any], batch_size: int, epochs: int, permutation: Callable[[int], list[int]],
                     opt: OptimizationConfig) -> tuple[list[list[Any]], list[int]]:
    """(the global batches of `epochs` passes over `rows`, each batch's epoch): each pass orders the rows by
    `permutation(len(rows))` (the trainer's own generator, so the order does not depend on the number of
    processes) and cuts them into batches of `batch_size`. A pass's last batch with fewer rows than processes ×
    `gradient_accumulation_steps` (each micro-batch needs one) is left out, with a warning."""
    parts = world_size() * opt.gradient_accumulation_steps
    batches: list[list[Any]] = []
    epoch_of: list[int] = []
    for epoch in range(epochs):
        order = permutation(len(rows))
        for start in range(0, len(order), batch_size):
            batch = [rows[i] for i in order[start:start + batch_size]]
            if len(batch) < parts:
                log.warning("epoch %d: a last batch of %d rows left out (fewer than processes × "
                            "gradient_accumulation_steps = %d)", epoch, len(batch), parts)
                continue
            batches.append(batch)
            epoch_of.append(epoch)
    return batches, epoch_of


def shuffled(rng: random.Random | torch.Generator) -> Callable[[int], list[int]]:
    """A `permutation` for `shuffled_batches`: 0..n−1 shuffled in place by a `random.Random`, or
    `torch.randperm` with a `torch.Generator`."""
    def permutation(n: int) -> list[int]:
        if isinstance(rng, torch.Generator):
            return torch.randperm(n, generator=rng).tolist()
        order = list(range(n))
        rng.shuffle(order)
        return order

    return permutation


def _trained_steps(output_dir: str | Path, checkpoint: str | bool | None) -> int:
    """The optimizer steps a run resumed from `checkpoint` (True: the last in `output_dir`) has already taken."""
    from transformers.trainer_utils import get_last_checkpoint

    if checkpoint is True:
        checkpoint = get_last_checkpoint(str(output_dir))
    if not checkpoint:
        return 0
    state = json.loads((Path(checkpoint) / TRAINER_STATE_NAME).read_text())
    return int(state["global_step"])


def fit(model: torch.nn.Module, batches: Sequence[Sequence[Any]], loss: RowLoss, opt: OptimizationConfig,
        output_dir: str | Path, *, label: str = "train", optimizer_groups: Callable[[Any], list[dict]] | None = None,
        clipped: Callable[[Any], Any] | None = None, epochs: Sequence[int] | None = None,
        resume_from_checkpoint: str | bool | None = None) -> FitResult:
    """Train `model` in place on `batches` (one global batch of rows per optimizer step, in order) with `loss`
    and the optimisation config `opt`; Trainer checkpoints, if any, go to `output_dir`. `epochs`: each batch's
    epoch (`shuffled_batches`), recorded in the curve. `resume_from_checkpoint`: a checkpoint folder (True: the
    last one in `output_dir`) whose weights, optimizer, schedule and step the run continues from, skipping the
    batches it trained on; the curve then holds the steps run from there."""
    if not batches:
        raise ValueError(f"{label}: no batch to train on")
    start = time.monotonic()
    args = training_arguments(opt, Path(output_dir), len(batches))
    items = shard_batches(batches, args.world_size, opt.gradient_accumulation_steps)
    curve: list[dict[str, float]] = []
    trainer = RowsTrainer(model=model, args=args, train_dataset=items, row_loss=loss,
                          optimizer_groups=optimizer_groups, clipped=clipped)
    with StageProgress(label, total=len(batches), completed=_trained_steps(output_dir, resume_from_checkpoint),
                       unit="steps", enabled=opt.progress and trainer.is_world_process_zero()) as bar:
        trainer.remove_callback(PrinterCallback)  # stdout is the CLI's (JSON lines); the progress line reports
        trainer.add_callback(_StepRecorder(trainer, bar, curve))
        trainer.train(resume_from_checkpoint=resume_from_checkpoint)
    model.eval()
    if epochs is not None:
        curve = [{"epoch": epochs[row["step"]], **row} for row in curve]
    return FitResult(curve=curve, seconds=time.monotonic() - start, trainer=trainer)

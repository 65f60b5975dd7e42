"""A PRM head's training on the training engine (`proctor.training.fit`), as every proctor trainer's.

    train_prm(PRMTrainConfig(model={"backbone": "runs/tiny"}, data={"train": "d.jsonl"}, output_dir="runs/prm"))

`train_prm`, top to bottom (`prepare` does steps 1–3, so a mistake there is one line; `train_prepared` 4–5):

1. inputs: the output folder (new or empty, unless `overwrite` or `resume`), the backbone reference
   and every data row are checked before any model loads (`train_data.check_inputs`);
2. the PRM (`ProcessRewardModel.build`: float32 weights unless `precision: bf16-pure`, LoRA, activation
   checkpointing) and its examples, rendered and tokenized (`train_data`);
3. batches: `steps` global batches of `batch_size` examples (or `epochs` passes), each pass in the order of
   `random.Random(seed)`, so the order does not depend on the number of processes;
4. optimisation on the engine, with the configured objective (`proctor.prm.objectives`, one forward pass per
   micro-batch, padded or packed) as its `RowLoss` (`PRMLoss`): the objective's mean over a micro-batch times the
   micro-batch's weight (its labelled steps, pairs or examples, what the mean is over), divided by the whole
   step's weight, so that P processes (`torchrun`) or G accumulation steps follow one process's curve;
5. save: the PRM folder (`ProcessRewardModel.save_pretrained`: the HF model, LoRA merged, and `prm_config.json`)
   and `prm_train.json` (the config, data counts, the loss curve and `eval_loss`). Trainer checkpoints
   (`training_args: {save_strategy: steps, save_steps: N}`, in `output_dir/checkpoint-N`) hold the full PRM
   state (`prm_state.safetensors`, LoRA adapters unmerged), so `resume` continues exactly.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from proctor.prm.config import PRMTrainConfig
from proctor.prm.model import CHECKPOINT_STATE, ProcessRewardModel
from proctor.prm.objectives import objective
from proctor.prm.tokenize import IGNORE, PRMCollator
from proctor.prm.train_data import TEXT_FORMATS, check_inputs, render_data, tokenize_examples
from proctor.training.distributed import fresh_output_dir, world_size
from proctor.training.precision import weights_dtype

#: the training summary written next to the PRM
TRAIN_FILE = "prm_train.json"


def prm_loss(
    name: str, logits: torch.Tensor, batch: dict[str, torch.Tensor], gamma: float = 0.95
) -> torch.Tensor:
    """The named objective's loss (config.LossName) of per-token head logits against a collated batch;
    `gamma` is the td_bce discount."""
    return objective(name).loss(logits, batch, gamma)


class PRMLoss:
    """A PRM objective as the engine's `RowLoss` over features (`tokenize_examples`): the objective's mean over a
    micro-batch times its weight, the number of items the mean is over (labelled steps; pairs or examples for
    `bradley_terry` and `progress_sum`). A micro-batch with no labelled step (rows kept unlabelled) adds 0."""

    def __init__(self, loss: str, gamma: float, collator: PRMCollator):
        self.loss, self.gamma, self.collator = loss, gamma, collator
        self.per_row = objective(loss).data in ("pairs", "progress")

    def weight(self, rows: Sequence[dict[str, Any]]) -> float:
        if self.per_row:
            return float(len(rows))
        return float(sum(y != IGNORE for f in rows for y in f["labels"]))

    def __call__(self, model: torch.nn.Module, rows: Sequence[dict[str, Any]]) -> tuple[torch.Tensor, dict]:
        device = next(model.parameters()).device
        batch = {k: v.to(device) for k, v in self.collator(list(rows)).items()}
        out = model(batch["input_ids"], attention_mask=batch.get("attention_mask"),
                    position_ids=batch.get("position_ids"),
                    score_mask=batch["step_mask"])  # every objective reads the logits at step ends only
        weight = self.weight(rows)
        if weight == 0:
            return out.logits.sum() * 0.0, {}  # on the graph: every process's backward takes part
        return prm_loss(self.loss, out.logits, batch, self.gamma) * weight, {}


@dataclass
class PreparedPRM:
    """What `prepare` made: the PRM to train, its tokenized examples (`evals`: None without `data.eval`), the
    counts of `data.unlabelled_rows` (`kept_unlabelled`, `skipped`), the loss, the run's global batches and
    each one's epoch (`step_batches`), and the checkpoint to resume from."""

    cfg: PRMTrainConfig
    prm: ProcessRewardModel
    train: list[dict[str, Any]]
    evals: list[dict[str, Any]] | None
    data_report: dict[str, int]
    loss: PRMLoss
    batches: list[list[dict[str, Any]]]
    epochs: list[int]
    resume: str | bool | None = None


@dataclass
class PRMTrainResult:
    """What `train_prm` returns: the trained PRM (as saved), one record per optimizer step run (`step`, `loss`,
    `lr`; global means over the step's items), the examples trained on, the data report, the loss on
    `data.eval` after training, the processes and the wall time. `prm_train.json` holds the same, less the PRM."""

    output_dir: Path
    prm: ProcessRewardModel
    curve: list[dict[str, float]]
    steps: int
    examples: int
    data_report: dict[str, int] = field(default_factory=dict)
    eval_loss: float | None = None
    processes: int = 1
    seconds: float = 0.0

    @property
    def losses(self) -> list[float]:
        """The loss of every optimizer step run, in order."""
        return [row["loss"] for row in self.curve]

    def summary(self) -> dict[str, Any]:
        return {"output_dir": str(self.output_dir), "steps": self.steps, "examples": self.examples,
                "processes": self.processes, **self.data_report, "eval_loss": self.eval_loss,
                "curve": self.curve, "wall_s": round(self.seconds, 1)}


def _check_output_dir(cfg: PRMTrainConfig, overwrite: bool, resume: str | bool | None) -> None:
    out = Path(cfg.output_dir)
    if resume is None or resume is False:
        if overwrite:
            out.mkdir(parents=True, exist_ok=True)
        else:
            fresh_output_dir(out, ", or write over it (`proctor prm train --overwrite`), or resume its checkpoints "
                                  "(`--resume last`)")
        return
    from transformers.trainer_utils import get_last_checkpoint

    checkpoint = get_last_checkpoint(str(out)) if resume is True and out.is_dir() else resume
    if checkpoint is None or checkpoint is True:
        raise FileNotFoundError(f"{out}: no checkpoint-* folder to resume from (Trainer checkpoints are written "
                                "with training_args: {save_strategy: steps, save_steps: N})")
    if not (Path(checkpoint) / CHECKPOINT_STATE).is_file():
        raise FileNotFoundError(f"{checkpoint}: not a PRM training checkpoint (no {CHECKPOINT_STATE})")


def prepare(cfg: PRMTrainConfig, *, overwrite: bool = False, resume: str | bool | None = None) -> PreparedPRM:
    """Steps 1–3 of the module docstring: inputs checked (a mistake is one line, before any model loads), then
    the PRM built, the data tokenized and cut into batches. `overwrite`: train into a non-empty `output_dir`; `resume`: a
    checkpoint folder, or True for the last one in `output_dir`."""
    _check_output_dir(cfg, overwrite, resume)
    parts = world_size() * cfg.gradient_accumulation_steps
    if cfg.batch_size < parts:
        raise ValueError(f"batch_size {cfg.batch_size} < processes × gradient_accumulation_steps = "
                         f"{world_size()} × {cfg.gradient_accumulation_steps}: every micro-batch needs an example")
    raw = check_inputs(cfg)
    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    m = cfg.model
    prm = ProcessRewardModel.build(
        m.backbone, m.head, sigmoid=objective(cfg.loss).sigmoid, tokenization=cfg.tokenization,
        reward_tokens=m.reward_tokens, dtype=weights_dtype(cfg.precision), lora=m.lora,
        gradient_checkpointing=cfg.gradient_checkpointing, trust_remote_code=m.trust_remote_code)
    if prm.tokenizer.pad_token_id is None:
        raise ValueError(f"tokenizer of {m.backbone!r} has no pad token")
    trained_on = "text" if cfg.data.format in TEXT_FORMATS else "trajectories"
    prm.spec = prm.spec.model_copy(update={"score_at": cfg.data.score_at, "trained_on": trained_on})  # prm_config.json
    report: dict[str, int] = {}
    tokenized = {split: tokenize_examples(prm, render_data(cfg, data, prm.tokenizer), cfg.loss, is_eval=split == "eval",
                                          unlabelled_rows=cfg.data.unlabelled_rows, report=report)
                 for split, data in raw.items()}
    if not tokenized["train"]:
        raise ValueError(f"{cfg.data.train}: no training example is left ({report})")
    loss = PRMLoss(cfg.loss, cfg.gamma, PRMCollator(prm.tokenizer.pad_token_id, cfg.packing, cfg.pack_width))
    batches, epochs = step_batches(tokenized["train"], cfg, loss)
    return PreparedPRM(cfg, prm, tokenized["train"], tokenized.get("eval"), report, loss, batches, epochs, resume)


def step_batches(features: Sequence[Any], cfg: PRMTrainConfig, loss: PRMLoss) -> tuple[list[list[Any]], list[int]]:
    """(the run's global batches, each one's epoch): passes over `features` in the order of
    `random.Random(cfg.seed)` cut into batches of `batch_size` (`shuffled_batches`), `steps` of them or `epochs`
    passes. A batch without a labelled step (every row kept unlabelled) is an error naming it."""
    from proctor.training.engine import shuffled, shuffled_batches

    parts = world_size() * cfg.gradient_accumulation_steps
    full, rest = divmod(len(features), cfg.batch_size)
    per_pass = full + (rest >= parts)
    if per_pass == 0:
        raise ValueError(f"{len(features)} training examples, fewer than processes × gradient_accumulation_steps "
                         f"= {parts}: every micro-batch needs one")
    epochs = cfg.epochs if cfg.steps is None else math.ceil(cfg.steps / per_pass)
    batches, epoch_of = shuffled_batches(features, cfg.batch_size, epochs, shuffled(random.Random(cfg.seed)), cfg)
    batches, epoch_of = batches[:cfg.steps], epoch_of[:cfg.steps]
    for k, batch in enumerate(batches):
        if loss.weight(batch) == 0:
            raise ValueError(f"batch {k} (epoch {epoch_of[k]}) has no labelled step: data.unlabelled_rows: keep "
                             "kept only unlabelled examples there; raise batch_size or tokenization.max_length")
    return batches, epoch_of


def eval_loss(prm: ProcessRewardModel, features: Sequence[dict[str, Any]], loss: PRMLoss, batch_size: int
              ) -> float | None:
    """The objective's mean over every item of `features` (in batches of `batch_size`), without gradients;
    None when no item is labelled."""
    total = weight = 0.0
    prm.eval()
    with torch.no_grad():
        for start in range(0, len(features), batch_size):
            rows = features[start:start + batch_size]
            if loss.weight(rows):
                value, _ = loss(prm, rows)
                total, weight = total + float(value), weight + loss.weight(rows)
    return total / weight if weight else None


def train_prepared(prepared: PreparedPRM) -> PRMTrainResult:
    """Steps 4–5 of the module docstring for what `prepare` made; every process calls it and returns once the
    folder is complete."""
    from proctor.models.loading import resolve_dtype
    from proctor.training.distributed import barrier
    from proctor.training.engine import fit
    from proctor.training.policy import cast_state_dict, saving_state_dict

    start = time.monotonic()
    cfg, prm, out, loss = prepared.cfg, prepared.prm, Path(prepared.cfg.output_dir), prepared.loss
    # the PRM's checkpointing is its own (`build`, which also readies LoRA for it)
    fitted = fit(prm, prepared.batches, loss, cfg.model_copy(update={"gradient_checkpointing": False}), out,
                 label="prm train", epochs=prepared.epochs, resume_from_checkpoint=prepared.resume)
    trainer = fitted.trainer
    held_out = eval_loss(prm, prepared.evals, loss, cfg.batch_size) if prepared.evals else None
    state_dict = saving_state_dict(trainer)  # gathered by every process under FSDP / ZeRO-3
    result = PRMTrainResult(out, prm, fitted.curve, trainer.state.global_step, len(prepared.train),
                            prepared.data_report, held_out, trainer.args.world_size, time.monotonic() - start)
    if trainer.is_world_process_zero():
        if cfg.save_dtype != "float32":
            prm.to(resolve_dtype(cfg.save_dtype))
            state_dict = None if state_dict is None else cast_state_dict(state_dict, cfg.save_dtype)
        prm.save_pretrained(out, state_dict=state_dict)
        summary = {"config": json.loads(cfg.model_dump_json()), **result.summary()}
        (out / TRAIN_FILE).write_text(json.dumps(summary, indent=2))
    barrier()
    return result


def train_prm(cfg: PRMTrainConfig, *, overwrite: bool = False, resume: str | bool | None = None) -> PRMTrainResult:
    """Train a PRM head as the module docstring describes and save it to `cfg.output_dir`. `overwrite`: train
    into a non-empty `output_dir` (else refused); `resume`: continue from a checkpoint folder (True: the last
    one in `output_dir`)."""
    return train_prepared(prepare(cfg, overwrite=overwrite, resume=resume))

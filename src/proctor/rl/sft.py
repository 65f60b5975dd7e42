"""Supervised fine-tuning of a causal LM on demonstrations: the policy π0 that search and RL then improve.

    train_sft(SFTConfig(model="runs/tiny", data="runs/demos", output_dir="runs/sft", steps=300))

`train_sft`, top to bottom:

1. demonstrations: the trajectories of a store (`data`), by default only the successful ones;
2. policy: any HF causal LM by folder or hub name, every weight trained or LoRA adapters (`lora`, peft);
3. examples: each step's prompt from the one renderer (`prompt`: output format, history window, admissible
   list, memory) and its reply, the loss on the agent's tokens only (`proctor.rl.sft_data`); one sequence per
   step, or one per episode when that is exact (`examples: episodes`, T times fewer prompt tokens);
4. optimisation: on the training engine (`proctor.training.fit`, HF `Trainer` on Accelerate): AdamW on
   float32 master weights (bf16 autocast on a GPU), linear warm-up then cosine decay, gradient clipping; batches
   grouped by length; `accelerate launch` / `torchrun` runs it data-parallel unchanged: each of P processes takes
   its share of every global batch of `batch_size`, and the loss is normalised by the whole batch's token weight,
   so P processes (or G accumulation steps) follow the curve of one process at the same `batch_size`;
   the loss is the mean negative log-likelihood of the agent's tokens in the batch,
   L = −(1/|M|) Σ_{(b,j)∈M} log π(x_{b,j} | x_{b,<j}), M the masked-in positions (optionally plus the
   other tokens' NLL at weight `context_weight`, for models trained from scratch; the curve in `sft.json`
   is always the agent tokens' NLL);
5. the policy is saved as a `save_pretrained` folder (safetensors; LoRA merged, adapters in `adapter/`)
   with its tokenizer and `sft.json` (the config, data sizes, loss curve, wall time), written last: a folder
   with `sft.json` is complete.

A recipe that gives a policy with room to improve on `household` from scratch on a CPU (about half of the
held-out tasks as `{"kind": "choice"}` agent, about 3 CPU-minutes; experiments/sft_household.py): a 128-wide
4-layer `build_tiny` model, 2,000 searching-expert demonstrations of the `small` preset, `examples: steps`
with `prompt: {history: 2, memory: true, show_admissible: false, system: ""}`, 1,200 steps of batch 6 at
lr 3e-3, `context_weight: 0.2`.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import torch
from pydantic import Field

from proctor.prompts.render import PromptConfig
from proctor.rl.sft_data import Example, build_examples, length_grouped_batches
from proctor.store import TrajectoryStore
from proctor.training.config import OptimizationConfig

METRICS_FILE = "sft.json"

log = logging.getLogger(__name__)


class SFTConfig(OptimizationConfig):
    """Supervised fine-tuning on demonstrations (see module docstring); one YAML file for `proctor train sft`."""

    model: str = Field(description="the model to fine-tune: a folder (e.g. made by build_tiny) or a hub name")
    lora: dict[str, Any] | None = Field(default=None, description="LoRA (peft LoraConfig arguments, e.g. "
                                        "{r: 8, target_modules: all-linear}); None trains every weight")
    data: Path = Field(description="trajectory store of demonstrations (e.g. the searching expert's rollouts)")
    only_success: bool = Field(default=True, description="train on successful trajectories only")
    max_trajectories: int | None = Field(default=None, ge=1, description="use the first N (after filtering)")
    prompt: PromptConfig = Field(default_factory=PromptConfig, description="the renderer's settings; agents "
                                 "using the policy must use the same")
    examples: Literal["steps", "episodes"] = Field(
        default="steps", description="one sequence per step, or per episode (exact only with history: null, "
                                     "show_admissible: false)")
    context_weight: float = Field(default=0.0, ge=0, description="weight of the next-token loss on the other "
                                  "tokens (observations, task), relative to the agent's; 0: agent tokens only. "
                                  "> 0 helps a model trained from scratch learn the env's language")
    max_length: int | None = Field(default=None, ge=2, description="drop longer sequences (None: keep all)")
    output_dir: Path = Field(description="where the policy folder is written")
    steps: int = Field(default=300, ge=1, description="optimizer steps")
    batch_size: int = Field(default=16, ge=1, description="examples per optimizer step (the global batch, split "
                            "between the processes and the gradient accumulation steps)")
    learning_rate: float = Field(default=1e-3, gt=0, description="peak learning rate of AdamW")
    warmup_ratio: float = Field(default=0.05, ge=0, lt=1, description="share of the steps with a linear warm-up")
    lr_scheduler_type: str = Field(default="cosine", description="a transformers scheduler name")


def collate(examples: list[Example], pad_id: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-padded `(input_ids, attention_mask, loss_mask)`, each [B, L]."""
    width = max(len(e.ids) for e in examples)
    ids = torch.full((len(examples), width), pad_id, dtype=torch.long)
    attn = torch.zeros((len(examples), width), dtype=torch.long)
    loss = torch.zeros((len(examples), width), dtype=torch.long)
    for b, e in enumerate(examples):
        ids[b, :len(e.ids)] = torch.tensor(e.ids, dtype=torch.long)
        attn[b, :len(e.ids)] = 1
        loss[b, :len(e.mask)] = torch.tensor(e.mask, dtype=torch.long)
    return ids, attn, loss


def sft_sums(model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, loss_mask: torch.Tensor,
             context_weight: float = 0.0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """(Σ w_j·nll_j, Σ w_j, Σ of the agent tokens' NLL (detached), their number): the sums `sft_loss` divides.

    Token j is predicted at position j−1 with nll_j = −log π(x_j | x_<j); w_j = 1 on the agent's tokens
    (`loss_mask`), `context_weight` on the other real tokens and 0 on padding. Only positions that predict a
    weighted token are projected to the vocabulary (`logits_to_keep`)."""
    targets = loss_mask[:, 1:].bool()
    weights = targets.float()
    if context_weight > 0:
        weights = weights + context_weight * (attention_mask[:, 1:].bool() & ~targets).float()
    keep = torch.nonzero((weights > 0).any(dim=0)).squeeze(1)  # positions j-1 predicting some weighted token j
    out = model(input_ids=input_ids, attention_mask=attention_mask, logits_to_keep=keep)
    logits = out.logits.float()  # [B, len(keep), V]
    labels = input_ids[:, 1:][:, keep]
    nll = torch.logsumexp(logits, dim=-1) - logits.gather(-1, labels.unsqueeze(-1)).squeeze(-1)
    w, picked = weights[:, keep], targets[:, keep]
    return (nll * w).sum(), w.sum(), (nll.detach() * picked).sum(), int(picked.sum())


def sft_loss(model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, loss_mask: torch.Tensor,
             context_weight: float = 0.0) -> tuple[torch.Tensor, torch.Tensor, int]:
    """(loss to minimise, mean NLL of the agent's tokens (detached), their number): the loss is
    Σ w_j·nll_j / Σ w_j (`sft_sums`; with `context_weight` 0 the agent-token mean of the module docstring)."""
    weighted, weight, agent, n = sft_sums(model, input_ids, attention_mask, loss_mask, context_weight)
    return weighted / weight.clamp(min=1e-8), agent / max(n, 1), n


def load_demonstrations(cfg: SFTConfig) -> list:
    """The store's trajectories that SFT trains on (successful ones unless `only_success` is off)."""
    if not (cfg.data / "manifest.json").is_file():
        raise FileNotFoundError(f"{cfg.data}: not a trajectory store (no manifest.json); field 'data'")
    trajs = [t for t in TrajectoryStore.open(cfg.data).load() if t.success or not cfg.only_success]
    trajs = [t for t in trajs if t.steps][:cfg.max_trajectories]
    if not trajs:
        raise ValueError(f"{cfg.data}: no {'successful ' if cfg.only_success else ''}trajectories with steps to "
                         "train on")
    return trajs


def step_batches(examples: Sequence[Example], cfg: SFTConfig) -> list[list[Example]]:
    """The `cfg.steps` global batches, grouped by length (`length_grouped_batches`, seeded by `cfg.seed`). An
    epoch's last batch with fewer examples than processes × gradient_accumulation_steps (each micro-batch needs
    one) is left out, with a warning; with one process and no accumulation none is."""
    from proctor.training.distributed import world_size

    parts = world_size() * cfg.gradient_accumulation_steps
    order = length_grouped_batches([len(e.ids) for e in examples], cfg.batch_size, random.Random(cfg.seed))
    batches, short = [], 0
    while len(batches) < cfg.steps:
        batch = next(order)
        if len(batch) < parts:
            short += 1
            continue
        batches.append([examples[i] for i in batch])
    if short:
        log.warning("sft: %d short batches left out (fewer examples than processes × gradient_accumulation_steps "
                    "= %d)", short, parts)
    return batches


class SFTLoss:
    """The SFT loss as the engine's `RowLoss`: Σ w_j·nll_j over a micro-batch of examples, its weight Σ w_j
    (agent tokens, plus `context_weight` per other real token), and the agent tokens' NLL sum and count."""

    def __init__(self, pad_id: int, context_weight: float):
        self.pad_id, self.context_weight = pad_id, context_weight

    def weight(self, rows: Sequence[Example]) -> float:
        agent = sum(sum(e.mask[1:]) for e in rows)
        other = sum(len(e.ids) - 1 for e in rows) - agent
        return agent + self.context_weight * other

    def __call__(self, model: Any, rows: Sequence[Example]) -> tuple[torch.Tensor, dict[str, Any]]:
        ids, attn, mask = collate(list(rows), self.pad_id)
        device = next(model.parameters()).device
        weighted, _, agent_sum, n = sft_sums(model, ids.to(device), attn.to(device), mask.to(device),
                                             self.context_weight)
        return weighted, {"agent_nll": agent_sum, "agent_tokens": float(n)}


def train_sft(cfg: SFTConfig) -> Path:
    """Fine-tune `cfg.model` on `cfg.data` as the module docstring describes; returns the policy folder."""
    from proctor.agents.generation_utils import eos_token_ids
    from proctor.training.engine import fit
    from proctor.training.policy import load_policy, save_trained

    start = time.monotonic()
    # 1. demonstrations
    trajs = load_demonstrations(cfg)
    # 2. policy (float32 weights whatever the checkpoint's dtype; the Trainer places it)
    torch.manual_seed(cfg.seed)
    model, tokenizer = load_policy(cfg.model, lora=cfg.lora, precision=cfg.precision)
    # 3. examples, the loss on the agent's tokens only
    examples = build_examples(tokenizer, trajs, cfg.prompt, set(eos_token_ids(model, tokenizer)), cfg.examples)
    if cfg.max_length is not None:
        examples = [e for e in examples if len(e.ids) <= cfg.max_length]
    if not examples:
        raise ValueError(f"no examples of at most max_length={cfg.max_length} tokens")
    lengths = [len(e.ids) for e in examples]
    batches = step_batches(examples, cfg)
    # 4. optimisation on the engine
    result = fit(model, batches, SFTLoss(tokenizer.pad_token_id, cfg.context_weight), cfg,
                 Path(cfg.output_dir) / "trainer", label="sft")
    trainer = result.trainer
    losses = [r["agent_nll"] / max(r["agent_tokens"], 1e-12) for r in result.curve]
    trained_tokens = sum(len(e.ids) for b in batches for e in b)
    # 5. save (one process writes; every process returns once the folder is complete)
    out = save_trained(model, tokenizer, cfg.output_dir, cfg.save_dtype, trainer)
    if trainer.is_world_process_zero():
        metrics = {
            "config": json.loads(cfg.model_dump_json()), "processes": trainer.args.world_size,
            "trajectories": len(trajs), "examples": len(examples), "example_tokens": sum(lengths),
            "target_tokens": sum(sum(e.mask) for e in examples), "trained_tokens": trained_tokens,
            "loss_first": sum(losses[:10]) / len(losses[:10]), "loss_last": sum(losses[-10:]) / len(losses[-10:]),
            "losses": [round(x, 5) for x in losses], "tokens_per_s": round(trained_tokens / result.seconds, 1),
            "wall_s": round(time.monotonic() - start, 2),
        }
        (out / METRICS_FILE).write_text(json.dumps(metrics, indent=2))
    trainer.accelerator.wait_for_everyone()
    return out

"""Agent steps as policy-gradient training rows: the state's prompt (the one renderer, as the agent saw it) and
the token ids the policy generated for its action (`Step.token_ids`, never a re-tokenization), with per-token
quantities filled in before the updates (old, reference and sampling log-probs; advantages; values).

Right-aligned [B, K] tensors are the layout of `proctor.models.sequences.completion_logprobs`: each row's tokens
occupy its last len(completion) columns.

The rows train on the engine (`proctor.training.fit`): `minibatches` orders them into the global batches of the
PPO epochs, and `ClippedPolicyLoss` is the clipped surrogate (+ KL to `KLReference`) as its `RowLoss`.
"""

from __future__ import annotations

import contextlib
import logging
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from proctor.models.sequences import completion_logprobs
from proctor.prompts import PromptConfig, prefix_at
from proctor.rl.pairs import prompt_ids
from proctor.rl.policy_losses import KL_PENALTIES, Aggregation, aggregate_sum, ppo_clip_tokens
from proctor.trajectory import Trajectory

log = logging.getLogger(__name__)


@dataclass
class StepRow:
    """One agent step as a training row (see module docstring)."""

    prompt_ids: list[int]
    completion_ids: list[int]
    advantage: float = 0.0
    sampling_logprobs: list[float] | None = None
    old_logprobs: list[float] = field(default_factory=list)
    ref_logprobs: list[float] = field(default_factory=list)
    token_advantages: list[float] = field(default_factory=list)
    returns: list[float] = field(default_factory=list)
    old_values: list[float] = field(default_factory=list)
    where: tuple[str, int] = ("", 0)

    def advantages(self) -> list[float]:
        """A per completion token: `token_advantages` (PPO's GAE) or the row's `advantage` on every token."""
        return self.token_advantages or [self.advantage] * len(self.completion_ids)


def step_row(tokenizer: Any, traj: Trajectory, t: int, cfg: PromptConfig | None) -> StepRow:
    """Step t of `traj` as a row; a step without the policy's token ids is an error."""
    step = traj.steps[t]
    if not step.token_ids:
        raise ValueError(f"trajectory {traj.id} step {t}: no token_ids; policy-gradient training needs the ids "
                         "the policy generated (roll out with an hf or choice agent)")
    return StepRow(prompt_ids(tokenizer, prefix_at(traj, t), cfg), list(step.token_ids),
                   sampling_logprobs=step.logprobs, where=(traj.id, t))


def right_aligned(values: Sequence[Sequence[float]], k: int, device: Any = None) -> torch.Tensor:
    """Rows of different lengths as a right-aligned float tensor [len(values), k] (zeros on the left)."""
    out = torch.zeros((len(values), k), dtype=torch.float32)
    for b, v in enumerate(values):
        if v:
            out[b, k - len(v):] = torch.tensor(list(v), dtype=torch.float32)
    return out if device is None else out.to(device)


class KLReference:
    """π_ref of a KL penalty, the starting policy, without a copy of the trained weights: with LoRA the policy
    with its adapters disabled (`adapters_disabled`); without, the starting checkpoint `name_or_path` loaded
    once for inference (frozen, eval mode, in the inference precision: bf16 on a CUDA device with bf16)."""

    def __init__(self, policy: torch.nn.Module, name_or_path: str, device: str):
        from proctor.models.loading import load
        from proctor.training.policy import is_peft
        from proctor.training.precision import inference_dtype

        self.policy, self.frozen = policy, None
        if not is_peft(policy):
            self.frozen, _ = load(name_or_path, dtype=inference_dtype("auto", device), device=device)
            self.frozen.eval().requires_grad_(False)

    @contextlib.contextmanager
    def model(self) -> Iterator[torch.nn.Module]:
        from proctor.training.policy import adapters_disabled

        if self.frozen is not None:
            yield self.frozen
        else:
            with adapters_disabled(self.policy) as base:
                yield base


def autocast(device: str, dtype: str | None) -> contextlib.AbstractContextManager:
    """Autocast to `dtype` ("bfloat16", "float16") on `device`, as the engine's training forward runs
    (`proctor.training.precision.autocast_dtype`); no autocast for None."""
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(torch.device(device).type, dtype=getattr(torch, dtype))


@torch.no_grad()
def set_logprobs(model: torch.nn.Module, rows: Sequence[StepRow], attr: str, pad_id: int, batch_size: int) -> None:
    """Set `attr` of every row to its completion's per-token log-probs under `model`."""
    for i in range(0, len(rows), batch_size):
        chunk = rows[i:i + batch_size]
        logps, mask = completion_logprobs(model, [(r.prompt_ids, r.completion_ids) for r in chunk], pad_id)
        for b, r in enumerate(chunk):
            setattr(r, attr, logps[b][mask[b].bool()].float().cpu().tolist())


def fill_logprobs(policy: torch.nn.Module, reference: KLReference | torch.nn.Module | None, rows: Sequence[StepRow],
                  pad_id: int, batch_size: int, autocast_dtype: str | None = None) -> float | None:
    """Set every row's old (and reference) per-token log-probs, computed by the training forward pass in eval
    mode (under the engine's autocast `autocast_dtype`, so the first ratio is 1); returns the largest
    |sampling − old| gap over rows that stored sampling log-probs (None: none did)."""
    policy.eval()
    device = str(next(policy.parameters()).device)
    with autocast(device, autocast_dtype):
        set_logprobs(policy, rows, "old_logprobs", pad_id, batch_size)
        if reference is not None:
            with (reference.model() if isinstance(reference, KLReference) else contextlib.nullcontext(reference)) \
                    as ref:
                set_logprobs(ref, rows, "ref_logprobs", pad_id, batch_size)
    gaps = [max(abs(a - b) for a, b in zip(r.sampling_logprobs, r.old_logprobs, strict=True)) for r in rows
            if r.sampling_logprobs and len(r.sampling_logprobs) == len(r.old_logprobs)]
    return max(gaps) if gaps else None


def minibatches(rows: Sequence[Any], size: int, epochs: int, rng: random.Random, min_rows: int = 1
                ) -> list[list[Any]]:
    """The global batches of `epochs` passes over `rows`: each pass a shuffle (by `rng`, the trainer's own
    generator, so the order does not depend on the number of processes) cut into minibatches of `size` rows.
    A pass's last minibatch with fewer than `min_rows` rows (processes × accumulation steps, which each need
    one) is left out, with a warning."""
    out: list[list[Any]] = []
    for _ in range(epochs):
        order = list(range(len(rows)))
        rng.shuffle(order)
        for start in range(0, len(order), size):
            chunk = [rows[i] for i in order[start:start + size]]
            if len(chunk) < min_rows:
                log.warning("a minibatch of %d rows left out: fewer than processes × gradient_accumulation_steps "
                            "= %d", len(chunk), min_rows)
                continue
            out.append(chunk)
    return out


def aggregation_weight(rows: Sequence[StepRow], aggregation: Aggregation) -> float:
    """A `RowLoss` weight: the items `aggregate` averages over (`aggregation_items`), known before the forward
    pass: the rows' completion tokens (`token-mean`) or the rows (`seq-mean-*`; every completion has a token)."""
    return float(sum(len(r.completion_ids) for r in rows) if aggregation == "token-mean" else len(rows))


class ClippedPolicyLoss:
    """The engine's `RowLoss` of the clipped surrogate (`ppo_clip_tokens`) plus `kl_coef`·KL(π‖π_ref) per token
    (`KL_PENALTIES[kl_estimator]` against the rows' `ref_logprobs`), both aggregated by `aggregation`: the
    call returns Σ over the aggregation's items (`aggregate_sum`; tokens, or rows for `seq-mean-*`) and the
    weight counts them, so a step's loss is exactly `aggregate` over its global batch. Stats (`clipfrac`,
    `approx_kl`, `ratio`, `kl`) are aggregated in the same way."""

    def __init__(self, pad_id: int, clip_low: float, clip_high: float | None, aggregation: Aggregation,
                 kl_coef: float = 0.0, kl_estimator: str = "k3"):
        self.pad_id, self.clip_low, self.clip_high, self.aggregation = pad_id, clip_low, clip_high, aggregation
        self.kl_coef, self.kl = kl_coef, KL_PENALTIES.get(kl_estimator) if kl_coef > 0 else None

    def weight(self, rows: Sequence[StepRow]) -> float:
        return aggregation_weight(rows, self.aggregation)

    def __call__(self, model: torch.nn.Module, rows: Sequence[StepRow]) -> tuple[torch.Tensor, dict[str, Any]]:
        logps, mask = completion_logprobs(model, [(r.prompt_ids, r.completion_ids) for r in rows], self.pad_id)
        width, dev = mask.shape[1], logps.device
        old = right_aligned([r.old_logprobs for r in rows], width, dev)
        adv = right_aligned([r.advantages() for r in rows], width, dev)
        loss, per_token = ppo_clip_tokens(logps, old, adv, self.clip_low, self.clip_high)
        total = aggregate_sum(loss, mask, self.aggregation)
        if self.kl is not None:
            per_token["kl"] = self.kl(logps, right_aligned([r.ref_logprobs for r in rows], width, dev))
            total = total + self.kl_coef * aggregate_sum(per_token["kl"], mask, self.aggregation)
        return total, {k: aggregate_sum(v.detach(), mask, self.aggregation) for k, v in per_token.items()}

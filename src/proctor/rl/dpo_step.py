"""The DPO loss over preference pairs as the training engine's `RowLoss` (`DPOLoss`), and the reference
log-probabilities it compares to.

For a batch of B pairs, each prompt runs once and its KV cache serves both completions (chosen and rejected;
`proctor.models.sequences.shared_prompt_logprobs`, gradients through the cache), or the 2B concatenated sequences
run in one pass (`shared_prompt=False`); the vocabulary is projected only at completion positions. The sequence
log-probs (sums, or per-token means with `average`) go to a registered DPO loss (`proctor.rl.dpo_losses`).

The reference is the policy before an iteration's first update (online DPO's previous iterate): its
log-probs on the iteration's pairs are computed once, in eval mode without gradients, before training
(`reference_logprobs`). That gives exactly the numbers a frozen copy of the model would give at every step,
without holding a second model in memory (TRL's `precompute_ref_log_probs`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from proctor.models.sequences import (
    batch_logprobs,
    collate_completions,
    sequence_logprobs,
    shared_prompt_logprobs,
)
from proctor.rl.dpo_losses import DPO_LOSSES, chosen_nll, log_ratio_margin
from proctor.rl.pairs import CandidatePair


def pair_rows(pairs: Sequence[CandidatePair]) -> list[tuple[list[int], list[int]]]:
    """The chosen sequences of `pairs`, then their rejected sequences."""
    return [(p.prompt_ids, p.chosen_ids) for p in pairs] + [(p.prompt_ids, p.rejected_ids) for p in pairs]


def pair_logprobs(model: torch.nn.Module, pairs: Sequence[CandidatePair], pad_id: int, average: bool = False,
                  shared_prompt: bool = True) -> tuple[torch.Tensor, torch.Tensor, int]:
    """(log π(chosen) [B], log π(rejected) [B], real tokens of the 2B sequences). `shared_prompt`: each pair's
    prompt runs once for both completions (`shared_prompt_logprobs`); False: the 2B concatenated rows run
    (`completion_logprobs`, e.g. with gradient checkpointing). Both give the same numbers."""
    if shared_prompt:
        logps, mask, _ = shared_prompt_logprobs(model, [p.prompt_ids for p in pairs],
                                                [(p.chosen_ids, p.rejected_ids) for p in pairs], pad_id)
        seq = sequence_logprobs(logps, mask, average)
        return seq[0::2], seq[1::2], sum(p.tokens for p in pairs)
    batch = collate_completions(pair_rows(pairs), pad_id)
    logps = sequence_logprobs(batch_logprobs(model, batch), batch.completion_mask.to(
        next(model.parameters()).device), average)
    return logps[: len(pairs)], logps[len(pairs):], batch.tokens


@torch.no_grad()
def reference_logprobs(model: torch.nn.Module, pairs: Sequence[CandidatePair], pad_id: int, batch_size: int,
                       average: bool = False, shared_prompt: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """log π_ref of every pair's chosen and rejected completion, [P] each, with `model` as it is now (eval
    mode, no gradients; the train/eval mode is restored)."""
    was_training = model.training
    model.eval()
    chosen, rejected = [], []
    try:
        for i in range(0, len(pairs), batch_size):
            c, r, _ = pair_logprobs(model, pairs[i:i + batch_size], pad_id, average, shared_prompt)
            chosen.append(c.float())
            rejected.append(r.float())
    finally:
        model.train(was_training)
    return torch.cat(chosen), torch.cat(rejected)


@dataclass(frozen=True)
class DPORow:
    """One training row: a preference pair and its reference log-probs log π_ref(y_c), log π_ref(y_r)."""

    pair: CandidatePair
    ref_chosen: float
    ref_rejected: float


class DPOLoss:
    """The DPO loss as the engine's `RowLoss` (`proctor.training.engine`): weight = the number of pairs; a call
    returns Σ_pairs [L_loss(h) + α·nll_c] and the sums of `nll` (−log π(y_c)/|y_c|), `chosen_logratio` and
    `rejected_logratio` (log π − log π_ref of each side), `margin` (h) and `accuracy` (1[h > 0]), so the curve
    holds their means per optimizer step. `shared_prompt`: see `pair_logprobs`."""

    def __init__(self, pad_id: int, loss: str = "sigmoid", beta: float = 0.1, label_smoothing: float = 0.0,
                 average: bool = False, rpo_alpha: float = 0.0, shared_prompt: bool = True):
        self.loss_fn = DPO_LOSSES[loss]
        self.pad_id, self.beta, self.label_smoothing = pad_id, beta, label_smoothing
        self.average, self.rpo_alpha, self.shared_prompt = average, rpo_alpha, shared_prompt

    def weight(self, rows: Sequence[DPORow]) -> float:
        return float(len(rows))

    def __call__(self, model: torch.nn.Module, rows: Sequence[DPORow]) -> tuple[torch.Tensor, dict[str, Any]]:
        pairs = [r.pair for r in rows]
        pc, pr, _ = pair_logprobs(model, pairs, self.pad_id, self.average, self.shared_prompt)
        pc, pr = pc.float(), pr.float()
        ref_c = torch.tensor([r.ref_chosen for r in rows], device=pc.device)
        ref_r = torch.tensor([r.ref_rejected for r in rows], device=pc.device)
        reward_margin = torch.tensor([p.scores[0] - p.scores[1] for p in pairs], device=pc.device)
        losses = self.loss_fn(pc, pr, ref_c, ref_r, beta=self.beta, label_smoothing=self.label_smoothing,
                              reward_margin=reward_margin)
        lengths = torch.tensor([len(p.chosen_ids) for p in pairs], device=pc.device)
        nll = chosen_nll(pc * lengths if self.average else pc, lengths)
        total = losses.sum() + self.rpo_alpha * nll.sum() if self.rpo_alpha else losses.sum()
        with torch.no_grad():
            h = log_ratio_margin(pc, pr, ref_c, ref_r)
            stats = {"nll": nll.sum(), "chosen_logratio": (pc - ref_c).sum(),
                     "rejected_logratio": (pr - ref_r).sum(), "margin": h.sum(), "accuracy": (h > 0).sum()}
        return total, stats

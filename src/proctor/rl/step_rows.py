"""Agent steps as policy-gradient training rows: the state's prompt (the one renderer, as the agent saw it) and
the token ids the policy generated for its action (`Step.token_ids`, never a re-tokenization), with per-token
quantities filled in before the updates (old, reference and sampling log-probs; advantages; values).

Right-aligned [B, K] tensors are the layout of `proctor.models.sequences.completion_logprobs`: each row's tokens
occupy its last len(completion) columns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from proctor.models.sequences import completion_logprobs
from proctor.prompts import PromptConfig, prefix_at
from proctor.rl.pairs import prompt_ids
from proctor.trajectory import Trajectory


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


@torch.no_grad()
def fill_logprobs(policy: torch.nn.Module, reference: torch.nn.Module | None, rows: Sequence[StepRow],
                  pad_id: int, batch_size: int) -> float | None:
    """Set every row's old (and reference) per-token log-probs, computed by the training forward pass in eval
    mode; returns the largest |sampling − old| gap over rows that stored sampling log-probs (None: none did)."""
    policy.eval()
    drift: float | None = None
    for i in range(0, len(rows), batch_size):
        chunk = rows[i:i + batch_size]
        pairs = [(r.prompt_ids, r.completion_ids) for r in chunk]
        for model, attr in ((policy, "old_logprobs"), (reference, "ref_logprobs")):
            if model is None:
                continue
            logps, mask = completion_logprobs(model, pairs, pad_id)
            for b, r in enumerate(chunk):
                setattr(r, attr, logps[b][mask[b].bool()].float().cpu().tolist())
        for r in chunk:
            if r.sampling_logprobs and len(r.sampling_logprobs) == len(r.old_logprobs):
                gap = max(abs(a - b) for a, b in zip(r.sampling_logprobs, r.old_logprobs, strict=True))
                drift = gap if drift is None else max(drift, gap)
    return drift

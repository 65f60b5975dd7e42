"""PRM training objectives: which head a loss trains, which data it reads, and how it gathers its inputs
from a collated batch (padded or packed) before calling the pure loss in `proctor.prm.losses`.

A batch (`tokenize.collate` or `tokenize.pack`) holds per-token `labels` (-100 off the labelled step ends),
`step_mask` (1 at every step end), `sequence_ids` (the example each token belongs to, -1 on padding) and,
per example, `outcome`. Positions taken with a boolean mask come out in row-major order, so the step ends of
one example are consecutive and in order, padded or packed alike.

| objective       | head(s)                      | data                    | loss (losses.py)                  |
|-----------------|------------------------------|-------------------------|-----------------------------------|
| `bce`           | scalar                       | step labels in [0, 1]   | soft_bce_loss (AgentPRM, §7)      |
| `mse`           | scalar                       | real step targets       | mse_loss (SPA, value models, §7)  |
| `ce`, `soft_ce` | classification, reward_tokens| bool / prob step labels | (soft) cross-entropy (TRL, §2, §7)|
| `bradley_terry` | scalar                       | preference pairs        | bradley_terry_loss (AgentPRM rel.)|
| `progress_sum`  | scalar                       | trajectory outcome R    | progress_sum_loss (SPA, §6)       |
| `td_bce`        | scalar                       | transitions (label)     | td_difference_bce_loss (§5)       |

`td_bce` reads an example's labels as transitions: a label on step k is the label of the transition
(s_k, a_k) → (s_{k+1}, a_{k+1}) when step k+1 is in the same example, and of a terminal transition when
step k is the example's last step. A value model V(s) is `bce`/`mse` with the score read at the end of each
state instead of each action (`rendering.render_states`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from proctor.prm import losses
from proctor.prm.tokenize import IGNORE
from proctor.registry import Registry

Batch = dict[str, torch.Tensor]


@dataclass(frozen=True)
class Objective:
    """A named training objective (see the module table)."""

    name: str
    heads: tuple[str, ...]
    data: str  # "steps" | "pairs" | "progress" | "transitions"
    sigmoid: bool  # scalar head: the step score is σ(logit) (else the raw value)
    loss: Callable[[torch.Tensor, Batch, float], torch.Tensor]


def _labelled(logits: torch.Tensor, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
    keep = batch["labels"] != IGNORE
    if not keep.any():
        raise ValueError("the batch has no labelled step")
    return logits[keep].float(), batch["labels"][keep]


def _pointwise(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]):
    def loss(logits: torch.Tensor, batch: Batch, gamma: float) -> torch.Tensor:
        return fn(*_labelled(logits, batch))

    return loss


def pair_loss(logits: torch.Tensor, batch: Batch, gamma: float = 0.0) -> torch.Tensor:
    """Bradley–Terry over the collated pairs: examples 2i (chosen, label 1) and 2i+1 (rejected, label 0)
    each carry exactly one labelled step, whose logit is r_c or r_r; L = mean −log σ(r_c − r_r)."""
    keep = batch["labels"] != IGNORE
    seq, z, y = batch["sequence_ids"][keep], logits[keep].float(), batch["labels"][keep]
    n = int(batch["sequence_ids"].max()) + 1
    if (
        n % 2
        or seq.numel() != n
        or not torch.equal(torch.sort(seq).values, torch.arange(n, device=seq.device))
    ):
        raise ValueError(
            f"bradley_terry needs pairs of examples with one labelled step each; got {n} examples and "
            f"{seq.numel()} labelled steps"
        )
    order = torch.argsort(seq)
    r, y = z[order], y[order]
    if not (torch.all(y[0::2] == 1) and torch.all(y[1::2] == 0)):
        raise ValueError("bradley_terry pairs must be labelled chosen = 1, rejected = 0")
    return losses.bradley_terry_loss(r[0::2], r[1::2])


def progress_loss(logits: torch.Tensor, batch: Batch, gamma: float = 0.0) -> torch.Tensor:
    """SPA progress sum: ĉ at every step end, summed per example, against that example's `outcome`."""
    if "outcome" not in batch:
        raise ValueError("loss 'progress_sum' needs an 'outcome' per example (StepwiseExample.outcome)")
    steps = batch["step_mask"].bool()
    z, seq = logits[steps].float(), batch["sequence_ids"][steps]
    n = batch["outcome"].numel()
    member = seq.unsqueeze(0) == torch.arange(n, device=seq.device).unsqueeze(1)  # [n, steps]
    return losses.progress_sum_loss(z.expand(n, -1), member, batch["outcome"])


def transition_loss(logits: torch.Tensor, batch: Batch, gamma: float = 0.95) -> torch.Tensor:
    """Inverse PRM (§5): Q = the logit at each labelled step end; Q(s', a') = the logit at the next step end
    of the same example, absent (terminal) after its last step; L = BCE(Q − γ·Q', label)."""
    steps = batch["step_mask"].bool()
    z, seq, y = logits[steps].float(), batch["sequence_ids"][steps], batch["labels"][steps]
    has_next = torch.zeros_like(seq, dtype=torch.bool)
    has_next[:-1] = seq[1:] == seq[:-1]
    q_next = torch.cat([z[1:], z.new_zeros(1)])
    keep = y != IGNORE
    if not keep.any():
        raise ValueError("the batch has no labelled transition")
    return losses.td_difference_bce_loss(z[keep], q_next[keep], ~has_next[keep], y[keep], gamma)


SCALAR = ("scalar",)
TWO_CLASS = ("classification", "reward_tokens")
#: the PRM objectives by loss name
OBJECTIVES = Registry[Objective]("PRM loss", {
    o.name: o
    for o in (
        Objective("bce", SCALAR, "steps", True, _pointwise(losses.soft_bce_loss)),
        Objective("mse", SCALAR, "steps", False, _pointwise(losses.mse_loss)),
        Objective("ce", TWO_CLASS, "steps", True, _pointwise(losses.cross_entropy_loss)),
        Objective("soft_ce", TWO_CLASS, "steps", True, _pointwise(losses.soft_cross_entropy_loss)),
        Objective("bradley_terry", SCALAR, "pairs", True, pair_loss),
        Objective("progress_sum", SCALAR, "progress", False, progress_loss),
        Objective("td_bce", SCALAR, "transitions", True, transition_loss),
    )
})


def objective(name: str) -> Objective:
    return OBJECTIVES[name]

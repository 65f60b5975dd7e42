"""PRM losses: pure functions over tensors (docs/methods.md §5–§7). Each returns a scalar mean.

Conventions: a "logit" is the scalar head's output (score = σ(logit)); two-class logits are ordered
[wrong, correct] (TRL's token classification: label True → class 1; the reward-token head orders its
restricted logits [−, +] the same way). Inputs are already gathered at the labelled step positions,
except `progress_sum_loss`, which needs the per-trajectory grouping.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def soft_bce_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """AgentPRM (§7): L = mean −[y·log σ(z) + (1−y)·log(1−σ(z))] with soft labels y = Q̃ ∈ [0, 1]."""
    return F.binary_cross_entropy_with_logits(logits, targets.to(logits.dtype))


def mse_loss(values: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Value regression (SPA, value models, §7): L = mean (v − y)² for any real target y."""
    return F.mse_loss(values, targets.to(values.dtype))


def bradley_terry_loss(chosen: torch.Tensor, rejected: torch.Tensor) -> torch.Tensor:
    """AgentPRM relative loss (§7): L = mean −log σ(r_c − r_r) = mean softplus(r_r − r_c)."""
    return F.softplus(rejected - chosen).mean()


def progress_sum_loss(
    step_values: torch.Tensor, step_mask: torch.Tensor, outcome: torch.Tensor
) -> torch.Tensor:
    """SPA-RL progress attribution (§6): L = mean_i (Σ_k ĉ_{i,k} − R_i)².

    step_values [B, L] (the head output at every position), step_mask [B, L] (1 at step ends), outcome [B].
    Only the sum over a trajectory's steps is supervised."""
    sums = (step_values * step_mask.to(step_values.dtype)).sum(dim=-1)
    return ((sums - outcome.to(sums.dtype)) ** 2).mean()


def cross_entropy_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Hard two-class cross-entropy (TRL PRMTrainer, §7): L = mean −log softmax(z)[y], y ∈ {0, 1}.
    logits [N, 2], labels [N] (bool, int, or float 0/1)."""
    return F.cross_entropy(logits, labels.long())


def soft_cross_entropy_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Soft two-class cross-entropy (Math-Shepherd soft labels y_SE, OpenRLHF, §2, §7):
    L = mean −[p·log softmax(z)₁ + (1−p)·log softmax(z)₀], p ∈ [0, 1] the probability the step is correct.
    logits [N, 2] ordered [wrong, correct]."""
    logp = F.log_softmax(logits, dim=-1)
    p = targets.to(logp.dtype)
    return -(p * logp[:, 1] + (1 - p) * logp[:, 0]).mean()


def td_difference_bce_loss(
    q: torch.Tensor, q_next: torch.Tensor, terminal: torch.Tensor, labels: torch.Tensor, gamma: float = 0.95
) -> torch.Tensor:
    """Inverse PRM / value-model TD difference (AgentPRM §3, docs/methods.md §5):
    r̂ = Q(s,a) − γ·Q(s',a') for non-terminal transitions, r̂ = Q(s,a) for terminal ones;
    L = mean BCE-with-logits(r̂, label) (label 1 for expert transitions, 0 for policy rollouts).
    q, q_next, terminal, labels: [N]; q_next is ignored where terminal."""
    not_term = (~terminal.bool()).to(q.dtype)
    implied = q - gamma * not_term * q_next
    return F.binary_cross_entropy_with_logits(implied, labels.to(q.dtype))

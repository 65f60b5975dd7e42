"""DPO-family losses over sequence log-probabilities, registered by name in `DPO_LOSSES`.

Every loss takes the policy's and the reference's log-probabilities of the chosen and the rejected
completion (tensors of shape [B]: sums over completion tokens, or per-token means when the caller
length-normalises) and β, and returns the per-pair loss [B]. With

    h = (log π(y_c) − log π(y_r)) − (log π_ref(y_c) − log π_ref(y_r))    (the log-ratio margin)

- `sigmoid` (DPO, Rafailov et al. 2023, arXiv 2305.18290, eq. 7): L = −log σ(β·h); with label smoothing ε
  (conservative DPO, Mitchell 2023): L = −(1 − ε)·log σ(β·h) − ε·log σ(−β·h).
- `ipo` (IPO, Azar et al. 2023, arXiv 2310.12036, eq. 17): L = (h − 1/(2β))².
- `rebel` (REBEL, Gao et al. 2024, arXiv 2404.16767, eq. 4 with η = 1/β): L = (β·h − (r_c − r_r))², the
  implicit reward margin regressed on the reward model's margin Δr = r_c − r_r (`reward_margin`). Its optimum
  is π ∝ π_ref·exp(r/β), as DPO's, but a pair's target margin is Δr/β: a near-tie is not pushed apart, and
  no pair is pushed without bound (DPO's margin grows as long as it trains, lowering both completions).

The implicit reward of a completion is r = β·(log π(y) − log π_ref(y)) (DPO §5).

`chosen_nll` is the extra term of RPO (Pang et al. 2024, "Iterative Reasoning Preference Optimization", arXiv
2404.19733, eq. 1; TRL's `rpo_alpha`): L = L_DPO + α·(−log π(y_c) / |y_c|), the chosen completion's
per-token negative log-likelihood. DPO alone may lower the chosen completion's likelihood along with the
rejected one's (both log-ratios fall, the margin still grows); the NLL term keeps the chosen one up.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from proctor.registry import Registry

DPO_LOSSES = Registry[Callable[..., Any]]("DPO loss")


def log_ratio_margin(policy_chosen: torch.Tensor, policy_rejected: torch.Tensor, ref_chosen: torch.Tensor,
                     ref_rejected: torch.Tensor) -> torch.Tensor:
    """h = (log π_c − log π_r) − (log π_ref,c − log π_ref,r), per pair."""
    return (policy_chosen - policy_rejected) - (ref_chosen - ref_rejected)


def implicit_rewards(policy_logps: torch.Tensor, ref_logps: torch.Tensor, beta: float) -> torch.Tensor:
    """r = β·(log π(y) − log π_ref(y)), DPO's implicit reward of each completion."""
    return beta * (policy_logps - ref_logps)


def _check(name: str, beta: float, label_smoothing: float, smoothing_allowed: bool = False) -> None:
    if beta <= 0:
        raise ValueError(f"beta must be > 0, got {beta}")
    if smoothing_allowed and not 0.0 <= label_smoothing < 0.5:
        raise ValueError(f"label_smoothing must be in [0, 0.5), got {label_smoothing}")
    if not smoothing_allowed and label_smoothing:
        raise ValueError(f"the {name} loss has no label smoothing")


@DPO_LOSSES.register("sigmoid")
def sigmoid_loss(policy_chosen: torch.Tensor, policy_rejected: torch.Tensor, ref_chosen: torch.Tensor,
                 ref_rejected: torch.Tensor, beta: float, label_smoothing: float = 0.0,
                 reward_margin: torch.Tensor | None = None) -> torch.Tensor:
    """DPO: −(1 − ε)·log σ(β·h) − ε·log σ(−β·h) per pair (ε = label_smoothing, 0 by default; the reward
    margin is not used)."""
    _check("sigmoid", beta, label_smoothing, smoothing_allowed=True)
    z = beta * log_ratio_margin(policy_chosen, policy_rejected, ref_chosen, ref_rejected)
    return -(1.0 - label_smoothing) * F.logsigmoid(z) - label_smoothing * F.logsigmoid(-z)


@DPO_LOSSES.register("ipo")
def ipo_loss(policy_chosen: torch.Tensor, policy_rejected: torch.Tensor, ref_chosen: torch.Tensor,
             ref_rejected: torch.Tensor, beta: float, label_smoothing: float = 0.0,
             reward_margin: torch.Tensor | None = None) -> torch.Tensor:
    """IPO: (h − 1/(2β))² per pair (`label_smoothing` must be 0: IPO has none; the reward margin is not used)."""
    _check("ipo", beta, label_smoothing)
    h = log_ratio_margin(policy_chosen, policy_rejected, ref_chosen, ref_rejected)
    return (h - 1.0 / (2.0 * beta)) ** 2


@DPO_LOSSES.register("rebel")
def rebel_loss(policy_chosen: torch.Tensor, policy_rejected: torch.Tensor, ref_chosen: torch.Tensor,
               ref_rejected: torch.Tensor, beta: float, label_smoothing: float = 0.0,
               reward_margin: torch.Tensor | None = None) -> torch.Tensor:
    """REBEL: (β·h − Δr)² per pair, Δr = `reward_margin` (r_c − r_r, required; no label smoothing)."""
    _check("rebel", beta, label_smoothing)
    if reward_margin is None:
        raise ValueError("the rebel loss needs each pair's reward margin r_c − r_r")
    h = log_ratio_margin(policy_chosen, policy_rejected, ref_chosen, ref_rejected)
    return (beta * h - reward_margin.to(h.dtype)) ** 2


def chosen_nll(policy_chosen_sum: torch.Tensor, chosen_tokens: torch.Tensor) -> torch.Tensor:
    """RPO's NLL term per pair: −log π(y_c) / |y_c|, from the chosen completion's summed log-prob [B] and its
    token count [B]."""
    if bool((chosen_tokens <= 0).any()):
        raise ValueError("every chosen completion needs at least one token")
    return -policy_chosen_sum / chosen_tokens.to(policy_chosen_sum.dtype)

"""PRM heads: how a backbone's hidden states become per-token logits and step scores (docs/methods.md §7.2).

| head            | HF model class                    | logits per token            | score            |
|-----------------|-----------------------------------|-----------------------------|------------------|
| `scalar`        | AutoModelForTokenClassification/1 | z ∈ ℝ                       | σ(z) or z        |
| `classification`| AutoModelForTokenClassification/2 | [z_wrong, z_correct] (TRL)  | softmax(z)₁      |
| `reward_tokens` | AutoModelForCausalLM              | LM logits at [−, +] tokens  | softmax(z)₁      |

Using the HF token-classification class means a `classification` PRM saved by proctor is exactly the
checkpoint format TRL's PRMTrainer writes, and loads either way.
"""

from __future__ import annotations

from typing import Any, Literal

import torch
from torch import nn

HeadKind = Literal["scalar", "classification", "reward_tokens"]
HEADS: tuple[str, ...] = ("scalar", "classification", "reward_tokens")


def check_head(kind: str) -> None:
    if kind not in HEADS:
        raise ValueError(f"unknown PRM head {kind!r}; expected one of {HEADS}")


def auto_class(kind: str) -> Any:
    """The transformers Auto class that builds a backbone with this head."""
    from transformers import AutoModelForCausalLM, AutoModelForTokenClassification

    check_head(kind)
    return AutoModelForCausalLM if kind == "reward_tokens" else AutoModelForTokenClassification


def num_labels(kind: str) -> int | None:
    return {"scalar": 1, "classification": 2}.get(kind)


def head_module(hf_model: nn.Module, kind: str) -> nn.Module:
    """The module that maps the last hidden state to logits (`score`/`classifier`, or the LM head)."""
    if kind == "reward_tokens":
        return hf_model.get_output_embeddings()
    for name in ("score", "classifier"):
        module = getattr(hf_model, name, None)
        if isinstance(module, nn.Module):
            return module
    raise TypeError(f"{type(hf_model).__name__} has no token-classification head ('score' or 'classifier')")


def token_logits(
    kind: str, head: nn.Module, hidden: torch.Tensor, reward_token_ids: tuple[int, int] | None = None
) -> torch.Tensor:
    """Hidden states [..., H] → per-token logits: [...] for `scalar`, [..., 2] ordered [wrong, correct]
    otherwise. The `reward_tokens` head projects onto the LM head's rows of `reward_token_ids` = (id of "−",
    id of "+") only: z = h·W[ids]ᵀ (+ b[ids]), not the whole vocabulary."""
    if kind == "scalar":
        return head(hidden).squeeze(-1)
    if kind == "classification":
        return head(hidden)
    if reward_token_ids is None:
        raise ValueError("the reward_tokens head needs reward_token_ids (id of '-', id of '+')")
    ids = list(reward_token_ids)
    if not isinstance(head, nn.Linear):  # e.g. an LM head wrapped by LoRA: project, then pick
        return head(hidden)[..., ids]
    bias = head.bias[ids] if head.bias is not None else None
    return torch.nn.functional.linear(hidden, head.weight[ids], bias)


def scores_from_logits(kind: str, logits: torch.Tensor, sigmoid: bool = True) -> torch.Tensor:
    """Step scores: σ(z) (or z itself when `sigmoid` is False: MSE / progress heads) for `scalar`,
    P(correct) = softmax(z)₁ for the two-class heads."""
    if kind == "scalar":
        return torch.sigmoid(logits) if sigmoid else logits
    return torch.softmax(logits.float(), dim=-1)[..., 1]

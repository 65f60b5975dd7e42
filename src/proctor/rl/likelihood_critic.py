"""ArCHer's critic read through a causal LM's likelihood (`critic_kind: likelihood`), the interface of
`proctor.rl.critic.UtteranceCritic`.

    Q_i(s, a) = σ(β · ℓ_ψ(a | s) + b_i),   ℓ_ψ(a | s) = Σ_k log π_ψ(y_k | s, y_<k)     (i = 1, 2)
    V_i(s)    = σ(w_i · h_ψ(s) + c_i),     h_ψ(s) = the LM's last hidden state at the state's last token

One causal LM ψ carries both: Q through its LM head (the likelihood PRM's parametrisation, `proctor.prm.likelihood`),
V through a linear head on its hidden state. A scalar Q head on a small backbone learns a state's value but not
which action is better (README, ArCHer and the PRM sections); here every difference between two actions' Q is a
difference of their likelihoods, which the LM already orders. Built from a likelihood PRM folder, Q starts as that
PRM (ψ, β and b); from a policy folder, as β = 1, b = 0. Q and V lie in (0, 1): the TD targets r + γV̄(s') must
too (rewards in [0, 1] at termination, as `household` and ALFWorld give), else `critic_loss` refuses them.
The two Q's share ψ and differ only by their bias, so min(Q₁, Q₂) is the one with the smaller bias; the double
V keeps ArCHer's form. Saved as a `save_pretrained` LM folder plus `likelihood_critic.json` (β, b) and
`value_head.safetensors` (w, c).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from proctor.models.sequences import collate_completions, left_pad, token_logprobs

CRITIC_FILE = "likelihood_critic.json"
VALUE_HEAD_FILE = "value_head.safetensors"
KIND = "proctor.likelihood_critic"


class LikelihoodCritic(nn.Module):
    """A causal LM with Q through its likelihood and V through a linear head (module docstring)."""

    value_bounds = (0.0, 1.0)

    def __init__(self, lm: nn.Module, tokenizer: Any, beta: float, q_bias: Sequence[float]):
        super().__init__()
        self.lm, self.tokenizer, self.beta = lm, tokenizer, float(beta)
        self.q_bias = nn.Parameter(torch.tensor([float(b) for b in q_bias]))
        self.value_head = nn.Linear(lm.config.hidden_size, 2)
        nn.init.zeros_(self.value_head.weight)
        nn.init.zeros_(self.value_head.bias)

    @classmethod
    def build(cls, source: str | os.PathLike, dtype: Any = None) -> LikelihoodCritic:
        """From a saved likelihood critic, a likelihood PRM (Q = the PRM), or any causal LM (β = 1, b = 0)."""
        from proctor.models.loading import load
        from proctor.prm.likelihood import LIKELIHOOD_FILE

        lm, tokenizer = load(source, dtype=dtype)
        folder = Path(source)
        if (folder / CRITIC_FILE).is_file():
            meta = json.loads((folder / CRITIC_FILE).read_text())
            critic = cls(lm, tokenizer, meta["beta"], meta["q_bias"])
            critic.value_head.load_state_dict(load_file(folder / VALUE_HEAD_FILE))
            return critic
        if (folder / LIKELIHOOD_FILE).is_file():
            meta = json.loads((folder / LIKELIHOOD_FILE).read_text())
            return cls(lm, tokenizer, meta["beta"], [meta["bias"]] * 2)
        return cls(lm, tokenizer, 1.0, [0.0, 0.0])

    def save_pretrained(self, path: str | os.PathLike) -> Path:
        out = Path(path)
        self.lm.save_pretrained(out, safe_serialization=True)
        self.tokenizer.save_pretrained(out)
        (out / CRITIC_FILE).write_text(json.dumps({"kind": KIND, "beta": self.beta,
                                                   "q_bias": self.q_bias.detach().cpu().tolist()}, indent=2))
        save_file({k: v.detach().cpu().contiguous() for k, v in self.value_head.state_dict().items()},
                  out / VALUE_HEAD_FILE)
        return out

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    def activation_checkpointing_enable(self, **kwargs: Any) -> None:
        """The LM's (what the Trainer calls for `gradient_checkpointing: true`)."""
        self.lm.activation_checkpointing_enable(**kwargs)

    def gradient_checkpointing_enable(self, **kwargs: Any) -> None:
        self.lm.gradient_checkpointing_enable(**kwargs)

    def _values(self, hidden: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.value_head(hidden.float()))

    def q_values(self, logliks: torch.Tensor) -> torch.Tensor:
        """Q [B, 2] = σ(β·ℓ + b_i) of actions given by their log-likelihoods ℓ [B] under ψ."""
        return torch.sigmoid(self.beta * logliks.to(self.q_bias.device)[:, None] + self.q_bias[None, :])

    def forward(self, prompts: Sequence[Sequence[int]], actions: Sequence[Sequence[int]]
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """(Q [B, 2] of each action, V [B, 2] of its state) in one pass over prompt + action."""
        batch = collate_completions(list(zip(prompts, actions, strict=True)), self.tokenizer.pad_token_id)
        dev, k = self.device, batch.completion_mask.shape[1]
        out = self.lm(input_ids=batch.input_ids.to(dev), attention_mask=batch.attention_mask.to(dev),
                      position_ids=batch.position_ids.to(dev), logits_to_keep=k + 1, use_cache=False,
                      output_hidden_states=True)
        mask = batch.completion_mask.to(dev).bool()
        logps = torch.where(mask, token_logprobs(out.logits[:, :-1], batch.input_ids[:, -k:].to(dev)),
                            torch.zeros((), device=dev))
        q = self.q_values(logps.sum(dim=1))
        width = batch.input_ids.shape[1]
        at = torch.tensor([width - len(a) - 1 for a in actions], device=dev)
        return q, self._values(out.hidden_states[-1][torch.arange(len(actions), device=dev), at])

    def state_values(self, prompts: Sequence[Sequence[int]]) -> torch.Tensor:
        """V [B, 2] of states given by their prompt ids."""
        dev = self.device
        ids, attn, pos = left_pad(prompts, self.tokenizer.pad_token_id)
        out = self.lm(input_ids=ids.to(dev), attention_mask=attn.to(dev), position_ids=pos.to(dev),
                      logits_to_keep=1, use_cache=False, output_hidden_states=True)
        return self._values(out.hidden_states[-1][:, -1])

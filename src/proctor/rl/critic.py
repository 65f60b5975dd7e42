"""ArCHer's utterance-level critic on a causal-LM backbone, its TD loss, and CHAI's critic-selected acting.

`UtteranceCritic`: any HF backbone with a 4-output token head [Q₁, Q₂, V₁, V₂] (transformers'
`AutoModelForTokenClassification`, dropout off). One pass over `prompt ids + action ids` reads V₁, V₂(s) at
the prompt's last token and Q₁, Q₂(s, a) at the action's last token; the inputs are the policy's own token ids,
so the critic must share the policy's tokenizer (ArCHer's critic is a separate RoBERTa on the text; here any
backbone of the same tokenizer, by default the policy's).

`critic_loss` (docs/methods.md §9, `proctor.rl.td`): Σ over heads of the mean squared errors of Q_i against
y = r + γ(1 − d)·V̄(s') and of V_i against Q̄(s, a), both from the target critic; a is the stored action, the
policy's own sample when the transition was collected (ArCHer's code draws a fresh a ~ π at update time).

`CriticChoiceAgent` (online CHAI): samples K actions from the policy's agent and takes the one with the
largest min(Q₁, Q₂) (+ α·log π), `proctor.rl.td.chai_select`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from proctor.agents.base import Agent, Candidate, Prefix
from proctor.models.sequences import collate_completions, left_pad
from proctor.prm.model import _load_backbone_with_new_head as load_backbone_with_new_head
from proctor.prompts import PromptConfig
from proctor.rl.pairs import prompt_ids
from proctor.rl.replay import ReplayTransition
from proctor.rl.td import chai_select, q_targets, v_targets

HEAD_LABELS = ("q1", "q2", "v1", "v2")


class UtteranceCritic(nn.Module):
    """Backbone + [Q₁, Q₂, V₁, V₂] head (see module docstring)."""

    value_bounds: tuple[float, float] | None = None  # unbounded; `LikelihoodCritic`'s are (0, 1)

    def __init__(self, model: nn.Module, tokenizer: Any):
        super().__init__()
        self.model = model
        self.tokenizer = tokenizer

    @classmethod
    def build(cls, backbone: str | os.PathLike, dtype: Any = None) -> UtteranceCritic:
        """A new critic (a freshly initialised head) on a pretrained backbone, or a saved critic folder."""
        from transformers import AutoConfig, AutoModelForTokenClassification

        from proctor.models import load_tokenizer
        from proctor.models.loading import resolve_dtype

        config = AutoConfig.from_pretrained(str(backbone), num_labels=4, id2label=dict(enumerate(HEAD_LABELS)),
                                            label2id={k: i for i, k in enumerate(HEAD_LABELS)})
        config.classifier_dropout = 0.0
        model = load_backbone_with_new_head(AutoModelForTokenClassification, str(backbone),
                                            {"config": config, "dtype": resolve_dtype(dtype), "use_safetensors": True})
        tokenizer = load_tokenizer(backbone)
        if model.config.pad_token_id is None:
            model.config.pad_token_id = tokenizer.pad_token_id
        return cls(model, tokenizer)

    def save_pretrained(self, path: str | os.PathLike) -> Path:
        out = Path(path)
        self.model.save_pretrained(out, safe_serialization=True)
        self.tokenizer.save_pretrained(out)
        return out

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    def activation_checkpointing_enable(self, **kwargs: Any) -> None:
        """The backbone's (what the Trainer calls for `gradient_checkpointing: true`)."""
        self.model.activation_checkpointing_enable(**kwargs)

    def gradient_checkpointing_enable(self, **kwargs: Any) -> None:
        self.model.gradient_checkpointing_enable(**kwargs)

    def forward(self, prompts: Sequence[Sequence[int]], actions: Sequence[Sequence[int]]
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """(Q [B, 2] at each action's last token, V [B, 2] at its prompt's last token)."""
        batch = collate_completions(list(zip(prompts, actions, strict=True)), self.model.config.pad_token_id)
        dev = self.device
        out = self.model(input_ids=batch.input_ids.to(dev), attention_mask=batch.attention_mask.to(dev),
                         position_ids=batch.position_ids.to(dev)).logits.float()  # [B, L, 4]
        width = out.shape[1]
        at = torch.tensor([width - len(a) - 1 for a in actions], device=dev)
        return out[:, -1, :2], out[torch.arange(len(actions), device=dev), at, 2:]

    def state_values(self, prompts: Sequence[Sequence[int]]) -> torch.Tensor:
        """V [B, 2] of states given by their prompt ids (the head at each prompt's last token)."""
        dev = self.device
        ids, attn, pos = left_pad(prompts, self.model.config.pad_token_id)
        out = self.model(input_ids=ids.to(dev), attention_mask=attn.to(dev), position_ids=pos.to(dev)).logits
        return out[:, -1, 2:].float()


def check_same_tokenizer(critic: UtteranceCritic, tokenizer: Any) -> None:
    if critic.tokenizer.get_vocab() != tokenizer.get_vocab():
        raise ValueError("the critic's backbone must share the policy's tokenizer (it reads the policy's ids)")


def critic_loss(critic: UtteranceCritic, target: UtteranceCritic, batch: Sequence[ReplayTransition], gamma: float,
                heads: str = "min") -> tuple[torch.Tensor, dict[str, float]]:
    """The TD loss of one minibatch (see module docstring) and its statistics."""
    prompts, actions = [t.prompt_ids for t in batch], [t.action_ids for t in batch]
    q, v = critic(prompts, actions)
    with torch.no_grad():
        target_q, _ = target(prompts, actions)
        next_v = target.state_values([t.next_prompt_ids for t in batch])
        dev = q.device
        rewards = torch.tensor([t.reward for t in batch], device=dev)
        terminated = torch.tensor([t.terminated for t in batch], device=dev)
        y_q = q_targets(rewards, next_v, terminated, gamma, heads)
        y_v = v_targets(target_q[:, None, :], heads)
        if target.value_bounds is not None:  # the target: `critic` may be wrapped (DDP) by the Trainer
            lo, hi = target.value_bounds
            bad = ((y_q < lo) | (y_q > hi)).any(dim=-1).nonzero().flatten().tolist()
            if bad:
                t = batch[bad[0]]
                raise ValueError(f"TD target {y_q[bad[0]].tolist()} of the transition from iteration {t.iteration} "
                                 f"(reward {t.reward}) is outside the critic's range [{lo}, {hi}]: a likelihood "
                                 "critic needs rewards in [0, 1] (use critic_kind: head)")
    q_loss = ((q - y_q) ** 2).mean(dim=0).sum()
    v_loss = ((v - y_v) ** 2).mean(dim=0).sum()
    return q_loss + v_loss, {"q_loss": q_loss.item(), "v_loss": v_loss.item(), "q_mean": q.mean().item(),
                             "v_mean": v.mean().item()}


class CriticChoiceAgent(Agent):
    """Online CHAI's actor: the best of `k` samples of `base` by the critic (see module docstring). For n > 1
    the n best are returned, best first. Candidates record `meta["critic_q"]`."""

    def __init__(self, base: Agent, critic: UtteranceCritic, tokenizer: Any, prompt: PromptConfig | None,
                 k: int, alpha: float = 0.0):
        self.base, self.critic, self.tokenizer, self.prompt = base, critic, tokenizer, prompt
        self.k, self.alpha = k, alpha
        self.name = f"chai({base.name}, k={k})"

    @torch.no_grad()
    def act(self, prefixes: Sequence[Prefix], n: int = 1) -> list[list[Candidate]]:
        out = []
        for prefix, cands in zip(prefixes, self.base.act(prefixes, max(n, self.k)), strict=True):
            ids = prompt_ids(self.tokenizer, prefix, self.prompt)
            q, _ = self.critic([ids] * len(cands), [c.token_ids for c in cands])
            qmin = q.min(dim=-1).values.cpu()
            logps = torch.tensor([sum(c.logprobs or []) for c in cands])
            best = int(chai_select(qmin[None], logps[None], self.alpha)[0])
            ranked = torch.sort(-(qmin + self.alpha * logps), stable=True).indices.tolist()
            order = [best] + [i for i in ranked if i != best]
            for i, c in enumerate(cands):
                c.meta["critic_q"] = float(qmin[i])
            out.append([cands[i] for i in order[:n]])
        return out

    def reset(self, prefix: Prefix) -> None:
        self.base.reset(prefix)

    def close(self) -> None:
        self.base.close()

"""Online CHAI (Verma et al. 2022, "CHAI: A CHatbot AI for Task-Oriented Dialogue with Offline Reinforcement
Learning"; ArCHer's online baseline, docs/methods.md §9): the LM stays frozen and acts with the best of K of its
own samples by the critic's min(Q₁, Q₂) (`proctor.rl.critic.CriticChoiceAgent`, `proctor.rl.td.chai_select`);
the critic learns exactly as ArCHer's (TD targets with bootstrap at truncation, Polyak target, replay buffer).
It is `train_archer` with `candidates` = K and no actor updates; the policy folder stays the starting one, the
critic of each iteration is `iter-k/critic`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from proctor.rl.archer import ArCHerConfig, ArCHerResult, train_archer


class CHAIConfig(ArCHerConfig):
    """Online CHAI (see module docstring); one YAML for `proctor train chai`."""

    candidates: int = Field(default=4, ge=2, description="K: policy samples per state; the critic picks one")
    train_actor: Literal[False] = Field(default=False, description="CHAI never updates the LM")


def train_chai(cfg: CHAIConfig) -> ArCHerResult:
    """Run `cfg.iterations` iterations of online CHAI; `policy_dir` is the (unchanged) starting policy."""
    return train_archer(cfg)

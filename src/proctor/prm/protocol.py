"""`StepScorer`: the interface every PRM scorer implements, and that search, evaluation and the trainers take.

Implementations: `PRMScorer` (a PRM head, in process), `TextStepScorer` (a head trained on stepwise text),
`LikelihoodScorer` (Q(s, a) = σ(β·log π(a|s) + b), in process or on a vLLM server) and `RemotePRMScorer`
(a head behind `proctor prm serve`). `proctor.prm.ref.PRMRef.open` returns the right one for a folder or a server.
A scorer of your own that has these methods works everywhere a PRM does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from proctor.prompts.render import PromptConfig
from proctor.prompts.turns import Prefix


@runtime_checkable
class StepScorer(Protocol):
    """Scores the steps of agent trajectories and candidate actions at agent states."""

    #: "action": Q(s, a), the score of taking a at s; "state": V(s), read at the end of each state
    score_at: str

    def score_action_groups(self, prefixes: Sequence[Prefix], actions: Sequence[Sequence[str]],
                            cfg: PromptConfig | None = None, states_per_pass: int | None = None
                            ) -> list[list[float]]:
        """The score of every candidate action at every state (search: best-of-N, beam)."""
        ...

    def score_actions(self, prefix: Prefix, actions: Sequence[str], cfg: PromptConfig | None = None,
                      chunk_size: int | None = None) -> list[float]:
        """The score of every candidate action at one state."""
        ...

    def score_trajectories(self, trajs: Sequence[Any], cfg: PromptConfig | None = None) -> list[list[float]]:
        """The score of every step of stored trajectories (evaluation, PPO rewards, online DPO)."""
        ...

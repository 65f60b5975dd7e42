"""ArCHer's baseline as the policy's expectation of the critic's Q over the admissible actions
(`baseline: expected`):

    V^π(s) = Σ_{a ∈ A(s)} π(a | s) · min(Q₁, Q₂)(s, a),     A(s, a) = min(Q₁, Q₂)(s, a) − V^π(s)

ArCHer learns V by regression towards Q̄(s, a ~ π) (docs/methods.md §9). Where the env lists the admissible
actions and the policy is the `choice` agent (π restricted to that list), the expectation is computed exactly
instead (`proctor.rl.td.expected_value`; the expected-value baseline of Sutton et al. 2000, the mean
actor-critic's of Allen et al. 2017), so A compares actions at the same state only, and V's regression error
across states, which dominated the learned baseline's advantages on `household` (README, ArCHer), drops out.
It needs the likelihood critic: Q(s, ·) of every admissible action then costs one shared-prefix pass per state
(`ChoiceAgent.score` on ψ), as π(· | s) does on the policy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from proctor.agents.choice import ChoiceAgent, choice_probabilities
from proctor.progress import StageProgress
from proctor.prompts import PromptConfig, prefix_at
from proctor.rl.likelihood_critic import LikelihoodCritic
from proctor.rl.replay import ReplayTransition
from proctor.rl.td import expected_value, min_heads
from proctor.trajectory import Trajectory


@torch.no_grad()
def expected_baselines(policy: torch.nn.Module, critic: LikelihoodCritic, tokenizer: Any,
                       trajs: Sequence[Trajectory], rows: Sequence[ReplayTransition], prompt: PromptConfig,
                       temperature: float, states_per_pass: int = 16, progress: bool = True) -> list[float]:
    """V^π(s) of every row's state (module docstring); π is `policy` as the choice agent at `temperature`.
    A state without an admissible list is an error naming its trajectory and step."""
    by_id = {t.id: t for t in trajs}
    prefixes = []
    for row in rows:
        prefix = prefix_at(by_id[row.trajectory], row.step)
        if not prefix.admissible_actions:
            raise ValueError(f"baseline: expected needs the env's admissible actions; trajectory {row.trajectory!r}, "
                             f"step {row.step} has none")
        prefixes.append(prefix)
    acting = ChoiceAgent(policy, tokenizer, prompt=prompt, temperature=temperature, seed=None)
    scoring = ChoiceAgent(critic.lm, critic.tokenizer, prompt=prompt, seed=None)
    out: list[float] = []
    with StageProgress("archer baseline", total=len(prefixes), unit="states", enabled=progress) as bar:
        for start in range(0, len(prefixes), states_per_pass):
            chunk = prefixes[start:start + states_per_pass]
            for by_policy, by_critic in zip(acting.score(chunk), scoring.score(chunk), strict=True):
                probs = choice_probabilities([c.meta["choice_logprob"] for c in by_policy], temperature)
                q = min_heads(critic.q_values(torch.tensor([c.meta["choice_logprob"] for c in by_critic])))[:, 0]
                out.append(float(expected_value(q[None].double().cpu(),
                                                torch.tensor([probs], dtype=torch.float64))[0]))
            bar.advance(len(chunk))
    return out

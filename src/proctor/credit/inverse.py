"""Inverse-PRM transitions (AgentPRM §3; docs/methods.md §5).

Transitions (s_t, a_t, s_{t+1}, a', terminal, label):
- label 1 from expert demonstrations, with a' re-sampled from the current policy at s_{t+1};
- label 0 from policy rollouts, with a' = the rollout's own next action a_{t+1}.
The last step of a trajectory is terminal (no s', a') when the env terminated the episode there. A last step
that the env did not terminate (the step limit, `Step.truncated`: gymnasium's truncation; or an env or agent
error) is not terminal: its target would
bootstrap from Q(s_T, a_T), which the data does not hold, so it yields no transition (the step before it
still bootstraps from it). Classes are balanced by sampling the larger one
down to the size of the smaller (seeded, from the canonical order). The PRM then uses the implied reward
r̂ = Q(s,a) − γ·Q(s',a') (r̂ = Q(s,a) when terminal) under BCE-with-logits against the label.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field

from proctor.credit.completions import index_completions, resampled_actions
from proctor.credit.keys import state_keys
from proctor.credit.outcome import CreditError, canonical_order, check_trajectories
from proctor.credit.records import Transition, params_json
from proctor.credit.registry import MethodResult, Sources, register_method
from proctor.trajectory import Trajectory


class InverseConfig(BaseModel):
    """Inverse-PRM transitions: expert (label 1) and policy (label 0), balanced or not."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    balance: bool = Field(True, description="sample the larger class (expert or policy transitions) down to the "
                          "size of the smaller one; false: keep all")
    seed: int = Field(0, description="seeds the down-sampling of `balance`")


def _transitions(traj: Trajectory, label: float, next_action_at: Mapping[tuple[str, int], str] | None,
                 params: str) -> list[Transition]:
    keys = state_keys(traj)
    n_steps = len(traj.steps)
    out = []
    for i, step in enumerate(traj.steps):
        terminal = i == n_steps - 1
        if terminal and (step.truncated or traj.termination in ("env_error", "agent_error")):
            break  # the step limit (or an env/agent error) ended it: its target would bootstrap from Q(s', a'),
            # which the data does not hold
        nxt_key = nxt_action = None
        if not terminal:
            nxt_key = keys[i + 1].hex()
            if next_action_at is None:
                nxt_action = traj.steps[i + 1].action
            elif (traj.id, i + 1) in next_action_at:
                nxt_action = next_action_at[(traj.id, i + 1)]
            else:
                raise CreditError(traj.id, f"resampled[step={i + 1}]",
                                  f"no policy action re-sampled at state {i + 1} of this expert trajectory")
        out.append(Transition(traj.id, traj.task_id, traj.env, traj.split, i, keys[i].hex(), step.action,
                              nxt_key, nxt_action, terminal, label, "expert" if label else "policy",
                              "inverse", params))
    return out


def inverse_transitions(experts: Sequence[Trajectory], policy: Sequence[Trajectory],
                        resampled: Mapping[tuple[str, int], str], cfg: InverseConfig) -> list[Transition]:
    """Positive (expert) and negative (policy) transitions, balanced when `cfg.balance`.

    `resampled[(expert id, k)]` is the policy's action at state s_k of that expert trajectory.
    """
    experts, policy = canonical_order(experts), canonical_order(policy)
    check_trajectories([*experts, *policy])
    params = params_json(cfg)
    pos = [tr for t in experts for tr in _transitions(t, 1.0, resampled, params)]
    neg = [tr for t in policy for tr in _transitions(t, 0.0, None, params)]
    if cfg.balance:
        n = min(len(pos), len(neg))
        if n == 0:
            raise ValueError(f"cannot balance {len(pos)} expert and {len(neg)} policy transitions")
        rng = random.Random(cfg.seed)
        pos = [pos[i] for i in sorted(rng.sample(range(len(pos)), n))]
        neg = [neg[i] for i in sorted(rng.sample(range(len(neg)), n))]
    return pos + neg


@register_method("inverse", InverseConfig,
                 "expert (label 1, re-sampled a') vs policy (label 0) transitions (AgentPRM §3 inverse PRM)",
                 needs=("policy", "completions"))
def run_inverse(sources: Sources, cfg: InverseConfig) -> MethodResult:
    index = index_completions(sources.trajectories, sources.completions or [])
    return MethodResult(inverse_transitions(sources.trajectories, sources.policy or [],
                                            resampled_actions(index), cfg), record_type=Transition)

"""Trajectories → the tensors the group advantages read (`proctor.rl.advantages`): one row per rollout, its
outcome and task group; one entry per step, its rollout, return to go and anchor-state group.

Outcomes, groups and anchors follow `proctor.credit.group` exactly (same outcome source, same canonical
order, anchors within one task only), so `grpo`/`loo`/`gigpo` over these tensors equal credit's list
versions on the same trajectories.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch

from proctor.credit.group import anchor_ids
from proctor.credit.outcome import OutcomeSource, canonical_order, check_trajectories, outcome
from proctor.rl.advantages import masked_returns_to_go
from proctor.trajectory import Trajectory


@dataclass
class GroupBatch:
    """Rollouts in canonical order (`trajectories`) and their group tensors (float64 / int64)."""

    trajectories: list[Trajectory]
    returns: torch.Tensor  # [N] outcome R_i of each rollout
    groups: torch.Tensor  # [N] task group id of each rollout
    step_rollout: torch.Tensor  # [M] index of the rollout each step belongs to (steps in rollout order)
    step_index: torch.Tensor  # [M] the step's index t within its rollout
    step_returns: torch.Tensor  # [M] discounted return to go R_t
    anchors: torch.Tensor  # [M] anchor-state group id (unique across tasks)


def group_batch(trajs: Sequence[Trajectory], outcome_source: OutcomeSource = "success", gamma: float = 0.95,
                step_reward: Literal["outcome", "env"] = "env",
                similarity: float | None = None) -> GroupBatch:
    """The group tensors of `trajs` (see module docstring). Step rewards are the outcome on the last step
    (`outcome`) or the env's `Step.reward` (`env`); anchors are exact observations or similarity clusters."""
    ordered = canonical_order(trajs)
    check_trajectories(ordered)
    task_of: dict[tuple[str, str], int] = {}
    groups = [task_of.setdefault((t.env, t.task_id), len(task_of)) for t in ordered]
    returns = [outcome(t, outcome_source) for t in ordered]
    width = max(len(t.steps) for t in ordered)
    rewards = torch.zeros(len(ordered), width, dtype=torch.float64)
    mask = torch.zeros(len(ordered), width, dtype=torch.bool)
    for i, t in enumerate(ordered):
        n = len(t.steps)
        mask[i, :n] = True
        if step_reward == "env":
            rewards[i, :n] = torch.tensor([s.reward for s in t.steps], dtype=torch.float64)
        else:
            rewards[i, n - 1] = returns[i]
    rtg = masked_returns_to_go(rewards, mask, gamma)
    names: dict[tuple[int, object], int] = {}
    per_rollout: dict[int, list[int]] = {}
    for g in sorted(set(groups)):
        members = [i for i, gi in enumerate(groups) if gi == g]
        ids = iter(anchor_ids([s.observation for i in members for s in ordered[i].steps], similarity))
        for i in members:
            per_rollout[i] = [names.setdefault((g, next(ids)), len(names)) for _ in ordered[i].steps]
    anchor: list[int] = []
    step_rollout, step_index, step_returns = [], [], []
    for i, t in enumerate(ordered):
        for k in range(len(t.steps)):
            step_rollout.append(i)
            step_index.append(k)
            step_returns.append(float(rtg[i, k]))
        anchor += per_rollout[i]
    return GroupBatch(
        trajectories=ordered,
        returns=torch.tensor(returns, dtype=torch.float64),
        groups=torch.tensor(groups, dtype=torch.long),
        step_rollout=torch.tensor(step_rollout, dtype=torch.long),
        step_index=torch.tensor(step_index, dtype=torch.long),
        step_returns=torch.tensor(step_returns, dtype=torch.float64),
        anchors=torch.tensor(anchor, dtype=torch.long),
    )

"""The compute a search spends, counted so that methods compare at equal budgets.

Every search method writes `Trajectory.meta["budget"]` with these counts (integers):

    env_steps         env.step calls, including those of candidates executed in forked env copies
    replayed_steps    actions re-applied to re-create env copies by replay (envs that cannot be cloned, or
                      copies in another worker process); 0 when every copy was an in-process clone
    forks             env copies made
    candidates        actions drawn from the policy (before identical ones are merged)
    generated_tokens  tokens the policy generated for those candidates (`Candidate.token_ids`; 0 for
                      scripted policies, which generate none)
    prm_calls         (state, action) pairs the PRM scored
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from proctor.prompts.turns import Candidate
from proctor.trajectory import Trajectory


@dataclass
class Budget:
    env_steps: int = 0
    replayed_steps: int = 0
    forks: int = 0
    candidates: int = 0
    generated_tokens: int = 0
    prm_calls: int = 0

    def add(self, other: Budget | Mapping[str, Any]) -> Budget:
        """Add another budget (or a dict of the same keys; unknown keys are ignored) in place."""
        data = asdict(other) if isinstance(other, Budget) else other
        for f in fields(self):
            value = data.get(f.name, 0)
            if isinstance(value, int | float) and not isinstance(value, bool):
                setattr(self, f.name, getattr(self, f.name) + int(value))
        return self

    def drew(self, candidates: Iterable[Candidate]) -> None:
        """Count candidates drawn from the policy and the tokens it generated for them."""
        for c in candidates:
            self.candidates += 1
            self.generated_tokens += len(c.token_ids or ())

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def trajectory_budget(traj: Trajectory) -> Budget:
    """The budget of an episode played by an agent: a step whose `info["candidate_meta"]["budget"]` says what
    choosing it cost (per-step best-of-N) adds that; any other step adds one env step, one candidate and the
    tokens of its action."""
    total = Budget()
    for step in traj.steps:
        meta = step.info.get("candidate_meta")
        if isinstance(meta, dict) and isinstance(meta.get("budget"), dict):
            total.add(meta["budget"])
        else:
            total.add({"env_steps": 1, "candidates": 1, "generated_tokens": len(step.token_ids or ())})
    return total

"""Small hand-checkable trajectories shared by the credit tests."""

from __future__ import annotations

from proctor.trajectory import Step, Trajectory


def traj(tid: str, steps: list[tuple[str, str]], success: bool, task_id: str = "t1", sample: int = 0,
         score: float | None = None, termination: str | None = None, env: str = "toy",
         reasons: list[str | None] | None = None, valid: list[bool] | None = None,
         scores: list[dict[str, float]] | None = None, meta: dict | None = None) -> Trajectory:
    """A trajectory of (observation, action) steps."""
    term = termination or ("success" if success else "failure")
    return Trajectory(
        id=tid, env=env, task_id=task_id, sample=sample, task=f"task {task_id}", split="train", seed=0,
        agent="test",
        steps=[Step(observation=o, action=a, reason=(reasons[i] if reasons else None),
                    info={"valid": valid[i]} if valid else {}, scores=scores[i] if scores else {})
               for i, (o, a) in enumerate(steps)],
        success=success, score=float(success) if score is None else score, termination=term,
        error="boom" if term in ("env_error", "agent_error") else None, meta=meta or {})


def toy_rollouts() -> list[Trajectory]:
    """Three rollouts of task t1:
    τ1: o0 -x-> o1 -y-> success;  τ2: o0 -x-> o1 -z-> failure;  τ3: o0 -w-> failure."""
    return [
        traj("tau1", [("o0", "x"), ("o1", "y")], True, sample=0),
        traj("tau2", [("o0", "x"), ("o1", "z")], False, sample=1),
        traj("tau3", [("o0", "w")], False, sample=2),
    ]

"""Search method `step-best-of-n`: per-step best-of-N (`BestOfNAgent`) run by the rollout engine, with each
trajectory's budget (the sum of its steps' `candidate_meta["budget"]`) on `Trajectory.meta["budget"]`."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from proctor.rollout.engine import rollout
from proctor.search.agents import BestOfN
from proctor.search.budget import trajectory_budget
from proctor.search.registry import PRMSearchSpec, SearchJob, register_search
from proctor.store import TrajectoryStore
from proctor.trajectory import Trajectory


class BudgetStore(TrajectoryStore):
    """A trajectory store that writes `meta["budget"]` (from the steps' candidate meta) on every trajectory
    that has none."""

    def append(self, traj: Trajectory) -> bool:
        if "budget" not in traj.meta:
            traj = traj.model_copy(update={"meta": {**traj.meta, "budget": trajectory_budget(traj).as_dict()}})
        return super().append(traj)


class StepBestOfNConfig(BestOfN, PRMSearchSpec):
    """Per-step best-of-N (AgentPRM): at every step the PRM's argmax among n samples of `agent` (the fields of
    the agent kind `best-of-n`, `proctor.search.agents.BestOfN`)."""

    method: Literal["step-best-of-n"] = Field(default="step-best-of-n", description="the search method (selects this "
                                              "config)")


@register_search("step-best-of-n", StepBestOfNConfig, "per-step best-of-N: the PRM's argmax among N samples")
def run_step_best_of_n(cfg: StepBestOfNConfig, job: SearchJob) -> None:
    agent = cfg.best_of_n()
    try:
        spec = job.env_spec(agent.needs_expert_hints)
        store = BudgetStore(job.out, meta={"rollout": job.identity(spec, agent.describe())}) \
            if not (job.out / "manifest.json").exists() else BudgetStore(job.out)
        rollout(spec, agent, job.task_ids, store, split=job.split, samples_per_task=job.samples,
                batch_size=job.batch, seed=job.seed, workers=job.workers, backend=job.backend,
                step_timeout=job.step_timeout, progress=job.progress, label="best-of-n")
        store.close()
    finally:
        agent.close()

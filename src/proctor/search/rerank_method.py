"""Search method `trajectory-best-of-n`: N independent attempts per task (rolled out here, or read from a
trajectory store of K ≥ N samples per task), one kept by aggregated PRM step scores (`rerank`). Reported as
what it is: a rerank of independent attempts (each output trajectory lists them all, with their outcome)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from proctor.agents.registry import AgentConfig
from proctor.prm.protocol import StepScorer
from proctor.progress import StageProgress
from proctor.rollout.engine import rollout
from proctor.search.aggregate import StepAggregation
from proctor.search.budget import Budget, trajectory_budget
from proctor.search.registry import PRMSearchSpec, SearchJob, register_search
from proctor.search.rerank import AnswerKey, rerank
from proctor.store import TrajectoryStore
from proctor.trajectory import Trajectory

#: where attempts rolled out by the method are stored, inside the output store's folder
ATTEMPTS_DIR = "attempts"


class TrajectoryBestOfNConfig(PRMSearchSpec):
    """Trajectory-level best-of-N: keep one of N attempts by aggregated step scores (or weighted by answer)."""

    method: Literal["trajectory-best-of-n"] = Field(default="trajectory-best-of-n", description="the search method (selects this config)")
    agent: AgentConfig | None = Field(default=None, description="policy that makes the attempts")
    source: Path | None = Field(default=None, description="or: a store holding samples 0..N·samples−1 per task")
    n: int = Field(default=8, ge=1, description="attempts per task")
    aggregation: StepAggregation = Field(default="last", description="an attempt's score from its step scores: "
                                     "last (the last step's), min, prod (their product) or mean")
    weighted: bool = Field(default=False, description="weighted best-of-N: sum the aggregates per answer")
    answer: AnswerKey = Field(default="last_action", description="what weighted best-of-N votes on")

    @model_validator(mode="after")
    def _one_source(self) -> TrajectoryBestOfNConfig:
        if (self.agent is None) == (self.source is None):
            raise ValueError("give exactly one of agent (roll the attempts out) and source (a stored run)")
        if self.source is not None and not (self.source / "manifest.json").is_file():
            raise ValueError(f"source: {self.source} is not a trajectory store (no manifest.json)")
        return self


def score_attempts(scorer: StepScorer, trajs: Sequence[Trajectory], batch: int, progress: bool) -> list[list[float] | None]:
    """PRM step scores of each trajectory (one forward pass per trajectory, batched); None for a trajectory
    without steps or one the PRM cannot score (too long for it)."""
    from proctor.prm.scoring import ScoringError

    out: list[list[float] | None] = [None] * len(trajs)
    todo = [i for i, t in enumerate(trajs) if t.steps]
    with StageProgress("rerank: scoring", len(todo), enabled=progress, unit="attempts") as bar:
        for k in range(0, len(todo), batch):
            idx = todo[k : k + batch]
            try:
                rows: list[list[float] | None] = list(scorer.score_trajectories([trajs[i] for i in idx]))
            except ScoringError:
                rows = []
                for i in idx:
                    try:
                        rows.append(scorer.score_trajectories([trajs[i]])[0])
                    except ScoringError:
                        rows.append(None)
            for i, row in zip(idx, rows, strict=True):
                out[i] = row
            bar.advance(len(idx))
    return out


def _with_scores(traj: Trajectory, scores: Sequence[float] | None) -> list:
    """The steps, each with its PRM score on `info["candidate_meta"]["prm_score"]`."""
    if scores is None:
        return list(traj.steps)
    steps = []
    for step, s in zip(traj.steps, scores, strict=True):
        meta = step.info.get("candidate_meta")
        meta = {**meta, "prm_score": s} if isinstance(meta, dict) else {"prm_score": s}
        steps.append(step.model_copy(update={"info": {**step.info, "candidate_meta": meta}}))
    return steps


def attempts_by_pair(attempts: Sequence[Trajectory], n: int) -> dict[tuple[str, int], list[Trajectory]]:
    """Search sample s of a task reranks its attempts with samples s·n .. s·n + n − 1."""
    out: dict[tuple[str, int], list[Trajectory]] = defaultdict(list)
    for t in sorted(attempts, key=lambda t: (t.task_id, t.sample)):
        out[(t.task_id, t.sample // n)].append(t)
    return out


@register_search("trajectory-best-of-n", TrajectoryBestOfNConfig,
                 "trajectory best-of-N: rerank N independent attempts by aggregated PRM step scores")
def run_trajectory_best_of_n(cfg: TrajectoryBestOfNConfig, job: SearchJob) -> None:
    store, todo = job.open(job.spec, cfg.describe())
    try:
        if not todo:
            return
        tasks = sorted({it.task_id for it in todo})
        if cfg.agent is not None:
            agent = cfg.agent.build()
            try:
                spec = job.env_spec(agent.needs_expert_hints)
                attempts_store = rollout(spec, agent, tasks, job.out / ATTEMPTS_DIR, split=job.split,
                                         samples_per_task=cfg.n * job.samples, batch_size=job.batch, seed=job.seed,
                                         workers=job.workers, backend=job.backend, step_timeout=job.step_timeout,
                                         progress=job.progress, label="attempts")
                attempts_store.close()
            finally:
                agent.close()
            attempts = TrajectoryStore.open(job.out / ATTEMPTS_DIR).load()
        else:
            attempts = TrajectoryStore.open(cfg.source).load()
            other = [t for t in attempts if t.env != job.spec.name]
            if other:
                raise ValueError(f"{cfg.source}: trajectory {other[0].id} is from env {other[0].env!r}, "
                                 f"not {job.spec.name!r}")
        groups = attempts_by_pair([t for t in attempts if t.task_id in set(tasks)], cfg.n)
        for it in todo:
            have = len(groups.get(it.key, []))
            if have < cfg.n:
                where = cfg.source or job.out / ATTEMPTS_DIR
                raise ValueError(f"{where}: task {it.task_id!r} has {have} attempts with samples "
                                 f"{it.sample * cfg.n}..{(it.sample + 1) * cfg.n - 1}; trajectory-best-of-n needs "
                                 f"n={cfg.n}")
        needed = [t for it in todo for t in groups[it.key]]
        scorer = cfg.open()
        scored = dict(zip((t.id for t in needed),
                          score_attempts(scorer, needed, cfg.prm_batch, job.progress), strict=True))
        for it in todo:
            store.append(reranked(cfg, groups[it.key], [scored[t.id] for t in groups[it.key]], it.sample))
    finally:
        store.close()


def reranked(cfg: TrajectoryBestOfNConfig, group: Sequence[Trajectory], scores: Sequence[list[float] | None],
             sample: int) -> Trajectory:
    """The kept attempt as the search's trajectory for (task, sample), with the budget of all N attempts and
    what the rerank saw (every attempt's id, sample, aggregate and outcome)."""
    choice = rerank(group, scores, cfg.aggregation, cfg.weighted, cfg.answer)
    kept = group[choice.index]
    budget = Budget()
    for t, s in zip(group, scores, strict=True):
        spent = t.meta.get("budget")
        budget.add(spent if isinstance(spent, dict) else trajectory_budget(t).as_dict())
        budget.prm_calls += len(s or ())
    search = {
        "method": cfg.method, "aggregation": cfg.aggregation, "weighted": cfg.weighted, "n": cfg.n,
        "chosen": kept.id, "aggregate": choice.aggregates[choice.index],
        "attempts": [{"id": t.id, "sample": t.sample, "aggregate": a, "success": t.success,
                      "termination": t.termination, "steps": len(t.steps)}
                     for t, a in zip(group, choice.aggregates, strict=True)],
    }
    if choice.weights is not None:
        search["answer_weights"] = [[a, w] for a, w in choice.weights.items()]
    return kept.model_copy(update={
        "id": Trajectory.new_id(), "sample": sample, "agent": f"trajectory-best-of-{cfg.n}({kept.agent})",
        "steps": _with_scores(kept, scores[choice.index]),
        "meta": {**kept.meta, "budget": budget.as_dict(), "search": search},
    })

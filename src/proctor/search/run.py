"""`run_search(SearchRunConfig)`: any registered search method on a list of tasks, into a trajectory store
(resumable: re-running the same config plays only the missing (task, sample) pairs)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from proctor.envs.ref import EnvRef, TaskChoice
from proctor.rollout.run import select_tasks
from proctor.rollout.summary import RolloutSummary, summarize
from proctor.search.registry import SearchConfig, SearchJob, get_search
from proctor.store import TrajectoryStore


class SearchRunConfig(TaskChoice, EnvRef):
    """One search stage: which env and tasks (`EnvRef`, `TaskChoice`), which method with which parameters, where
    to."""

    search: SearchConfig = Field(description="the method and its parameters: {method: ..., ...}")
    out: Path = Field(description="trajectory store directory (re-run to resume)")
    samples: int = Field(default=1, ge=1, description="searches per task (each with its own episode seed)")
    batch: int = Field(default=8, ge=1, description="searches (or envs) run together")
    seed: int = Field(default=0, ge=0, description="run seed; episode seeds derive from it")
    workers: int = Field(default=0, ge=0, description="env worker processes (0: in this process)")
    backend: Literal["local", "ray"] = Field(default="local", description="where env workers run: local, worker processes on "
                                           "this machine; ray, Ray actors (the ray extra)")
    step_timeout: float | None = Field(default=60.0, gt=0, description="seconds before a worker env op (reset, "
                                       "step, fork) counts as hung; None: no limit")
    progress: bool = Field(default=True, description="show a progress bar on stderr")


@dataclass
class SearchResult:
    store: TrajectoryStore
    summary: RolloutSummary
    task_ids: list[str]


def run_search(cfg: SearchRunConfig | Mapping[str, Any]) -> SearchResult:
    """Run `cfg.search` on the selected tasks; returns the store and the summary of exactly these pairs."""
    cfg = cfg if isinstance(cfg, SearchRunConfig) else SearchRunConfig.model_validate(dict(cfg))
    spec = cfg.env_spec()
    task_ids = cfg.tasks if isinstance(cfg.tasks, list) else select_tasks(spec, cfg.split, cfg.tasks)
    job = SearchJob(spec, list(task_ids), cfg.samples, cfg.out, split=cfg.split, seed=cfg.seed, batch=cfg.batch,
                    workers=cfg.workers, backend=cfg.backend, step_timeout=cfg.step_timeout, progress=cfg.progress)
    get_search(cfg.search.method).run(cfg.search, job)
    store = TrajectoryStore.open(cfg.out)
    wanted = {(t, k) for t in task_ids for k in range(cfg.samples)}
    return SearchResult(store, summarize(t for t in store if t.key in wanted), list(task_ids))

"""`run_search(SearchRunConfig)`: any registered search method on a list of tasks, into a trajectory store
(resumable: re-running the same config plays only the missing (task, sample) pairs)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from proctor.envs.registry import EnvSpec, import_env_module
from proctor.rollout.config import check_tasks
from proctor.rollout.run import select_tasks
from proctor.rollout.summary import RolloutSummary, summarize
from proctor.search.registry import SearchConfig, SearchJob, get_search
from proctor.store import TrajectoryStore


class SearchRunConfig(BaseModel):
    """One search stage: which env and tasks, which method with which parameters, where to."""

    model_config = ConfigDict(extra="forbid")

    env: str = Field(description="registered env name (`proctor envs`)")
    env_kwargs: dict[str, Any] = Field(default_factory=dict, description="env constructor arguments")
    env_module: str | None = Field(default=None, description="module imported first (registers your own envs)")
    search: SearchConfig = Field(description="the method and its parameters: {method: ..., ...}")
    out: Path = Field(description="trajectory store directory (re-run to resume)")
    split: str = Field(default="test", description="the env's task split the tasks come from (e.g. train, test; `proctor envs` "
                       "lists an env's splits)")
    tasks: int | list[str] | None = Field(default=None, description="first N tasks of the split, ids, or all")
    samples: int = Field(default=1, ge=1, description="searches per task (each with its own episode seed)")
    batch: int = Field(default=8, ge=1, description="searches (or envs) run together")
    seed: int = Field(default=0, ge=0, description="run seed; episode seeds derive from it")
    workers: int = Field(default=0, ge=0, description="env worker processes (0: in this process)")
    backend: Literal["local", "ray"] = Field(default="local", description="where env workers run: local, worker processes on "
                                           "this machine; ray, Ray actors (the ray extra)")
    step_timeout: float | None = Field(default=60.0, gt=0, description="seconds before a worker env op (reset, "
                                       "step, fork) counts as hung; None: no limit")
    progress: bool = Field(default=True, description="show a progress bar on stderr")

    @field_validator("tasks")
    @classmethod
    def _tasks(cls, v: int | list[str] | None) -> int | list[str] | None:
        return check_tasks(v)


@dataclass
class SearchResult:
    store: TrajectoryStore
    summary: RolloutSummary
    task_ids: list[str]


def run_search(cfg: SearchRunConfig | Mapping[str, Any]) -> SearchResult:
    """Run `cfg.search` on the selected tasks; returns the store and the summary of exactly these pairs."""
    cfg = cfg if isinstance(cfg, SearchRunConfig) else SearchRunConfig.model_validate(dict(cfg))
    if cfg.env_module:
        import_env_module(cfg.env_module)
    spec = EnvSpec(cfg.env, dict(cfg.env_kwargs))
    task_ids = cfg.tasks if isinstance(cfg.tasks, list) else select_tasks(spec, cfg.split, cfg.tasks)
    job = SearchJob(spec, list(task_ids), cfg.samples, cfg.out, split=cfg.split, seed=cfg.seed, batch=cfg.batch,
                    workers=cfg.workers, backend=cfg.backend, step_timeout=cfg.step_timeout, progress=cfg.progress)
    get_search(cfg.search.method).run(cfg.search, job)
    store = TrajectoryStore.open(cfg.out)
    wanted = {(t, k) for t in task_ids for k in range(cfg.samples)}
    return SearchResult(store, summarize(t for t in store if t.key in wanted), list(task_ids))

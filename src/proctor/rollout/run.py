"""`run_rollout(RolloutConfig)`: the rollout stage as one library call (used by `proctor rollout`, the
quickstart and the pipeline)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from proctor.agents.base import Agent
from proctor.envs.registry import EnvSpec
from proctor.rollout.config import RolloutConfig
from proctor.rollout.engine import rollout
from proctor.rollout.failures import env_failures
from proctor.rollout.starts import completion_items
from proctor.rollout.summary import RolloutSummary, summarize
from proctor.store import TrajectoryStore

log = logging.getLogger(__name__)


@dataclass
class RolloutResult:
    store: TrajectoryStore
    summary: RolloutSummary
    task_ids: list[str]


def select_tasks(env_spec: EnvSpec, split: str, n_tasks: int | None) -> list[str]:
    """The first `n_tasks` task ids of `split` (all when None)."""
    env = env_spec.make()
    try:
        if split not in env.splits():
            raise ValueError(f"env {env_spec.name!r} has no split {split!r}; it has {list(env.splits())}")
        ids = list(env.task_ids(split))
    finally:
        env.close()
    if n_tasks is not None:
        if n_tasks < 1:
            raise ValueError(f"n_tasks must be >= 1, got {n_tasks}")
        ids = ids[:n_tasks]
    if not ids:
        raise ValueError(f"env {env_spec.name!r} split {split!r} has no tasks")
    return ids


def run_rollout(cfg: RolloutConfig, agent: Agent | None = None, overwrite: bool = False) -> RolloutResult:
    """Roll out `cfg.agent` (or an `agent` built in code) on the configured env; resumes into `cfg.out` (the same
    run), refuses a `cfg.out` that holds another run's trajectories, or with `overwrite` replaces them.

    With `cfg.start`, the work is K completions from every chosen prefix of the stored source trajectories
    (of the selected tasks) instead of K samples from each task's first state. Returns the store and the
    summary of exactly the requested episodes; raises `EnvFailures` (after storing them all) when any of those
    ended in `env_error` (`proctor.rollout.failures`), and `RolloutInterrupted` on Ctrl-C."""
    spec = cfg.env_spec()  # checked when `cfg` was validated (`RolloutConfig`)
    if cfg.start is not None:
        sources = TrajectoryStore.open(cfg.start.source).load()
        if isinstance(cfg.tasks, list):
            sources = [t for t in sources if t.task_id in set(cfg.tasks)]
        elif isinstance(cfg.tasks, int):
            keep = sorted({t.task_id for t in sources})[:cfg.tasks]
            sources = [t for t in sources if t.task_id in set(keep)]
        wrong = [t for t in sources if t.env != cfg.env]
        if wrong:
            raise ValueError(f"{cfg.start.source}: trajectory {wrong[0].id} is from env {wrong[0].env!r}, "
                             f"not {cfg.env!r}")
        usable = [t for t in sources if t.termination not in ("env_error", "agent_error")]
        if len(usable) < len(sources):
            log.warning("%s: %d of %d source trajectories ended in an env/agent error; not completed",
                        cfg.start.source, len(sources) - len(usable), len(sources))
        work = completion_items(usable, cfg.start.prefix_lengths, cfg.start.completions, cfg.start.candidates,
                                cfg.start.per_source, cfg.seed)
        if not work:
            raise ValueError(f"{cfg.start.source}: no prefixes to complete (no usable trajectories)")
        task_ids = sorted({t.task_id for t in usable})
        tasks, start_from = work, str(cfg.start.source.resolve())
        if cfg.start.candidates is not None:  # a different candidate set is a different run
            start_from += f"#candidates={cfg.start.candidates.model_dump_json()}"
        if cfg.start.per_source is not None:
            start_from += f"#per_source={cfg.start.per_source}"
    else:
        task_ids = cfg.tasks if isinstance(cfg.tasks, list) else select_tasks(spec, cfg.split, cfg.tasks)
        tasks, start_from = task_ids, None
    agent = agent or cfg.agent.build()
    store = rollout(spec, agent, tasks, cfg.out, split=cfg.split, samples_per_task=cfg.samples,
                    batch_size=cfg.batch, seed=cfg.seed, workers=cfg.workers, backend=cfg.backend,
                    step_timeout=cfg.step_timeout, progress=cfg.progress, retry_failed=cfg.retry_failed,
                    max_agent_failures=cfg.max_agent_failures, start_from=start_from,
                    label="complete" if cfg.start else "rollout", engine=cfg.engine, concurrency=cfg.concurrency,
                    overwrite=overwrite)
    if cfg.start is not None:
        wanted = {w.key for w in tasks}
    else:
        wanted = {(t, k) for t in task_ids for k in range(cfg.samples)}
    trajs = [t for t in store if t.key in wanted]
    result = RolloutResult(store, summarize(trajs), task_ids)
    failures = env_failures(trajs, store.root, result)
    if failures is not None:
        raise failures
    return result


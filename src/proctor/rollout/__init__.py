"""Run agents in envs: continuous batching over B envs, K samples per task, worker processes or Ray actors,
timeouts, resume, progress and the summary table."""

from proctor.rollout.engine import episode_seed, plan, rollout
from proctor.rollout.run import RolloutResult, build_agent, run_rollout, select_tasks
from proctor.rollout.summary import RolloutSummary, summarize, summary_table, wilson_interval
from proctor.rollout.workers import EnvPool, InProcessEnvPool, ProcessEnvPool, make_pool

__all__ = [
    "EnvPool", "InProcessEnvPool", "ProcessEnvPool", "RolloutResult", "RolloutSummary", "build_agent",
    "episode_seed", "make_pool", "plan", "rollout", "run_rollout", "select_tasks", "summarize",
    "summary_table", "wilson_interval",
]

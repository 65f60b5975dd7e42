"""Run agents in envs: the one episode loop (`episode`), continuous batching over B envs, K samples per task
or K completions per stored prefix, worker processes or Ray actors, timeouts, resume, progress and the
summary table. The stage entry point is `run_rollout(RolloutConfig)`."""

from proctor.episode import Episode, WorkItem, episode_seed, termination_of
from proctor.rollout.backends import make_pool
from proctor.rollout.config import RolloutConfig, StartConfig
from proctor.rollout.engine import AgentFailing, plan, rollout
from proctor.rollout.failures import EnvFailures, RolloutInterrupted
from proctor.rollout.pools import EnvPool, InProcessEnvPool
from proctor.rollout.run import RolloutResult, run_rollout, select_tasks
from proctor.rollout.summary import RolloutSummary, summarize, summary_table, wilson_interval
from proctor.rollout.worker_process import ProcessEnvPool

__all__ = [
    "AgentFailing", "EnvFailures", "EnvPool", "Episode", "InProcessEnvPool", "ProcessEnvPool", "RolloutConfig",
    "RolloutInterrupted", "RolloutResult", "RolloutSummary", "StartConfig", "WorkItem", "episode_seed", "make_pool", "plan", "rollout", "run_rollout",
    "select_tasks", "summarize", "summary_table", "termination_of", "wilson_interval",
]

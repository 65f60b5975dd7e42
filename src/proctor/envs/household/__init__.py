"""`household`: an ALFWorld-like household environment in pure Python, with an oracle and a searching expert.

from proctor.envs import make
env = make("household", seed=0, max_steps=30)
obs, info = env.reset(env.task_ids("test")[0])
"""

from proctor.envs.household.env import HouseholdEnv
from proctor.envs.household.expert import oracle_action, search_policy
from proctor.envs.household.tasks import COMPOSITION_SPLIT, TASK_TYPES, TaskSpec, held_out_pairs, parse_task

__all__ = [
    "COMPOSITION_SPLIT",
    "TASK_TYPES",
    "HouseholdEnv",
    "TaskSpec",
    "held_out_pairs",
    "oracle_action",
    "parse_task",
    "search_policy",
]

"""Using a PRM to act better (docs/methods.md §8): per-step best-of-N as an ordinary agent (agent kind
`best-of-n`), trajectory-level best-of-N as a rerank of independent attempts, and step-level beam search and
DVTS over env copies; every method counts its budget (`Trajectory.meta["budget"]`).

Importing this package registers the agent kind `best-of-n` and the search methods `step-best-of-n`,
`trajectory-best-of-n`, `beam` and `dvts` (`search_methods()`); `run_search(SearchRunConfig)` runs any of them
on a list of tasks into a trajectory store.
"""

from proctor.renames import moved_names
from proctor.search import agents as _agents  # noqa: F401  (registers the agent kind best-of-n)
from proctor.search.agents import BestOfNConfig
from proctor.search.aggregate import (
    STEP_AGGREGATIONS,
    aggregate,
    answer_weights,
    best_index,
    weighted_best_index,
)
from proctor.search.best_of_n import BestOfNAgent, merge_candidates, rank
from proctor.search.budget import Budget, trajectory_budget
from proctor.search.registry import (
    SearchConfig,
    SearchJob,
    SearchSpec,
    get_search,
    search_config,
    search_methods,
)
from proctor.search.rerank import Rerank, rerank
from proctor.search.rerank_method import TrajectoryBestOfNConfig
from proctor.search.run import SearchResult, SearchRunConfig, run_search
from proctor.search.step_method import StepBestOfNConfig
from proctor.search.tree import TreeSearch
from proctor.search.tree_method import BeamConfig, DVTSConfig

__all__ = [
    "STEP_AGGREGATIONS", "BeamConfig", "BestOfNAgent", "BestOfNConfig", "Budget", "DVTSConfig", "Rerank",
    "SearchConfig", "SearchJob", "SearchResult", "SearchRunConfig", "SearchSpec", "StepBestOfNConfig",
    "TrajectoryBestOfNConfig", "TreeSearch", "aggregate", "answer_weights", "best_index", "get_search",
    "merge_candidates", "rank", "rerank", "run_search", "search_config", "search_methods", "trajectory_budget",
    "weighted_best_index",
]

#: the step-score aggregations' earlier name (a loss's aggregation is another thing: `proctor.rl.policy_losses`)
__getattr__ = moved_names(__name__, {"AGGREGATIONS": "STEP_AGGREGATIONS"})

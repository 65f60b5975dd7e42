"""proctor: process reward models for LLM agents.

Pipeline: envs → rollout (agents) → trajectories → credit (per-step targets) → prm (train, score)
→ search (best-of-N, beam) and rl (policy improvement). See the README's architecture section.
"""

from proctor.store import TrajectoryStore
from proctor.trajectory import Step, Trajectory

__version__ = "0.1.0"
__all__ = ["Step", "Trajectory", "TrajectoryStore", "__version__"]

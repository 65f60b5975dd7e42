"""What the engine adapters share (`proctor.integrations.trl`, `.openenv`, `.rewards`): one episode of a proctor env
driven by another engine's calls, built as proctor's rollout engine builds it (`proctor.episode`), and a PRM opened
once, on first use, and shared by every episode.

- `TaskOrder`: the tasks of a split in order, round and round (the default when a caller names no task).
- `start_episode`, `step_episode`, `finish_episode`: `env.reset` / `env.step` recorded in an `Episode`, and the
  finished (or, for scoring, the running) episode as a `Trajectory`.
- `end_reason`: how an episode that the env ended finished, in words.
- `PRMHandle`: a `proctor.prm.ref.PRMRef` opened on first use (any proctor PRM: a folder, or a served one), one
  scorer for all callers, its calls serialised by a lock; `AdapterPRM`: the PRM fields of the adapters' configs.

Importing this module imports no model library; the PRM's loads when it is first used.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from proctor.agents.registry import Device, Dtype
from proctor.envs.base import StepResult, TextEnv
from proctor.episode import Episode, WorkItem, episode_seed, termination_of
from proctor.prm.ref import PRMBatch, PRMRef, PRMServer
from proctor.prompts.render import PromptConfig
from proctor.prompts.turns import Candidate
from proctor.trajectory import Termination, Trajectory


class TaskOrder:
    """The task ids of one split, handed out in order and then again from the start; safe to share between
    threads (concurrent sessions of a server get different tasks)."""

    def __init__(self, env: str, split: str, tasks: Sequence[str]):
        self.env, self.split, self.tasks = env, split, list(tasks)
        self._next = 0
        self._lock = threading.Lock()

    def next(self) -> str:
        if not self.tasks:
            raise ValueError(f"{self.env}: no tasks in split {self.split!r}")
        with self._lock:
            task_id = self.tasks[self._next % len(self.tasks)]
            self._next += 1
        return task_id


def start_episode(env: TextEnv, task_id: str, seed: int | None = None, *, run_seed: int = 0) -> Episode:
    """Reset `env` to `task_id` with env seed `seed` (None: `episode_seed(run_seed, task_id, 0)`, the seed the
    rollout engine gives the task's first sample) and begin recording the episode."""
    seed = episode_seed(run_seed, task_id, 0) if seed is None else int(seed)
    obs, info = env.reset(task_id, seed)
    return Episode.begin(env.name, WorkItem(task_id, 0, seed), obs, info)


def step_episode(env: TextEnv, episode: Episode, action: str) -> StepResult:
    """`env.step(action)`, recorded as the episode's next step; returns what the env returned."""
    result = env.step(action)
    episode.record(Candidate(action=action), result)
    return result


def finish_episode(env: TextEnv, episode: Episode, *, split: str, agent: str, run_seed: int) -> Trajectory:
    """The episode as a `Trajectory`: its termination is the env's (`termination_of`) when the env ended it, else
    `failure` (the caller stopped acting). A running episode gives the trajectory of its steps so far, which is
    what a PRM scores a step in (its score depends on the steps up to it, not on the termination)."""
    termination: Termination = termination_of(episode.info) if env.done else "failure"
    return episode.finish(termination, split=split, agent=agent, run_seed=run_seed)


def end_reason(info: dict[str, Any], max_steps: int) -> str:
    """How an episode that the env ended finished: `the task is done`, `the step limit (N) is reached` or
    `the task failed`."""
    if info.get("won"):
        return "the task is done"
    if info.get("truncated"):
        return f"the step limit ({max_steps}) is reached"
    return "the task failed"


class PRMHandle:
    """A proctor PRM opened on first use and shared: a `PRMRef` (opened by `PRMRef.open`), or a scorer object given
    ready-made. Its scoring calls run one at a time (sessions of a server score from several threads)."""

    def __init__(self, prm: PRMRef | Any):
        self.ref = prm if isinstance(prm, PRMRef) else None
        self._scorer = None if isinstance(prm, PRMRef) else prm
        self._lock = threading.RLock()

    @property
    def scorer(self) -> Any:
        with self._lock:
            if self._scorer is None:
                self._scorer = self.ref.open()
            return self._scorer

    def score_trajectories(self, trajs: Sequence[Trajectory], prompt: Any = None) -> list[list[float]]:
        """The PRM's score of every step of every trajectory (`score_trajectories`; [] for one without steps)."""
        with_steps = [t for t in trajs if t.steps]
        with self._lock:
            scores = iter(self.scorer.score_trajectories(with_steps, prompt) if with_steps else [])
        return [[float(q) for q in next(scores)] if t.steps else [] for t in trajs]

    def score_text(self, examples: Sequence[Any]) -> list[list[float]]:
        """The PRM's score of every step of stepwise-text examples, as `proctor prm score` gives them
        (`proctor.prm.text_scorer.StepwiseScorer`: any PRM, a likelihood PRM through `stepwise` episodes)."""
        from proctor.prm.text_scorer import StepwiseScorer

        with self._lock:
            return StepwiseScorer(self.scorer).score_examples(list(examples))


class AdapterPRM(BaseModel):
    """The PRM fields of an adapter's config (`trl.RewardConfig`, `openenv.ServeEnvConfig`): a `PRMRef` under the
    keys these configs have (`prm_device`, `prm_dtype`, `prm_batch_size`), and the prompt it renders states with."""

    model_config = ConfigDict(extra="forbid")

    prm: str | None = Field(None, description="folder of a proctor PRM (any kind `proctor.prm.ref.PRMRef` opens); "
                            "its step scores make the reward")
    prm_server: PRMServer = None
    prm_prompt: PromptConfig | None = Field(None, description="how the PRM renders states (None: its default)")
    prm_device: Device = "auto"
    prm_dtype: Dtype = "auto"
    prm_batch_size: PRMBatch = 16

    def prm_handle(self) -> PRMHandle | None:
        """The PRM, opened on first use and shared (None without one)."""
        if not self.prm and self.prm_server is None:
            return None
        return PRMHandle(PRMRef(prm=self.prm or None, prm_server=self.prm_server, prm_batch=self.prm_batch_size,
                                device=self.prm_device, dtype=self.prm_dtype))

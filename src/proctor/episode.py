"""The one episode loop's unit: prefix → action → step → trajectory, and the termination rule.

An `Episode` is a live (task, sample) in some env: the state the agent acts in next (`prefix()`), the steps
taken so far (`record()` appends one per env reply) and, when it ends, its `Trajectory` (`finish()`). The
batched rollout engine (`proctor.rollout`), completions from stored prefixes, beam search and the tiny
model's tokenizer corpus (`play`, one env in this process) all build trajectories through it, so they share
one definition of a step's fields, of truncation and of how an episode ends. It sits just above `prompts`,
so every layer can use it.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from proctor.prompts.turns import Candidate, Prefix
from proctor.trajectory import Step, Termination, Trajectory

#: info keys that describe a state rather than an action's outcome; a Step keeps those of `Step.observation`
STATE_INFO_KEYS = ("admissible_actions", "expert_action")
#: reset-info keys copied onto `Trajectory.task_meta` (what evaluations break results down by)
TASK_META_KEYS = ("task_type",)


def episode_seed(run_seed: int, task_id: str, sample: int) -> int:
    """The env seed of one (task, sample): the first 31 bits of sha256("<run_seed>/<task_id>/<sample>").

    Deterministic across processes and machines (unlike `hash()`), independent of batch order and of
    which pairs a resumed run still has to do.
    """
    digest = hashlib.sha256(f"{run_seed}/{task_id}/{sample}".encode()).digest()
    return int.from_bytes(digest[:4], "big") >> 1


def completion_sample(source_id: str, prefix_len: int, index: int) -> int:
    """The 31-bit sample number of completion `index` after the first `prefix_len` actions of a source:
    distinct per completion, so a policy seeded by (task, sample, step) makes different choices in each."""
    digest = hashlib.sha256(f"completion/{source_id}/{prefix_len}/{index}".encode()).digest()
    return int.from_bytes(digest[:4], "big") >> 1


@dataclass(frozen=True)
class WorkItem:
    """One episode to run: a (task, sample) with its env seed; `start` = stored steps to replay first
    (a completion from a prefix), `meta` = what the trajectory's `meta` records about that start."""

    task_id: str
    sample: int
    seed: int
    start: tuple[Step, ...] = ()
    meta: tuple[tuple[str, Any], ...] = ()

    @property
    def key(self) -> tuple[str, int]:
        return (self.task_id, self.sample)


def termination_of(info: dict[str, Any]) -> Termination:
    """How an episode that the env ended finished: `success` if won, `max_steps` if only the step limit
    ended it (truncation), else `failure`."""
    if info.get("won"):
        return "success"
    return "max_steps" if info.get("truncated") else "failure"


def step_info(before: dict[str, Any], after: dict[str, Any], candidate: Candidate) -> dict[str, Any]:
    """A Step's info: the env's step info, but with the state keys (admissible actions, expert action) of
    the state the agent acted in, and whether the agent's output parsed."""
    info = {k: v for k, v in after.items() if k not in STATE_INFO_KEYS}
    for k in STATE_INFO_KEYS:
        if k in before:
            info[k] = before[k]
    info["parsed"] = candidate.parsed
    if not candidate.finished:
        info["finished"] = False
    if candidate.meta:
        info["candidate_meta"] = candidate.meta
    return info


@dataclass
class Episode:
    """A live episode (see module docstring); `info` is the current state's: reset's info, then the last step's
    result as one dict (`StepResult.as_info()`)."""

    env: str
    item: WorkItem
    task: str
    observation: str
    info: dict[str, Any]
    started: float = field(default_factory=time.monotonic)
    steps: list[Step] = field(default_factory=list)
    task_meta: dict[str, Any] = field(default_factory=dict)
    reset_s: float = 0.0
    env_s: float = 0.0
    agent_s: float = 0.0

    @classmethod
    def begin(cls, env: str, item: WorkItem, observation: str, info: dict[str, Any], reset_s: float = 0.0
              ) -> Episode:
        """The episode after `reset` (or after replaying `item.start`): `info` is the current state's info."""
        return cls(env, item, info.get("task", ""), observation, info, reset_s=reset_s, steps=list(item.start),
                   task_meta={k: info[k] for k in TASK_META_KEYS if k in info})

    def prefix(self) -> Prefix:
        """The state the agent acts in next."""
        return Prefix(env=self.env, task_id=self.item.task_id, task=self.task, observation=self.observation,
                      history=list(self.steps), info=self.info, sample=self.item.sample, seed=self.item.seed)

    def record(self, candidate: Candidate, result: Any) -> Step:
        """Append the step that `candidate` made and move to the env's reply, a `proctor.envs.StepResult` (read
        by its fields: this module sits below the envs); returns the stored step, whose info is the result as one
        dict (`StepResult.as_info()`: `valid`, `won`, `truncated`, `score`, ...) with the state keys of the state
        acted in."""
        info = result.as_info()
        step = Step(observation=self.observation, action=candidate.action, reason=candidate.reason,
                    raw_output=candidate.raw_output, logprobs=candidate.logprobs, token_ids=candidate.token_ids,
                    reward=float(result.reward), done=bool(result.done), truncated=bool(result.truncated),
                    info=step_info(self.info, info, candidate))
        self.steps.append(step)
        self.observation, self.info = result.observation, info
        return step

    def finish(self, termination: Termination, *, split: str, agent: str, run_seed: int,
               error: str | None = None) -> Trajectory:
        """The finished episode as a `Trajectory`."""
        return Trajectory(
            id=Trajectory.new_id(), env=self.env, task_id=self.item.task_id, sample=self.item.sample,
            task=self.task, split=split, seed=self.item.seed, agent=agent, steps=self.steps,
            final_observation=self.observation if self.steps else "",
            success=termination == "success", score=float(self.info.get("score", 0.0)),
            termination=termination, error=error, task_meta=self.task_meta,
            timings={"reset_s": self.reset_s, "env_s": self.env_s, "agent_s": self.agent_s,
                     "wall_s": time.monotonic() - self.started},
            meta={"run_seed": run_seed, **dict(self.item.meta)},
        )


def play(env: Any, item: WorkItem, act: Callable[[Prefix], Candidate | None], *, split: str = "train",
         agent: str = "policy", run_seed: int = 0) -> Trajectory:
    """Play one episode of `item` in `env` (a `TextEnv`, in this process) with `act(prefix) -> Candidate`;
    `act` returning None stops the episode there (termination `failure`). Env errors propagate."""
    if item.start:
        obs, info = env.replay(item.task_id, item.seed, [s.action for s in item.start])
        info = {**env.task_info, **info}
    else:
        obs, info = env.reset(item.task_id, item.seed)
    ep = Episode.begin(env.name, item, obs, info)
    while not env.done:
        candidate = act(ep.prefix())
        if candidate is None:
            return ep.finish("failure", split=split, agent=agent, run_seed=run_seed)
        ep.record(candidate, env.step(candidate.action))
    return ep.finish(termination_of(ep.info), split=split, agent=agent, run_seed=run_seed)

"""`RolloutConfig`: everything one rollout stage needs, validated before any episode runs."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from proctor.agents.registry import AgentConfig, agent_config
from proctor.envs.ref import EnvRef, TaskChoice
from proctor.rollout.starts import CandidateConfig, PrefixLengths


class StartConfig(BaseModel):
    """Start from stored prefixes instead of the tasks' first states (`proctor rollout --from`)."""

    model_config = ConfigDict(extra="forbid")

    source: Path = Field(description="trajectory store whose trajectories' action prefixes are replayed")
    prefix_lengths: PrefixLengths = Field(
        default="steps", description="'steps': k = 1..T (Math-Shepherd); 'states': k = 0..T-1; or a list of k")
    completions: int = Field(default=4, ge=1, description="completions per prefix")
    per_source: int | None = Field(default=None, ge=1, description="at most this many prefixes per source "
                                   "trajectory, drawn at random (seeded by the run seed and the source's task and sample)")
    candidates: CandidateConfig | None = Field(
        default=None, description="at each state t (prefix_lengths 'states' or t < T), try these actions first")


class RolloutConfig(TaskChoice, EnvRef):
    """One rollout stage: which env and tasks (`EnvRef`, `TaskChoice`), which agent, how many samples, where to,
    how."""

    agent: AgentConfig = Field(default_factory=lambda: agent_config("random"),
                               description="agent config: {kind: ..., ...}, any kind of the agent registry "
                               "(`proctor rollout --help` lists them)")
    out: Path = Field(description="trajectory store directory (re-run to resume)")
    samples: int = Field(default=1, ge=1, description="rollouts per task (K)")
    batch: int = Field(default=8, ge=1, description="envs stepped together (B; the lockstep engine)")
    engine: Literal["auto", "lockstep", "async"] = Field(
        default="auto", description="lockstep: one agent call per step for B envs (local models batch them); "
        "async: each episode on its own, `concurrency` in flight (served models); auto: async when the agent "
        "is served")
    concurrency: int | None = Field(default=None, ge=1, description="async engine: episodes in flight (default: "
                                    "the agent's own concurrency, else 32 for a served agent, else `batch`)")
    seed: int = Field(default=0, ge=0, description="run seed; episode seeds derive from it")
    workers: int = Field(default=0, ge=0, description="env worker processes (0: in this process)")
    backend: Literal["local", "ray"] = Field(default="local", description="where env workers run: local, worker processes on "
                                           "this machine; ray, Ray actors (the ray extra)")
    step_timeout: float | None = Field(default=60.0, gt=0,
                                       description="seconds before a worker env op (reset, step) counts as hung")
    retry_failed: bool = Field(default=False, description="re-run stored episodes that ended in env/agent errors")
    max_agent_failures: int | None = Field(default=3, ge=1,
                                           description="stop when the agent's first N calls all fail")
    start: StartConfig | None = Field(default=None, description="complete stored prefixes instead of starting "
                                      "from the tasks' first states (`proctor rollout --from`); None: fresh episodes")
    progress: bool = Field(default=True, description="show a progress bar on stderr")

"""`RolloutConfig`: everything one rollout stage needs, validated before any episode runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from proctor.agents.registry import AgentConfig, agent_config
from proctor.envs.registry import check_spec, entry, import_env_module
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


class RolloutConfig(BaseModel):
    """One rollout stage: which env and tasks, which agent, how many samples, where to, how."""

    model_config = ConfigDict(extra="forbid")

    env_module: str | None = Field(default=None, description="module imported first, a dotted name or a .py "
                                   "file's path (it registers your own envs)")
    env: str = Field(description="registered env name (`proctor envs`); a missing extra is an error naming it")
    env_kwargs: dict[str, Any] = Field(default_factory=dict, validate_default=True, description="env constructor "
                                       "arguments (checked against the env's own: a misspelt one is an error)")
    agent: AgentConfig = Field(default_factory=lambda: agent_config("random"),
                               description="agent config: {kind: ..., ...}, any kind of the agent registry "
                               "(`proctor rollout --help` lists them)")
    out: Path = Field(description="trajectory store directory (re-run to resume)")
    split: str = Field(default="test", description="the env's task split the tasks come from (e.g. train, test; `proctor envs` "
                       "lists an env's splits)")
    tasks: int | list[str] | None = Field(default=None, description="first N tasks of the split, ids, or all")
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

    @field_validator("tasks")
    @classmethod
    def _tasks(cls, v: int | list[str] | None) -> int | list[str] | None:
        return check_tasks(v)

    @field_validator("env_module")
    @classmethod
    def _env_module(cls, v: str | None) -> str | None:
        if v:
            try:
                import_env_module(v)
            except ImportError as e:
                raise ValueError(str(e)) from None
        return v

    @field_validator("env")
    @classmethod
    def _env(cls, v: str) -> str:
        try:
            entry(v).factory()
        except KeyError as e:
            raise ValueError(e.args[0]) from None
        except ImportError as e:
            raise ValueError(str(e)) from None
        return v

    @field_validator("env_kwargs")
    @classmethod
    def _env_kwargs(cls, v: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        if "env" in info.data:
            check_spec(info.data["env"], v)
        return v


def check_tasks(v: int | list[str] | None) -> int | list[str] | None:
    """A `tasks` field: a count >= 1, a list of distinct ids, or None (all)."""
    if isinstance(v, int) and v < 1:
        raise ValueError(f"must be >= 1, got {v}")
    if isinstance(v, list) and len(set(v)) != len(v):
        raise ValueError("has duplicate task ids")
    return v

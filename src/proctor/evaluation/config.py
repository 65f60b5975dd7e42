"""`EvalConfig`: one evaluation (an agent config on a split's tasks), validated before anything runs."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator, model_validator

from proctor.agents.registry import AgentConfig, AgentSpec, Device, Dtype, agent_class
from proctor.envs.ref import EnvRef, TaskChoice
from proctor.prm.ref import PRMBatch, PRMServer, check_prm_folder
from proctor.search import agents as _search_agents  # noqa: F401  (registers the agent kind best-of-n)
from proctor.search.registry import SearchConfig, SearchSpec, search_methods


def with_placement(data: Any, device: str, dtype: str | None) -> Any:
    """`data` (agent or search configs as dicts, nested ones included) with `device` / `dtype` filled in
    wherever the config's kind or method has those fields and does not name them; config objects as they are."""
    if isinstance(data, list):
        return [with_placement(x, device, dtype) for x in data]
    if not isinstance(data, Mapping):
        return data
    out = {k: with_placement(v, device, dtype) for k, v in data.items()}
    method = search_methods().get(out.get("method"))
    spec = agent_class(out["kind"]) if "kind" in out else method.config if method else None
    if spec is not None and {"device", "dtype"} <= spec.model_fields.keys():
        out.setdefault("device", device)
        out.setdefault("dtype", dtype)
    return out


class EvalConfig(TaskChoice, EnvRef):
    """Roll out `agent` (or run the search method `search`: beam, DVTS, trajectory best-of-N, ...) on the env's
    tasks (`EnvRef`, `TaskChoice`; K samples per task) into `out` and summarise it; with `ns`, once per N
    (substituted into the field `n` of the agent or search config), one subfolder each."""

    agent: AgentConfig | None = Field(default=None, description="agent config: {kind: ..., ...}; any registered "
                                      "kind, per-step best-of-N included")
    search: SearchConfig | None = Field(default=None, description="or a search method's config: {method: beam, ...}"
                                        " (`proctor.search`), which runs on env copies")
    out: Path = Field(description="the evaluation's folder: its trajectory store, summary.json and summary.csv "
                      "(re-run to resume)")
    name: str | None = Field(default=None, description="the evaluation's name, its label in tables and the "
                             "report (default: the name of the `out` folder)")
    samples: int = Field(default=1, ge=1, description="episodes per task")
    batch: int = Field(default=8, ge=1, description="envs stepped together (searches run together with `search`)")
    seed: int = Field(default=0, ge=0, description="run seed; episode seeds derive from it")
    workers: int = Field(default=0, ge=0, description="env worker processes (0: in this process)")
    step_timeout: float | None = Field(default=60.0, gt=0, description="seconds before a worker env op (reset, "
                                       "step) counts as hung; None: no limit")
    retry_failed: bool = Field(default=False, description="re-run stored episodes that ended in env/agent errors")
    ns: list[int] | None = Field(default=None, description="sweep: one evaluation per N (agent field `n`)")
    prm: Path | None = Field(default=None, description="score every step with this PRM folder afterwards")
    score_key: str = Field(default="prm", description="the Step.scores key the PRM's scores go to")
    prm_batch_size: PRMBatch = 8
    prm_server: PRMServer = None
    device: Device = "auto"
    dtype: Dtype = "auto"
    progress: bool = Field(default=True, description="show a progress bar on stderr")

    @model_validator(mode="before")
    @classmethod
    def _placed(cls, data: Any) -> Any:
        """`device` / `dtype` place `prm` and every model of `agent` / `search` that does not name its own."""
        if not isinstance(data, Mapping):
            return data
        device, dtype = data.get("device", "auto"), data.get("dtype", "auto")
        return {**data, **{k: with_placement(data[k], device, dtype) for k in ("agent", "search") if k in data}}

    @field_validator("ns")
    @classmethod
    def _ns(cls, v: list[int] | None) -> list[int] | None:
        if v is None:
            return v
        if not v or any(n < 1 for n in v) or len(set(v)) != len(v):
            raise ValueError(f"needs distinct values >= 1, got {v}")
        return sorted(v)

    @field_validator("prm")
    @classmethod
    def _prm(cls, v: Path | None) -> Path | None:
        if v is not None:
            check_prm_folder(str(v))
        return v

    @model_validator(mode="after")
    def _sweepable(self) -> EvalConfig:
        if (self.agent is None) == (self.search is None):
            raise ValueError("give exactly one of agent and search")
        if self.search is not None and self.retry_failed:
            raise ValueError("retry_failed re-runs failed rollouts of an agent; a search run does not retry")
        if self.ns is not None and "n" not in type(self.method).model_fields:
            what = f"agent kind {self.agent.kind!r}" if self.agent else f"search method {self.search.method!r}"
            raise ValueError(f"{what} has no field 'n' to sweep (best-of-n, step-best-of-n and "
                             "trajectory-best-of-n have one)")
        return self

    @property
    def method(self) -> AgentSpec | SearchSpec:
        """What is evaluated: the agent config, or the search config."""
        return self.agent if self.agent is not None else self.search

    def policy_name(self) -> str:
        """The evaluation's name, its row label in `proctor compare` and the report: `name`, else the name of its
        output folder (the agent's config is in the summary's `agent` / `search`)."""
        return self.name or self.out.resolve().name


def dump_agent(agent: AgentSpec | SearchSpec) -> dict[str, Any]:
    """An agent (or search) config as plain JSON data, nested agent configs with all their fields."""
    return agent.model_dump(mode="json", serialize_as_any=True)


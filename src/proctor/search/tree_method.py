"""Search methods `beam` and `dvts`: step-level beam search and diverse verifier tree search over agent
trajectories, every candidate executed in its own env copy (`proctor.search.tree`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from proctor.agents.registry import AgentConfig
from proctor.search.aggregate import StepAggregation
from proctor.search.registry import PRMSearchSpec, SearchJob, register_search
from proctor.search.tree import TreeSearch


class TreeSearchSpec(PRMSearchSpec):
    agent: AgentConfig = Field(description="the policy that proposes candidate actions: {kind: ..., ...}")
    beams: int = Field(default=4, ge=1, description="B: beams kept (beam) or independent subtrees (dvts)")
    expansions: int = Field(default=4, ge=1, description="M: candidates drawn per node (B·M at the root)")
    aggregation: StepAggregation = Field(default="last", description="how a node's step scores make its value")


class BeamConfig(TreeSearchSpec):
    """Step-level beam search: the B best unfinished of the B·M children go on; ends when B have finished."""

    method: Literal["beam"] = Field(default="beam", description="the search method (selects this config)")


class DVTSConfig(TreeSearchSpec):
    """Diverse verifier tree search: B subtrees from the B best root children, each greedy on the PRM."""

    method: Literal["dvts"] = Field(default="dvts", description="the search method (selects this config)")


def _run_tree(cfg: TreeSearchSpec, job: SearchJob) -> None:
    agent = cfg.agent.build()
    try:
        spec = job.env_spec(agent.needs_expert_hints)
        store, todo = job.open(spec, cfg.describe())
        try:
            if todo:
                search = TreeSearch(spec, agent, cfg.open(), beams=cfg.beams, expansions=cfg.expansions,
                                    aggregation=cfg.aggregation, selection=cfg.method,
                                    states_per_pass=cfg.prm_batch, split=job.split, run_seed=job.seed,
                                    name=cfg.method)
                search.run(todo, store, batch=job.batch, workers=job.workers, backend=job.backend,
                           step_timeout=job.step_timeout, progress=job.progress)
        finally:
            store.close()
    finally:
        agent.close()


@register_search("beam", BeamConfig, "step-level beam search: B beams × M expansions, each in its own env copy")
def run_beam(cfg: BeamConfig, job: SearchJob) -> None:
    _run_tree(cfg, job)


@register_search("dvts", DVTSConfig, "diverse verifier tree search: B independent subtrees, greedy on the PRM")
def run_dvts(cfg: DVTSConfig, job: SearchJob) -> None:
    _run_tree(cfg, job)

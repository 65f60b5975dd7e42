"""The search agent kinds of the agent registry: `best-of-n` (per-step best-of-N with a PRM).

Importing `proctor.search` registers them, so `make_agent({"kind": "best-of-n", ...})`, rollout configs,
evaluation configs and `--agent best-of-n` accept them once it is imported.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from proctor.agents.base import Agent
from proctor.agents.registry import AgentConfig, AgentSpec, Device, Dtype, ServerRef, register_agent
from proctor.search.scorer import check_prm_folder, load_scorer


@register_agent("best-of-n")
class BestOfNConfig(AgentSpec):
    """Per-step best-of-N: the PRM's argmax among n samples of a base agent (AgentPRM)."""

    kind: Literal["best-of-n"] = Field(default="best-of-n", description="the agent kind (selects this config)")
    base: AgentConfig = Field(description="the agent whose samples are ranked: {kind: ..., ...}")
    prm: str = Field(description="PRM folder (`proctor prm train` output)")
    n: int = Field(default=8, ge=1, description="candidates drawn per state (identical ones are merged)")
    batch: int = Field(default=16, ge=1, description="states scored together in one batched PRM pass")
    device: Device = "auto"
    dtype: Dtype = "auto"
    prm_server: ServerRef | None = Field(default=None, description="score on a server: vLLM serving a "
                                         "likelihood PRM's LM (prompt_logprobs; the PRM folder gives β, b, prompt and "
                                         "tokenizer), or `proctor prm serve` serving a PRM head")

    @field_validator("prm")
    @classmethod
    def _prm_folder(cls, v: str) -> str:
        return check_prm_folder(v)

    def build(self) -> Agent:
        from proctor.search.best_of_n import BestOfNAgent

        scorer = load_scorer(self.prm, self.batch, self.device, self.dtype, self.prm_server)
        return BestOfNAgent(self.base.build(), scorer, self.n, states_per_pass=self.batch, prm_name=self.prm)

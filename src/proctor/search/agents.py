"""Per-step best-of-N with a PRM, one vocabulary for both of its forms: the agent kind `best-of-n` of the agent
registry (`BestOfNConfig`) and the search method `step-best-of-n` (`proctor.search.step_method`) share
`BestOfN`'s fields: the `agent` whose samples are ranked, `n`, and the PRM's (`proctor.prm.ref.PRMRef`: `prm`,
`prm_batch`, ...).

Importing `proctor.search` registers the agent kind, so `make_agent({"kind": "best-of-n", ...})`, rollout configs,
evaluation configs and `--agent best-of-n` accept it once it is imported. The agent's earlier field names (`base`,
`batch`) still load, each with a one-line note naming the new one.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from proctor.agents.base import Agent
from proctor.agents.registry import AgentConfig, AgentSpec, register_agent
from proctor.prm.ref import PRMRef
from proctor.renames import renamed_fields

#: the `best-of-n` agent's earlier field names, and their names now
RENAMED = {"base": "agent", "batch": "prm_batch"}


class BestOfN(PRMRef):
    """Per-step best-of-N: at every step the PRM's argmax among n samples of `agent` (AgentPRM)."""

    agent: AgentConfig = Field(description="the agent whose samples are ranked: {kind: ..., ...}")
    n: int = Field(default=8, ge=1, description="candidates drawn per state (identical ones are merged)")

    def best_of_n(self) -> Agent:
        """The `BestOfNAgent` (the PRM loaded, the agent built)."""
        from proctor.search.best_of_n import BestOfNAgent

        return BestOfNAgent(self.agent.build(), self.open(), self.n, states_per_pass=self.prm_batch,
                            prm_name=self.prm or self.prm_server.base_url)


@register_agent("best-of-n")
class BestOfNConfig(BestOfN, AgentSpec):
    """Per-step best-of-N: the PRM's argmax among n samples of an agent (AgentPRM)."""

    kind: Literal["best-of-n"] = Field(default="best-of-n", description="the agent kind (selects this config)")

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        return renamed_fields(data, RENAMED, "best-of-n agent: ")

    def build(self) -> Agent:
        return self.best_of_n()

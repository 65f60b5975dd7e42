"""`ExpertAgent`: acts with a scripted expert policy from the env's expert registry (`proctor.envs.experts`)."""

from __future__ import annotations

from collections.abc import Sequence

from proctor.agents.base import Agent, AgentError, Candidate, Prefix
from proctor.envs.experts import ExpertPolicy, ExpertUnavailable, expert_policy


class ExpertAgent(Agent):
    """Acts with a scripted expert; with n > 1 it returns the same action n times (it is deterministic)."""

    def __init__(self, kind: str = "oracle"):
        self.kind = kind
        self.name = f"expert:{kind}"

    def policy_for(self, env: str) -> ExpertPolicy:
        try:
            return expert_policy(env, self.kind)
        except ExpertUnavailable as e:
            raise AgentError(str(e)) from None

    @property
    def needs_expert_hints(self) -> bool:
        return self.kind == "oracle"

    def act(self, prefixes: Sequence[Prefix], n: int = 1) -> list[list[Candidate]]:
        out = []
        for p in prefixes:
            try:
                action = self.policy_for(p.env)(p)
            except ExpertUnavailable as e:
                raise AgentError(str(e)) from None
            out.append([Candidate(action=action, raw_output=action) for _ in range(n)])
        return out

"""Scripted expert policies, registered per environment, and the `ExpertAgent` that runs them.

An expert policy is a pure function of the `Prefix` (task, history, observation, info) returning the next
action text; it keeps no hidden state, so it works unchanged in batches, after a resume, and on cloned envs.
Kinds:
- `oracle`: reads the env's privileged hint `info["expert_action"]` (make the env with `expert_hints=True`);
  works for every env that implements `TextEnv.expert_action` (and ALFWorld's handcoded expert).
- any other kind (for example `search` for `household`): a policy registered with `@register_expert`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from proctor.agents.base import Agent, AgentError, Candidate, Prefix

ExpertPolicy = Callable[[Prefix], str]

_EXPERTS: dict[tuple[str, str], ExpertPolicy] = {}


def register_expert(env: str, kind: str) -> Callable[[ExpertPolicy], ExpertPolicy]:
    """Decorator: register `policy(prefix) -> action` as expert `kind` for environment `env`."""

    def deco(policy: ExpertPolicy) -> ExpertPolicy:
        if (env, kind) in _EXPERTS:
            raise ValueError(f"expert {kind!r} for env {env!r} is already registered")
        _EXPERTS[(env, kind)] = policy
        return policy

    return deco


def expert_kinds(env: str) -> list[str]:
    return ["oracle"] + sorted(k for e, k in _EXPERTS if e == env)


def oracle_policy(prefix: Prefix) -> str:
    if "expert_action" not in prefix.info:
        raise AgentError(
            f"env {prefix.env!r} gave no info['expert_action']: make it with expert_hints=True "
            f"(or choose an expert kind from {expert_kinds(prefix.env)})"
        )
    action = prefix.info["expert_action"]
    if action is None:
        raise AgentError(f"env {prefix.env!r} has no oracle expert for task {prefix.task_id!r}")
    return action


class ExpertAgent(Agent):
    """Acts with a scripted expert; with n > 1 it returns the same action n times (it is deterministic)."""

    def __init__(self, kind: str = "oracle"):
        self.kind = kind
        self.name = f"expert:{kind}"

    def policy_for(self, env: str) -> ExpertPolicy:
        if self.kind == "oracle":
            return oracle_policy
        try:
            return _EXPERTS[(env, self.kind)]
        except KeyError:
            raise AgentError(f"no expert {self.kind!r} for env {env!r}; available: {expert_kinds(env)}") from None

    @property
    def needs_expert_hints(self) -> bool:
        return self.kind == "oracle"

    def act(self, prefixes: Sequence[Prefix], n: int = 1) -> list[list[Candidate]]:
        out = []
        for p in prefixes:
            action = self.policy_for(p.env)(p)
            out.append([Candidate(action=action, raw_output=action) for _ in range(n)])
        return out

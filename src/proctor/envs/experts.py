"""Scripted expert policies, registered per environment (`@register_expert`), and the privileged oracle.

An expert policy is a pure function of the `Prefix` (task, history, observation, info) returning the next
action text; it keeps no hidden state, so it works unchanged in batches, after a resume, and on cloned envs.
Kinds: `oracle` reads the env's privileged hint `info["expert_action"]` (make the env with `expert_hints=True`);
any other kind (for example `search` for `household`) is a registered policy, in the env's
`proctor.registry.Registry` of `EXPERTS`.
The agent that runs them is `proctor.agents.experts.ExpertAgent`.
"""

from __future__ import annotations

from collections.abc import Callable

from proctor.prompts.turns import Prefix
from proctor.registry import Registry

ExpertPolicy = Callable[[Prefix], str]

#: each env's registered expert policies, by kind
EXPERTS: dict[str, Registry[ExpertPolicy]] = {}


class ExpertUnavailable(LookupError):
    """No expert of that kind for that env, or the env gave no hint the oracle needs."""


def register_expert(env: str, kind: str) -> Callable[[ExpertPolicy], ExpertPolicy]:
    """Decorator: register `policy(prefix) -> action` as expert `kind` for environment `env`."""
    return EXPERTS.setdefault(env, Registry(f"expert for env {env!r}")).register(kind)


def expert_kinds(env: str) -> list[str]:
    """The expert kinds available for `env` (`oracle` first)."""
    return ["oracle"] + (EXPERTS[env].names() if env in EXPERTS else [])


def all_expert_kinds() -> list[str]:
    """Every registered expert kind over all envs (`oracle` first)."""
    return ["oracle"] + sorted({kind for experts in EXPERTS.values() for kind in experts})


def oracle_policy(prefix: Prefix) -> str:
    """The env's privileged next action, `info["expert_action"]`."""
    if "expert_action" not in prefix.info:
        raise ExpertUnavailable(
            f"env {prefix.env!r} gave no info['expert_action']: make it with expert_hints=True "
            f"(or choose an expert kind from {expert_kinds(prefix.env)})"
        )
    action = prefix.info["expert_action"]
    if action is None:
        raise ExpertUnavailable(f"env {prefix.env!r} has no oracle expert for task {prefix.task_id!r}")
    return action


def expert_policy(env: str, kind: str) -> ExpertPolicy:
    """The expert policy `kind` of `env`."""
    if kind == "oracle":
        return oracle_policy
    try:
        return EXPERTS[env][kind]
    except KeyError:
        raise ExpertUnavailable(f"no expert {kind!r} for env {env!r}; available: {expert_kinds(env)}") from None

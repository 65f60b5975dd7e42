"""Agents (policies): the batched `Agent` protocol, scripted experts, model-backed agents, composites, and
the registry that builds any of them from a validated config (`make_agent`, `AgentConfig`).

Model-backed agents (`HFAgent`, `OpenAIAgent`) are imported on first use, so importing this package does
not import torch or an HTTP client."""

from typing import Any

from proctor.agents.base import Agent, AgentError, Candidate, Prefix
from proctor.agents.composite import MixtureAgent, SwitchAgent, allocate
from proctor.agents.experts import ExpertAgent
from proctor.agents.registry import AgentConfig, agent_config, agent_kinds, make_agent
from proctor.agents.simple import RandomAgent, ReplayAgent

_LAZY = {"HFAgent": "proctor.agents.hf", "OpenAIAgent": "proctor.agents.openai_agent"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'proctor.agents' has no attribute {name!r}")


__all__ = [
    "Agent",
    "AgentConfig",
    "AgentError",
    "Candidate",
    "ExpertAgent",
    "HFAgent",
    "MixtureAgent",
    "OpenAIAgent",
    "Prefix",
    "RandomAgent",
    "ReplayAgent",
    "SwitchAgent",
    "agent_config",
    "agent_kinds",
    "allocate",
    "make_agent",
]

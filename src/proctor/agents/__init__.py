"""Agents (policies): the batched `Agent` protocol, scripted experts, model-backed agents, composites."""

from proctor.agents.base import Agent, AgentError, Candidate, Prefix
from proctor.agents.composite import MixtureAgent, SwitchAgent, allocate
from proctor.agents.experts import ExpertAgent, register_expert
from proctor.agents.factory import AGENT_KINDS, make_agent
from proctor.agents.hf import HFAgent
from proctor.agents.prompting import (
    PromptConfig,
    format_action,
    parse_output,
    prefix_at,
    render_messages,
    render_prompt,
    render_training_text,
)
from proctor.agents.simple import RandomAgent, ReplayAgent

__all__ = [
    "AGENT_KINDS",
    "Agent",
    "AgentError",
    "Candidate",
    "ExpertAgent",
    "HFAgent",
    "MixtureAgent",
    "Prefix",
    "PromptConfig",
    "RandomAgent",
    "ReplayAgent",
    "SwitchAgent",
    "allocate",
    "format_action",
    "make_agent",
    "parse_output",
    "prefix_at",
    "register_expert",
    "render_messages",
    "render_prompt",
    "render_training_text",
]

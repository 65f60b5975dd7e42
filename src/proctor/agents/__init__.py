"""Agents (policies): the batched `Agent` protocol, scripted experts, model-backed agents, composites."""

from proctor.agents.base import Agent, AgentError, Candidate, Prefix
from proctor.agents.experts import ExpertAgent, register_expert

__all__ = ["Agent", "AgentError", "Candidate", "ExpertAgent", "Prefix", "register_expert"]

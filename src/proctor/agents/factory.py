"""`make_agent(kind, **kwargs)`: build an agent by kind name (what the CLI and configs use).

| kind     | class         | typical kwargs                                                    |
|----------|---------------|-------------------------------------------------------------------|
| expert   | ExpertAgent   | kind="oracle" (or a registered expert such as "search")          |
| random   | RandomAgent   | seed, fallback_actions                                            |
| replay   | ReplayAgent   | source (trajectories, a TrajectoryStore, or a store path)          |
| hf       | HFAgent       | model (or model_or_path), prompt (dict or PromptConfig), temperature, … |
| openai   | OpenAIAgent   | see proctor.agents.openai_agent                                    |
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

from proctor.agents.base import Agent

AGENT_KINDS: tuple[str, ...] = ("expert", "random", "replay", "hf", "openai")


def _agent_class(kind: str) -> Callable[..., Agent]:
    if kind == "expert":
        from proctor.agents.experts import ExpertAgent

        return ExpertAgent
    if kind == "random":
        from proctor.agents.simple import RandomAgent

        return RandomAgent
    if kind == "replay":
        from proctor.agents.simple import ReplayAgent

        return ReplayAgent
    if kind == "hf":
        from proctor.agents.hf import HFAgent

        return HFAgent
    if kind == "openai":
        from proctor.agents.openai_agent import OpenAIAgent

        return OpenAIAgent
    raise ValueError(f"unknown agent kind {kind!r}; choose one of {', '.join(AGENT_KINDS)}")


def make_agent(kind: str, /, **kwargs: Any) -> Agent:
    """Build an agent of `kind` (see module table); arguments are checked against its constructor first,
    so a wrong name gives an error that lists the accepted ones."""
    cls = _agent_class(kind)
    if kind == "hf" and "model" in kwargs:
        if "model_or_path" in kwargs:
            raise ValueError("agent 'hf': give model or model_or_path, not both")
        kwargs["model_or_path"] = kwargs.pop("model")
    if kind == "replay" and isinstance(kwargs.get("source"), (str, Path)):
        from proctor.trajectory import TrajectoryStore

        kwargs["source"] = TrajectoryStore.open(kwargs["source"])
    try:
        inspect.signature(cls).bind(**kwargs)
    except TypeError as e:
        accepted = ", ".join(p for p in inspect.signature(cls).parameters if p not in ("args", "kwargs"))
        raise ValueError(f"agent {kind!r}: {e} (accepted arguments: {accepted})") from None
    return cls(**kwargs)

"""`run_rollout`: the one-call entry used by `proctor rollout` and the quickstart (env by name, agent by kind)."""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from typing import Any

from proctor.agents.base import Agent
from proctor.envs.base import EnvSpec
from proctor.rollout.engine import rollout
from proctor.rollout.summary import RolloutSummary, summarize
from proctor.trajectory import TrajectoryStore

AGENT_KINDS = ("hf", "openai", "expert", "random")


@dataclass
class RolloutResult:
    store: TrajectoryStore
    summary: RolloutSummary
    task_ids: list[str]


def select_tasks(env_spec: EnvSpec, split: str, n_tasks: int | None) -> list[str]:
    """The first `n_tasks` task ids of `split` (all when None)."""
    env = env_spec.make()
    try:
        if split not in env.splits():
            raise ValueError(f"env {env_spec.name!r} has no split {split!r}; it has {list(env.splits())}")
        ids = list(env.task_ids(split))
    finally:
        env.close()
    if n_tasks is not None:
        if n_tasks < 1:
            raise ValueError(f"n_tasks must be >= 1, got {n_tasks}")
        ids = ids[:n_tasks]
    if not ids:
        raise ValueError(f"env {env_spec.name!r} split {split!r} has no tasks")
    return ids


def build_agent(kind: str, *, model: str | None = None, base_url: str | None = None, expert_kind: str = "oracle",
                temperature: float | None = None, prompt_format: str | None = None, seed: int = 0) -> Agent:
    """An agent by kind (via `proctor.agents.factory.make_agent`), from the `proctor rollout` options.

    `expert` uses `expert_kind`; `random` draws with `seed`; `hf` needs `model` (path or name); `openai`
    needs `model` and `base_url`. Options that the kind does not use are an error, not silently dropped.
    """
    from proctor.agents.factory import make_agent

    if kind not in AGENT_KINDS:
        raise ValueError(f"unknown agent kind {kind!r}; choose one of {', '.join(AGENT_KINDS)}")
    given = {"model": model, "base_url": base_url, "temperature": temperature, "prompt_format": prompt_format}
    usable = {"hf": ("model", "temperature", "prompt_format"),
              "openai": ("model", "base_url", "temperature", "prompt_format")}.get(kind, ())
    unused = [k for k, v in given.items() if v is not None and k not in usable]
    if unused:
        raise ValueError(f"agent {kind!r} does not use {', '.join('--' + k.replace('_', '-') for k in unused)}")
    if kind == "expert":
        return make_agent("expert", kind=expert_kind)
    if kind == "random":
        return make_agent("random", seed=seed)
    if model is None:
        raise ValueError(f"agent {kind!r} needs --model (a path or a model name)")
    if kind == "openai" and base_url is None:
        raise ValueError("agent 'openai' needs --base-url (the OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1)")
    kwargs: dict[str, Any] = {"model": model, "seed": seed}
    if base_url is not None:
        kwargs["base_url"] = base_url
    if temperature is not None:
        kwargs["temperature"] = temperature
    if prompt_format is not None:
        from proctor.agents.prompting import PromptConfig

        kwargs["prompt"] = PromptConfig(format=prompt_format)
    return make_agent(kind, **kwargs)


def run_rollout(
    env: str,
    agent: Agent | str,
    out: str | os.PathLike,
    *,
    split: str = "test",
    tasks: int | list[str] | None = None,
    samples: int = 1,
    batch: int = 8,
    seed: int = 0,
    env_kwargs: dict[str, Any] | None = None,
    env_module: str | None = None,
    workers: int = 0,
    backend: str = "local",
    step_timeout: float | None = 60.0,
    progress: bool = True,
    agent_options: dict[str, Any] | None = None,
) -> RolloutResult:
    """Roll out an agent (an `Agent`, or a kind for `build_agent` with `agent_options`) on env `env`.

    `tasks`: the first N task ids of `split`, an explicit list, or all. `env_module` is imported first,
    for environments registered outside proctor. Resumes into `out` if it already holds part of the run.
    Returns the store and the summary of exactly the requested (task, sample) pairs.
    """
    if env_module:
        importlib.import_module(env_module)
    spec = EnvSpec(env, dict(env_kwargs or {}))
    task_ids = list(tasks) if isinstance(tasks, list) else select_tasks(spec, split, tasks)
    if isinstance(agent, str):
        agent = build_agent(agent, seed=seed, **(agent_options or {}))
    store = rollout(spec, agent, task_ids, out, split=split, samples_per_task=samples, batch_size=batch,
                    seed=seed, workers=workers, backend=backend, step_timeout=step_timeout, progress=progress)
    wanted = {(t, k) for t in task_ids for k in range(samples)}
    return RolloutResult(store, summarize(t for t in store if t.key in wanted), task_ids)

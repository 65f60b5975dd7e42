"""What every on-policy trainer shares: the policy's agent config (its `model` is the policy being trained,
`OnPolicyConfig`) and the agent that samples from the current iterate.

Agents of kind `hf` (generation; no prefix cache, since the weights change between iterations) and `choice`
(admissible actions by likelihood) run on the in-memory policy, or, with `generation: {engine: vllm}`, on the
vLLM server the trainer holds for its run, which follows the iterate (`proctor.rl.served_policy.generation_server`);
any other kind with a `model` field is built on the current iterate's saved folder.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from proctor.agents.base import Agent
from proctor.agents.registry import AgentSpec, agent_config
from proctor.prompts import PromptConfig
from proctor.rl.served_policy import GenerationBackend, ServedPolicy

NOT_A_MODEL = ("agent kind {kind!r} does not sample from a model; on-policy training needs the policy's own "
               "actions (e.g. kind hf or choice)")


class OnPolicyConfig(BaseModel):
    """Base of the on-policy trainers' configs (`grpo`, online DPO, and `OnlineConfig`: ppo, the ArCHer family):
    the `agent` entry (default {kind: hf}) gets `model` = the config's `policy`, and must sample from a model;
    `fresh_tasks` moves the rollouts to new tasks each iteration. Subclasses define `policy`, `agent`, `tasks`."""

    model_config = ConfigDict(extra="forbid")

    generation: GenerationBackend = Field(default_factory=GenerationBackend, description="where the policy's samples "
                                         "are generated: in memory, or by a managed vLLM server")
    fresh_tasks: bool = Field(default=False, description="iteration k rolls out on tasks (k−1)·N … k·N−1 of the "
                              "split (N = `tasks`, wrapping round it), so each iteration sees new tasks; False: "
                              "the same N tasks every iteration")

    @model_validator(mode="before")
    @classmethod
    def _agent_on_policy(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        agent = data.get("agent", {"kind": "hf"})
        if isinstance(agent, str):
            agent = {"kind": agent}
        if isinstance(agent, dict):
            if "model" in agent and agent["model"] != data.get("policy"):
                raise ValueError("agent.model must be left out: the agent samples from `policy`")
            agent = {**agent, "model": data.get("policy")}
            try:
                agent_config(agent)
            except ValidationError as e:
                if any(err["type"] == "extra_forbidden" and err["loc"] == ("model",) for err in e.errors()):
                    raise ValueError(NOT_A_MODEL.format(kind=agent.get("kind"))) from None
        return {**data, "agent": agent}

    @field_validator("agent", check_fields=False)
    @classmethod
    def _samples_from_a_model(cls, v: AgentSpec) -> AgentSpec:
        if not hasattr(v, "model"):
            raise ValueError(NOT_A_MODEL.format(kind=v.kind))
        return v

    @model_validator(mode="after")
    def _fresh_tasks_counted(self) -> Any:
        if self.fresh_tasks and (self.tasks is None or isinstance(self.tasks, list)):
            raise ValueError("fresh_tasks needs `tasks` as a number of tasks per iteration")
        return self

    @property
    def prompt(self) -> PromptConfig:
        """The policy's prompt config (its agent's), used to render training prompts."""
        return getattr(self.agent, "prompt", None) or PromptConfig()


def make_sampler(cfg: Any, policy: torch.nn.Module, tokenizer: Any, current: str,
                 served: ServedPolicy | None = None) -> Agent:
    """The agent that samples the policy's actions (see module docstring) for a trainer config `cfg` (its
    `agent`); `current` is the current iterate's folder (the starting policy's name before the first save);
    `served`: the run's vLLM server (`generation_server`), which then serves `current` and samples."""
    agent = cfg.agent
    policy.eval()
    if served is not None:
        served.follow(current)
        return served.sampler(agent)
    if agent.kind == "hf":
        from proctor.agents.hf import HFAgent

        return HFAgent(policy, tokenizer, prompt=agent.prompt, temperature=agent.temperature, top_p=agent.top_p,
                       top_k=agent.top_k, max_new_tokens=agent.max_new_tokens, stop=agent.stop, seed=agent.seed,
                       batch_size=agent.batch_size, prefix_cache=0)
    if agent.kind == "choice":
        from proctor.agents.choice import ChoiceAgent

        return ChoiceAgent(policy, tokenizer, prompt=agent.prompt, temperature=agent.temperature, seed=agent.seed,
                           batch_size=agent.batch_size, max_new_tokens=agent.max_new_tokens)
    return agent.model_copy(update={"model": current}).build()


def sample_rollouts(cfg: Any, k: int, policy: torch.nn.Module, tokenizer: Any, current: str, out: Any,
                    wrap: Callable[[Agent], Agent] | None = None, served: ServedPolicy | None = None
                    ) -> tuple[list[Any], dict[str, Any]]:
    """Iteration k's `cfg.rollouts_per_task` rollouts per task of the current policy into `out`, run by the main
    process and broadcast to every process (`rollout_policy`); `wrap` turns the policy's sampler into the acting
    agent (CHAI: the critic's best of K samples); `served`: the run's vLLM server (`make_sampler`)."""
    from proctor.training.distributed import on_main_then_broadcast

    def run() -> tuple[list[Any], dict[str, Any]]:
        sampler = make_sampler(cfg, policy, tokenizer, current, served)
        if wrap is not None:
            sampler = wrap(sampler)
        try:
            return rollout_policy(cfg, k, sampler, current, out, cfg.rollouts_per_task)
        finally:
            sampler.close()

    return on_main_then_broadcast(run)


def rollout_policy(cfg: Any, k: int, sampler: Agent, current: str, out: Any, samples: int
                   ) -> tuple[list[Any], dict[str, Any]]:
    """Iteration k's rollouts of the current policy (`samples` per task) with the env/task fields of a trainer
    config (`TaskSelection`'s, and `seed`, `progress`, `agent`);
    returns the usable trajectories (errors and empty episodes dropped, with a warning) and the summary."""
    import logging

    from proctor.rollout.config import RolloutConfig
    from proctor.rollout.run import run_rollout

    tasks = iteration_tasks(cfg, k) if cfg.fresh_tasks else cfg.tasks
    rcfg = RolloutConfig(**cfg.env_ref(), agent=cfg.agent.model_copy(update={"model": current}), out=out,
                         split=cfg.split, tasks=tasks, samples=samples, batch=cfg.batch, seed=cfg.seed + k,
                         workers=cfg.workers, progress=cfg.progress)
    result = run_rollout(rcfg, agent=sampler)
    trajs = result.store.load()
    usable = [t for t in trajs if t.termination not in ("env_error", "agent_error") and t.steps]
    if len(usable) < len(trajs):
        logging.getLogger(__name__).warning("iteration %d: %d of %d rollouts dropped (errors or no steps)", k,
                                            len(trajs) - len(usable), len(trajs))
    if not usable:
        raise RuntimeError(f"iteration {k}: no usable rollouts")
    return usable, result.summary.to_dict()


def iteration_tasks(cfg: Any, k: int) -> list[str]:
    """With `fresh_tasks`: the task ids of iteration k (1-based), tasks (k−1)·N … k·N−1 of the split, wrapping
    round it (N = `cfg.tasks`, which must be a count)."""
    from proctor.rollout.run import select_tasks

    ids = select_tasks(cfg.env_spec(), cfg.split, None)
    return [ids[i % len(ids)] for i in range((k - 1) * cfg.tasks, k * cfg.tasks)]

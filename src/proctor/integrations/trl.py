"""proctor's environments, prompts and PRMs inside TRL's `GRPOTrainer`, through its `environment_factory`:
`EnvironmentFactory` (any proctor env as one `act` tool), `RewardConfig` (the outcome return, optionally shaped by a
PRM: `shaping_term`), `task_dataset` and `with_tool_calling`. Written against TRL 1.16 (`TRL_VERSION`); what it relies
on in TRL, the reward's shapings and which keep the optimal policy: docs/integrations.md, "TRL's GRPOTrainer".

Importing this module imports neither TRL nor torch; `with_tool_calling` imports TRL, and a PRM loads when the first
episode is scored.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any, Literal

from pydantic import ConfigDict, Field, model_validator

from proctor.credit.outcome import outcome as outcome_of
from proctor.envs.base import TextEnv
from proctor.envs.registry import EnvSpec
from proctor.episode import Episode, episode_seed
from proctor.integrations.common import (
    AdapterPRM,
    TaskOrder,
    end_reason,
    finish_episode,
    start_episode,
    step_episode,
)
from proctor.prompts.render import ADMISSIBLE_HEADER, DEFAULT_SYSTEM, PromptConfig, render_messages
from proctor.renames import moved_names
from proctor.trajectory import Trajectory

log = logging.getLogger(__name__)

#: the TRL release this adapter is written and tested against (`environment_factory` is experimental there)
TRL_VERSION = "1.16.0"

Shaping = Literal["none", "sum", "min", "last", "potential"]
SHAPINGS: tuple[str, ...] = ("none", "sum", "min", "last", "potential")
Outcome = Literal["reward", "success", "score"]

#: the system turn of `task_dataset` rows (the tool list and the call syntax follow it in the chat template)
TOOL_SYSTEM = (
    f"{DEFAULT_SYSTEM} Act by calling the `act` tool with one command at a time; its result is what happened. "
    "Stop calling it when the episode is over."
)
#: the line after the admissible commands
TOOL_LIST_INSTRUCTION = "Call act with exactly one command from the list."


class RewardConfig(AdapterPRM):
    """What `get_reward()` returns (docs/integrations.md); the PRM's fields are `AdapterPRM`'s."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    outcome: Outcome = Field("reward", description="reward: the env's step rewards; success / score: the "
                             "episode's outcome (docs/methods.md §0), given on its last step")
    shaping: Shaping = "none"
    prm_weight: float = Field(1.0, description="λ: the weight of the PRM term")
    gamma: float = Field(1.0, gt=0.0, le=1.0, description="discount of the return and of the shaping")

    @model_validator(mode="after")
    def _prm_needed(self) -> RewardConfig:
        if self.shaping != "none" and not self.prm and self.prm_server is None:
            raise ValueError(f"field 'prm': shaping {self.shaping!r} needs a PRM folder")
        if self.shaping == "none" and (self.prm or self.prm_server is not None):
            raise ValueError("field 'shaping': a PRM is given but shaping is 'none'; choose sum, min, last or "
                             "potential, or drop the PRM")
        return self


def outcome_rewards(traj: Trajectory, outcome: Outcome = "reward") -> list[float]:
    """The per-step rewards whose discounted sum is the outcome return: the env's r_t, or (0, ..., 0, R)."""
    if outcome == "reward":
        return [s.reward for s in traj.steps]
    if not traj.steps:
        return []
    return [0.0] * (len(traj.steps) - 1) + [outcome_of(traj, outcome)]


def discounted(xs: Sequence[float], gamma: float) -> float:
    """Σ_t γ^t x_t."""
    return float(sum((x * gamma ** t for t, x in enumerate(xs)), 0.0))


def shaping_term(scores: Sequence[float], shaping: Shaping, *, weight: float = 1.0, gamma: float = 1.0,
                 bootstrap: bool = False) -> float:
    """The PRM term of an episode's reward from its step scores q_0..q_{T-1} (docs/integrations.md); `bootstrap`:
    the episode was cut (not ended) after its last step, so Φ(s_T) keeps its value instead of 0."""
    if shaping == "none" or not scores:
        return 0.0
    if shaping == "sum":
        return weight * discounted(scores, gamma)
    if shaping == "min":
        return weight * min(scores)
    if shaping == "last":
        return weight * scores[-1]
    if shaping == "potential":
        phi = [0.0] + [weight * q for q in scores]
        if not bootstrap:
            phi[-1] = 0.0
        return float(sum(gamma ** t * (gamma * phi[t + 1] - phi[t]) for t in range(len(scores))))
    raise ValueError(f"unknown shaping {shaping!r}; choose one of {', '.join(SHAPINGS)}")


def episode_reward(traj: Trajectory, scores: Sequence[float] | None, cfg: RewardConfig) -> dict[str, float]:
    """`{"reward", "outcome", "shaping"}` of a finished episode given its PRM step scores (None without a PRM)."""
    base = discounted(outcome_rewards(traj, cfg.outcome), cfg.gamma)
    extra = 0.0
    if cfg.shaping != "none":
        if scores is None or len(scores) != len(traj.steps):
            raise ValueError(f"trajectory {traj.id}: shaping {cfg.shaping!r} needs one PRM score per step "
                             f"({len(traj.steps)}), got {None if scores is None else len(scores)}")
        extra = shaping_term(scores, cfg.shaping, weight=cfg.prm_weight, gamma=cfg.gamma,
                             bootstrap=traj.termination == "max_steps")
    return {"reward": base + extra, "outcome": base, "shaping": extra}


class EpisodeRewarder:
    """Scores finished episodes with `cfg`: opens the PRM once (on first use) and shares it."""

    def __init__(self, cfg: RewardConfig):
        self.cfg = cfg
        self.prm = cfg.prm_handle()

    @property
    def scorer(self) -> Any:
        return None if self.prm is None else self.prm.scorer

    def step_scores(self, traj: Trajectory) -> list[float] | None:
        """The PRM's score of every step (None without a PRM; [] for an episode without steps)."""
        if self.cfg.shaping == "none" or self.prm is None:
            return None
        return self.prm.score_trajectories([traj], self.cfg.prm_prompt)[0]

    def __call__(self, traj: Trajectory) -> tuple[dict[str, float], list[float] | None]:
        scores = self.step_scores(traj)
        return episode_reward(traj, scores, self.cfg), scores


class RewardWatch:
    """Warns once, in one log line, when every episode of a batch got the same reward (all 0, typically): GRPO's
    advantages are then all 0 and the batch teaches nothing. A batch is the episodes started together: TRL resets
    every env of a generation batch, rolls them all out, then asks each for its reward, so a batch is complete when
    as many episodes were rewarded as were started. Shared by the envs of one `EnvironmentFactory`."""

    def __init__(self) -> None:
        self.warned = False
        self._started, self._rewards = 0, []
        self._lock = threading.Lock()

    def started(self, abandoned: bool = False) -> None:
        """An episode started; `abandoned`: this env's previous episode ended without a reward."""
        with self._lock:
            self._started += 1 - int(abandoned)

    def rewarded(self, reward: float) -> None:
        with self._lock:
            self._rewards.append(reward)
            if len(self._rewards) < self._started:
                return
            rewards, self._started, self._rewards = self._rewards, 0, []
        if not self.warned and len(rewards) > 1 and len(set(rewards)) == 1:
            self.warned = True
            log.warning("all %d episodes of a batch got the same reward (%g): GRPO's advantages are all 0 and it "
                        "learns nothing from them; a PRM with shaping 'last' or 'min' ranks episodes that end alike "
                        "(docs/integrations.md: the reward and its shapings)", len(rewards), rewards[0])


class ProctorTRLEnv:
    """One rollout's environment for TRL's `GRPOTrainer`: a proctor env behind one tool, `act`.

    TRL reads the public methods of this class: `reset`, `get_reward`, and `act` (the only tool). Everything else
    is private or a property, so that it does not become a tool. After `get_reward()`, `trajectory` is the episode
    as a proctor `Trajectory` (its steps' `scores["prm"]` hold the PRM's step scores when shaping) and
    `reward_parts` its reward split into outcome and shaping."""

    def __init__(self, env: TextEnv, rewarder: EpisodeRewarder, *, tasks: Sequence[str], split: str = "train",
                 prompt: PromptConfig | None = None, show_admissible: bool = True, run_seed: int = 0,
                 on_episode: Callable[[ProctorTRLEnv], None] | None = None, watch: RewardWatch | None = None):
        self._env = env
        self._rewarder = rewarder
        self._tasks = TaskOrder(env.name, split, tasks)
        self._split = split
        self._prompt = prompt or PromptConfig(system=TOOL_SYSTEM)
        self._show_admissible = show_admissible
        self._run_seed = run_seed
        self._on_episode = on_episode
        self._watch = watch
        self._episode: Episode | None = None
        self._trajectory: Trajectory | None = None
        self._parts: dict[str, float] | None = None

    # -- what TRL calls ---------------------------------------------------------------------------------
    def reset(self, task_id: str | None = None, seed: int | None = None, **row: Any) -> str:
        """Start an episode of `task_id` (a row's `task_id`; None: the next task of the split, in order) with
        env seed `seed` (None: derived from the task); returns the first user message. Other row fields, such as
        the prompt, are ignored."""
        if task_id is None:
            task_id = self._tasks.next()
        if self._watch is not None:
            self._watch.started(abandoned=self._episode is not None and self._trajectory is None)
        self._episode = start_episode(self._env, task_id, seed, run_seed=self._run_seed)
        self._trajectory, self._parts = None, None
        messages = render_messages(self._episode.prefix(), self._prompt.model_copy(update={"show_admissible": False}))
        return messages[-1]["content"] + self._admissible_text(self._episode.info, TOOL_LIST_INSTRUCTION)

    def act(self, command: str) -> str:
        """Carry out one command in the environment and return what happened.

        Args:
            command: The command to carry out, for example one of the admissible commands listed.

        Returns:
            The environment's reply, then the admissible commands or a line saying the episode is over.
        """
        episode = self._episode
        if episode is None:
            raise RuntimeError("act() before reset(): no episode is running")
        if self._env.done:
            raise ValueError("the episode is over: reply without calling act")
        result = step_episode(self._env, episode, str(command).strip())
        if not result.done:
            return result.observation + self._admissible_text(episode.info, "")
        return (f"{result.observation}\n\n[Episode over: {end_reason(episode.info, self._env.max_steps)}. "
                "Do not call act again.]")

    def get_reward(self) -> float:
        """The episode's reward (docs/integrations.md); finishes the episode (an env still running counts as a
        failure: the model stopped calling `act`, or TRL cut the completion)."""
        if self._trajectory is None:
            if self._episode is None:
                raise RuntimeError("get_reward() before reset(): no episode to score")
            traj = finish_episode(self._env, self._episode, split=self._split, agent="trl", run_seed=self._run_seed)
            self._parts, scores = self._rewarder(traj)
            if scores is not None:
                for step, q in zip(traj.steps, scores, strict=True):
                    step.scores["prm"] = q
            traj.meta["reward"] = dict(self._parts)
            self._trajectory = traj
            if self._watch is not None:
                self._watch.rewarded(self._parts["reward"])
            if self._on_episode is not None:
                self._on_episode(self)
        assert self._parts is not None
        return self._parts["reward"]

    # -- what callers read ------------------------------------------------------------------------------
    @property
    def trajectory(self) -> Trajectory | None:
        """The last finished episode (after `get_reward()`), else None."""
        return self._trajectory

    @property
    def reward_parts(self) -> dict[str, float] | None:
        """`{"reward", "outcome", "shaping"}` of the last finished episode."""
        return None if self._parts is None else dict(self._parts)

    @property
    def env(self) -> TextEnv:
        return self._env

    def _admissible_text(self, info: dict[str, Any], instruction: str) -> str:
        admissible = info.get("admissible_actions")
        if not (self._show_admissible and admissible):
            return ""
        listed = "\n".join(f"- {a}" for a in admissible)
        return f"\n\n{ADMISSIBLE_HEADER}\n{listed}" + (f"\n\n{instruction}" if instruction else "")


class EnvironmentFactory:
    """The `environment_factory` to give `GRPOTrainer`: each call makes a `ProctorTRLEnv` around a new instance of
    proctor env `env` (built with `env_kwargs`); all of them share one `EpisodeRewarder` (one PRM in memory) and
    one `RewardWatch` (a warning when a whole batch got one reward)."""

    def __init__(self, env: str, env_kwargs: dict[str, Any] | None = None, *, split: str = "train",
                 reward: RewardConfig | dict[str, Any] | None = None, prompt: PromptConfig | None = None,
                 show_admissible: bool = True, run_seed: int = 0,
                 on_episode: Callable[[ProctorTRLEnv], None] | None = None):
        self.spec = EnvSpec(env, dict(env_kwargs or {}))
        self.split = split
        self.reward = reward if isinstance(reward, RewardConfig) else RewardConfig.model_validate(reward or {})
        self.prompt = prompt or PromptConfig(system=TOOL_SYSTEM)
        self.show_admissible = show_admissible
        self.run_seed = run_seed
        self.on_episode = on_episode
        self.rewarder = EpisodeRewarder(self.reward)
        self.watch = RewardWatch()
        probe = self.spec.make()
        try:
            if split not in probe.splits():
                raise ValueError(f"{env}: unknown split {split!r}; it has {', '.join(probe.splits())}")
            self.tasks = probe.task_ids(split)
        finally:
            probe.close()
        self.instances: list[ProctorTRLEnv] = []

    def __call__(self) -> ProctorTRLEnv:
        wrapped = ProctorTRLEnv(self.spec.make(), self.rewarder, tasks=self.tasks, split=self.split,
                                prompt=self.prompt, show_admissible=self.show_admissible, run_seed=self.run_seed,
                                on_episode=self.on_episode, watch=self.watch)
        self.instances.append(wrapped)
        return wrapped

    @property
    def system_prompt(self) -> str:
        return self.prompt.system_prompt()

    def dataset(self, num_tasks: int | None = None, *, tasks: Sequence[str] | None = None) -> Any:
        """`task_dataset` of this factory's split and prompt."""
        return task_dataset(tasks if tasks is not None else self.tasks[:num_tasks], self.system_prompt,
                            run_seed=self.run_seed)

    def close(self) -> None:
        """Close every env this factory made (envs that run a process or a server hold one)."""
        for wrapped in self.instances:
            wrapped.env.close()


def task_dataset(tasks: Sequence[str], system_prompt: str | None = TOOL_SYSTEM, *, run_seed: int = 0) -> Any:
    """A `datasets.Dataset` with one row per task: `prompt` (the system turn, if any, and an empty user turn that
    `reset` fills), `task_id`, and `seed` (`proctor.episode.episode_seed(run_seed, task_id, 0)`)."""
    from datasets import Dataset

    head = [{"role": "system", "content": system_prompt}] if system_prompt else []
    prompt = head + [{"role": "user", "content": ""}]
    tasks = list(tasks)
    return Dataset.from_dict({"prompt": [prompt] * len(tasks), "task_id": tasks,
                              "seed": [episode_seed(run_seed, t, 0) for t in tasks]})


def with_tool_calling(tokenizer: Any) -> Any:
    """Make `tokenizer` usable by `GRPOTrainer` with tools (in place; returns it): a ChatML tokenizer whose template
    fails TRL's tool-calling check gets proctor's (`chat_templates.enable_tool_calling`); a template that passes is
    left as it is. Another family that fails is an error: give it a template that renders tool calls."""
    from trl.chat_template_utils import supports_tool_calling

    from proctor.integrations.chat_templates import enable_tool_calling, is_chatml

    if supports_tool_calling(tokenizer):
        return tokenizer
    if is_chatml(tokenizer):
        return enable_tool_calling(tokenizer)
    raise ValueError(f"the chat template of {getattr(tokenizer, 'name_or_path', '')!r} does not render tool calls "
                     "(trl.chat_template_utils.supports_tool_calling) and is not ChatML; give it one that does")


#: `with_tool_calling` was `prepare_tokenizer` (also the name of `proctor.models.loading`'s pad-token set-up)
__getattr__ = moved_names(__name__, {"prepare_tokenizer": "with_tool_calling"})

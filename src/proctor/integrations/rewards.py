"""A proctor PRM as a reward function for TRL's trainers: `prm_reward_func(prm)`, for `GRPOTrainer(reward_funcs=...)`.

TRL 1.16's calling convention, read from `GRPOTrainer._calculate_rewards` (`trl/trainer/grpo_trainer.py`): a custom
reward function is called as `func(prompts=..., completions=..., completion_ids=..., **kwargs)` with one entry per
completion, where `kwargs` are the dataset's other columns (repeated per generation), the fields a `rollout_func`
returned beyond the ids and logprobs, `trainer_state`, `log_extra`, `log_metric`, and, with an
`environment_factory`, `environments` (one instance per completion). It returns one float per completion; None
means "not applicable to this sample" (TRL makes it NaN and leaves it out). Prompts and completions are strings
(standard format) or message lists (conversational: the prompt's messages, and the completion's assistant turn(s)).
TRL names the function in its logs by `__name__` (here `prm_reward`, or `name`).

What is scored, per completion:

- **env trajectories**, when the call carries them: `kwargs[trajectories_key]` (default `trajectories`: one
  proctor `Trajectory`, its dict or its JSON per completion, e.g. returned by a `rollout_func`), or else the
  `environments` TRL passes when they hold a proctor trajectory (`proctor.integrations.trl.ProctorTRLEnv`, whose
  episode is finished through its `get_reward()` if TRL has not called it yet; it caches its result). The PRM scores
  every step with `score_trajectories`, as the rollout engine's trajectories are scored; a row without a
  trajectory gets None.
- **stepwise text** otherwise: the completion's text (conversational: its assistant turns' contents, one per line)
  split into steps by `splitter` (a separator string, default a newline, blank steps dropped; or a function
  text -> steps); the problem is the prompt (conversational: its last user turn's content; or `problem(prompt)`).
  The PRM scores them as `proctor prm score` scores a stepwise file, through the one text path
  (`proctor.prm.text_scorer.StepwiseScorer`): its text interface, `score_examples` on `StepwiseExample(problem,
  steps)` (`PRMScorer` and `RemotePRMScorer`, a PRM head local or served, and `TextStepScorer` for a PRM trained on
  text), or for a likelihood PRM the steps as the actions of a `stepwise` episode, as `proctor.envs.stepwise_text`
  records reasoning. A completion without a step gets `empty` (0.0 by default).

The reward is the step scores' `aggregate` (`proctor.search.aggregate`, the one step-score aggregation): `min` (a
chain is as good as its worst step, the usual PRM reading), `last`, `mean` or `prod`. `log_metric("prm/steps", ...)`
logs the mean step count of the batch.

Any proctor PRM: a folder (`proctor.prm.ref.PRMRef`, opened on the first call and kept), a served one (`server`: a
`proctor.agents.registry.ServerRef`, the ref's `prm_server`), or a scorer object.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from statistics import fmean
from typing import Any

from proctor.integrations.common import PRMHandle
from proctor.prm.ref import PRMRef
from proctor.prompts.render import PromptConfig
from proctor.search.aggregate import STEP_AGGREGATIONS, StepAggregation, aggregate
from proctor.trajectory import Trajectory


def split_steps(text: str, separator: str = "\n") -> list[str]:
    """`text` cut at `separator`, each piece stripped, blank pieces dropped."""
    return [s.strip() for s in text.split(separator) if s.strip()]


class PRMReward:
    """The reward function `prm_reward_func` returns (module docstring)."""

    def __init__(self, prm: str | Path | Any, *, server: Any = None, aggregate: StepAggregation = "min",
                 splitter: str | Callable[[str], list[str]] = "\n", problem: Callable[[Any], str] | None = None,
                 trajectories_key: str = "trajectories", prompt: PromptConfig | None = None,
                 empty: float | None = 0.0, batch_size: int = 16, device: str = "auto", dtype: str = "auto",
                 name: str = "prm_reward"):
        if aggregate not in STEP_AGGREGATIONS:
            raise ValueError(f"unknown aggregate {aggregate!r}; choose one of {', '.join(STEP_AGGREGATIONS)}")
        if isinstance(splitter, str) and not splitter:
            raise ValueError("splitter: an empty separator; give a string such as '\\n' or a function")
        self.prm = PRMHandle(PRMRef(prm=prm, prm_server=server, prm_batch=batch_size, device=device, dtype=dtype)
                             if isinstance(prm, str | Path) else prm)
        self.aggregate, self.splitter, self.problem = aggregate, splitter, problem
        self.trajectories_key, self.prompt, self.empty = trajectories_key, prompt, empty
        self.__name__ = name

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        trajs = self.trajectories(kwargs, len(completions))
        if trajs is not None:
            scored = [t for t in trajs if t is not None]
            by_traj = iter(self.prm.score_trajectories(scored, self.prompt))
            scores: list[list[float] | None] = [None if t is None else next(by_traj) for t in trajs]
        else:
            steps = [self.steps(c) for c in completions]
            problems = [self.problem_text(p) for p in prompts]
            scores = self.score_text(problems, steps)
        log_metric = kwargs.get("log_metric")
        if callable(log_metric) and scores:
            log_metric("prm/steps", fmean(len(s or []) for s in scores))
        return [None if s is None else aggregate(s, self.aggregate) if s else self.empty for s in scores]

    # -- the two inputs ---------------------------------------------------------------------------------
    def trajectories(self, kwargs: dict[str, Any], n: int) -> list[Trajectory | None] | None:
        """One proctor trajectory (or None) per completion, from the call's kwargs; None when it has none."""
        given = kwargs.get(self.trajectories_key)
        if given is None:
            envs = kwargs.get("environments")
            if not envs or not any(hasattr(e, "trajectory") for e in envs):
                return None
            given = [_env_trajectory(e) for e in envs]
        if len(given) != n:
            raise ValueError(f"{self.trajectories_key}: {len(given)} trajectories for {n} completions")
        return [_as_trajectory(t) for t in given]

    def steps(self, completion: Any) -> list[str]:
        """The completion's steps: its text (assistant turns, one per line) cut by the splitter."""
        if isinstance(completion, str):
            text = completion
        else:
            text = "\n".join(str(m.get("content") or "") for m in completion if m.get("role") == "assistant")
        if callable(self.splitter):
            return [s for s in (str(x).strip() for x in self.splitter(text)) if s]
        return split_steps(text, self.splitter)

    def problem_text(self, prompt: Any) -> str:
        """The problem a completion solves: `problem(prompt)`, the prompt text, or its last user turn."""
        if self.problem is not None:
            return self.problem(prompt)
        if isinstance(prompt, str):
            return prompt
        users = [m for m in prompt if m.get("role") == "user"]
        return str(users[-1].get("content") or "") if users else ""

    def score_text(self, problems: Sequence[str], steps: Sequence[list[str]]) -> list[list[float]]:
        """The PRM's score of every step (module docstring); [] for a completion without a step."""
        from proctor.prm.text_scorer import text_example

        rows = [i for i, s in enumerate(steps) if s]
        out: list[list[float]] = [[] for _ in steps]
        scored = self.prm.score_text([text_example(problems[i], steps[i]) for i in rows]) if rows else []
        for i, q in zip(rows, scored, strict=True):
            out[i] = q
        return out


def prm_reward_func(prm: str | Path | Any, *, server: Any = None, aggregate: StepAggregation = "min",
                    splitter: str | Callable[[str], list[str]] = "\n", **options: Any) -> PRMReward:
    """A proctor PRM (a folder, a served PRM through `server`, or a scorer) as a TRL reward function,
    `(prompts, completions, **kwargs) -> list[float | None]` (module docstring); `options`: `problem`,
    `trajectories_key`, `prompt`, `empty`, `batch_size`, `device`, `dtype`, `name`.

        trainer = GRPOTrainer(model=..., reward_funcs=[accuracy, prm_reward_func("runs/prm", aggregate="min")], ...)
    """
    return PRMReward(prm, server=server, aggregate=aggregate, splitter=splitter, **options)


def _as_trajectory(t: Any) -> Trajectory | None:
    if t is None or isinstance(t, Trajectory):
        return t
    if isinstance(t, str | bytes):
        return Trajectory.model_validate_json(t)
    return Trajectory.model_validate(t)


def _env_trajectory(env: Any) -> Trajectory | None:
    traj = getattr(env, "trajectory", None)
    if traj is None and callable(getattr(env, "get_reward", None)) and hasattr(env, "trajectory"):
        env.get_reward()  # a ProctorTRLEnv finishes (and caches) its episode there
        traj = env.trajectory
    return traj


"""A PRM trained on plain stepwise text, used on env states: `TextStepScorer`.

A PRM trained on files of problems and their steps (`stepwise`, `math_shepherd`, `prm800k`, `processbench`;
its `prm_config.json` says `trained_on: text`) has never seen the prompt renderer's agent states. To search with
it (per-step best-of-N, beam search, DVTS over the `stepwise` env or any env whose actions are reasoning steps),
a state is read as it was trained: the task text as the problem, the actions so far as its steps, and each
candidate action as the next step; the candidate's score is the PRM's score at that last step. This is
PRM-guided tree decoding over reasoning steps (sdiehl/prm), with the PRM's own label polarity (1 = a good step)
and every candidate of every state in one batched call (`PRMScorer.score_examples`).

The other way round, stepwise text scored by any PRM: `StepwiseScorer(scorer)` is the one path every caller of
text takes (`proctor prm score` and `prm eval --processbench` on files, `prm_reward_func` on completions). A scorer
with a text interface (`score_examples`: a PRM head, local or served, or one trained on text) scores the examples
as it is; a scorer of agent trajectories only (a likelihood PRM) reads each one as the `stepwise` env records it
(`stepwise_episode`: the problem as the task, the steps as its actions, no feedback between them).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from proctor.envs.stepwise_text import first_observation
from proctor.prm.data import StepwiseExample
from proctor.prm.scoring import PRMScorer
from proctor.prompts.render import PromptConfig
from proctor.prompts.turns import Prefix
from proctor.trajectory import Step, Trajectory


def text_example(task: str, steps: Sequence[str]) -> StepwiseExample:
    """The stepwise-text example of a problem and its steps (unlabelled)."""
    return StepwiseExample(prompt=task, completions=list(steps), labels=[None] * len(steps))


class TextStepScorer:
    """The scorer interface of `PRMScorer` for a PRM trained on stepwise text (module docstring)."""

    def __init__(self, scorer: PRMScorer):
        self.scorer = scorer
        self.prm, self.score_at, self.batch_size = scorer.prm, scorer.score_at, scorer.batch_size

    def score_examples(self, examples: Sequence[StepwiseExample]) -> list[list[float]]:
        """Stepwise-text examples, as the PRM was trained on them (`PRMScorer.score_examples`)."""
        return self.scorer.score_examples(examples)

    def score_action_groups(self, prefixes: Sequence[Prefix], actions: Sequence[Sequence[str]],
                            cfg: PromptConfig | None = None, states_per_pass: int | None = None
                            ) -> list[list[float]]:
        """Q(s, a) of every candidate action at every state: the PRM's score of a as the next step."""
        if len(prefixes) != len(actions):
            raise ValueError(f"{len(prefixes)} states but {len(actions)} action lists")
        examples = [text_example(p.task, [*(h.action for h in p.history), a]) for p, acts in zip(prefixes, actions,
                                                                                                 strict=True)
                    for a in acts]
        flat = [s[-1] for s in self.scorer.score_examples(examples)] if examples else []
        out, k = [], 0
        for acts in actions:
            out.append(flat[k:k + len(acts)])
            k += len(acts)
        return out

    def score_actions(self, prefix: Prefix, actions: Sequence[str], cfg: PromptConfig | None = None,
                      chunk_size: int | None = None) -> list[float]:
        return self.score_action_groups([prefix], [actions], cfg)[0]

    def score_trajectories(self, trajs: Sequence[Any], cfg: PromptConfig | None = None) -> list[list[float]]:
        """Per-step scores of stored trajectories, each read as its task and its steps."""
        return self.scorer.score_examples([text_example(t.task, [s.action for s in t.steps]) for t in trajs])


def stepwise_episode(problem: str, steps: Sequence[str], index: int = 0) -> Trajectory:
    """A problem and its reasoning steps as the `stepwise` env records them (`proctor.envs.stepwise_text`): the
    problem as the task, the env's first observation, each step an action followed by an empty observation."""
    return Trajectory(id=f"text-{index}", env="stepwise", task_id=f"stepwise/{index}", sample=0, task=problem,
                      split="test", seed=0, agent="text", success=False, score=0.0, termination="failure",
                      steps=[Step(observation=first_observation(problem) if i == 0 else "", action=s)
                             for i, s in enumerate(steps)])


class StepwiseScorer:
    """Stepwise-text examples scored by any PRM scorer (module docstring): through its `score_examples` when it has
    one, else each example as a `stepwise` episode (`stepwise_episode`) through `score_trajectories`."""

    def __init__(self, scorer: Any):
        self.scorer = scorer

    def score_examples(self, examples: Sequence[StepwiseExample]) -> list[list[float]]:
        if hasattr(self.scorer, "score_examples"):
            scored = self.scorer.score_examples(examples)
        else:
            scored = self.scorer.score_trajectories([stepwise_episode(ex.prompt, ex.completions, i)
                                                     for i, ex in enumerate(examples)])
        return [[float(q) for q in s] for s in scored]

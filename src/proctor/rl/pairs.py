"""The scores online DPO pairs candidates by (AgentPRM stage 3), and the token ids a candidate action trains on.

- `adjusted_scores`: the PRM's scores of one state's N candidate actions, `unfinished_penalty` subtracted from
  those whose generation did not finish. The pairs are `proctor.credit.preference.margin_pairs` of them (the one
  rule, also AgentPRM's Monte-Carlo pairs'): `best-worst`, chosen = the best, rejected = the worst, none when
  they differ by no more than `margin` (a tie); or `best-rest`, the best against every other candidate it beats
  by more than `margin`, each pair with DPO's pairwise loss (every sampled action the PRM ranks below the best
  is pushed down, not only the worst; a pairwise surrogate of DPO's Plackett-Luce form with only the top
  response ranked, arXiv 2305.18290 §A.3).
- `candidate_tokens`: `(prompt_ids, completion_ids, exact)`. The prompt is the one renderer's inference
  prompt (`render_prompt`, tokenized without special tokens, as the agents do). The completion is the
  candidate's own generated `token_ids` when it carries them (`exact=True`: the ids the policy sampled,
  never a re-tokenization of its text); otherwise the assistant reply that `render_training_text` gives the
  action (format_action + the template's end of turn), tokenized.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from proctor.prompts import Candidate, Prefix, PromptConfig, render_prompt, render_training_text
from proctor.trajectory import Step, Trajectory


def adjusted_scores(scores: Sequence[float], finished: Sequence[bool] | None = None,
                    unfinished_penalty: float = 0.0) -> list[float]:
    """The scores with `unfinished_penalty` subtracted from those of unfinished generations."""
    finished = [True] * len(scores) if finished is None else list(finished)
    if len(finished) != len(scores):
        raise ValueError(f"{len(scores)} scores but {len(finished)} finished flags")
    return [s - (0.0 if f else unfinished_penalty) for s, f in zip(scores, finished, strict=True)]


def _with_action(prefix: Prefix, cand: Candidate) -> Trajectory:
    """The prefix's history plus one step taking `cand` (what `render_training_text` reads)."""
    step = Step(observation=prefix.observation, action=cand.action, reason=cand.reason, info=dict(prefix.info))
    return Trajectory(id="candidate", env=prefix.env, task_id=prefix.task_id, sample=prefix.sample,
                      task=prefix.task, split="", seed=prefix.seed, agent="", steps=[*prefix.history, step],
                      success=False, score=0.0, termination="failure")


def prompt_ids(tokenizer: Any, prefix: Prefix, cfg: PromptConfig | None = None) -> list[int]:
    """The inference prompt's token ids (as `HFAgent` tokenizes it)."""
    return tokenizer(render_prompt(tokenizer, prefix, cfg), add_special_tokens=False)["input_ids"]


def reply_ids(tokenizer: Any, prefix: Prefix, cand: Candidate, cfg: PromptConfig | None = None) -> list[int]:
    """The token ids of the assistant reply the one renderer writes for `cand` at `prefix`."""
    _, completion = render_training_text(tokenizer, _with_action(prefix, cand), len(prefix.history), cfg)
    return tokenizer(completion, add_special_tokens=False)["input_ids"]


def candidate_tokens(tokenizer: Any, prefix: Prefix, cand: Candidate, cfg: PromptConfig | None = None,
                     prompt: list[int] | None = None) -> tuple[list[int], list[int], bool]:
    """(prompt ids, completion ids, exact) for training on `cand` at `prefix` (see module docstring).
    `prompt`: the prompt ids when already computed for this prefix."""
    ids = prompt if prompt is not None else prompt_ids(tokenizer, prefix, cfg)
    expected = cand.meta.get("prompt_tokens")
    if cand.token_ids:
        if expected is not None and expected != len(ids):
            raise ValueError(f"task {prefix.task_id} step {prefix.step_index}: the candidate was generated from "
                             f"a {expected}-token prompt but the training prompt has {len(ids)} tokens; the "
                             "agent's prompt config must be the one training uses")
        return ids, list(cand.token_ids), True
    return ids, reply_ids(tokenizer, prefix, cand, cfg), False


@dataclass
class CandidatePair:
    """One training pair: the shared prompt and the two completions, with where they came from."""

    prompt_ids: list[int]
    chosen_ids: list[int]
    rejected_ids: list[int]
    exact: tuple[bool, bool]
    chosen: str
    rejected: str
    scores: tuple[float, float]  # the PRM's, after the unfinished penalty: (chosen, rejected)
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def tokens(self) -> int:
        """Tokens of the two sequences (prompt + chosen, prompt + rejected)."""
        return 2 * len(self.prompt_ids) + len(self.chosen_ids) + len(self.rejected_ids)

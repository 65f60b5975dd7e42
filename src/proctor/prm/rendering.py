"""Agent trajectories as PRM examples, rendered with the shared prompt renderer, and PRM scores written back.

- `from_trajectories`: trajectories whose `Step.targets` were filled by `proctor targets` as training examples.
- `render_trajectory`: one trajectory as a `StepwiseExample` (`proctor.prompts.render`: the trajectory as chat
  messages, each assistant action followed by the step marker, through the tokenizer's chat template).
- `render_states`: a trajectory with the step marker at the end of each state (after the observation and the
  assistant prompt, before the action), so a scalar head read there is a value model V(s_t).
- `render_candidates`: a state's shared text and, per candidate action, its suffix (shared-prefix best-of-N).
- `PRM_PROMPT` / `prm_prompt`: how a PRM sees a trajectory (the whole history in one pass).
- `with_step_scores`: trajectories with `Step.scores[name]` filled (`proctor prm score --write-back`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from proctor.prm.data import DataError, StepwiseExample
from proctor.prompts.render import PromptConfig, format_action, prefix_at, render_messages, render_prompt
from proctor.prompts.turns import Prefix
from proctor.trajectory import Trajectory


def with_step_scores(trajs: Sequence[Trajectory], scores: Sequence[Sequence[float]], name: str
                     ) -> list[Trajectory]:
    """New trajectories with `Step.scores[name]` = each step's score (`targets --write-back`'s counterpart)."""
    out = []
    for traj, row in zip(trajs, scores, strict=True):
        if len(row) != len(traj.steps):
            raise DataError(f"trajectory {traj.id}: {len(traj.steps)} steps but {len(row)} scores")
        steps = [s.model_copy(update={"scores": {**s.scores, name: float(v)}}) for s, v in zip(traj.steps, row,
                                                                                             strict=True)]
        out.append(traj.model_copy(update={"steps": steps}))
    return out


def _marked_chat(
    tokenizer: Any, prefix: Prefix, cfg: PromptConfig, marker: str, generation_prompt: bool
) -> str:
    messages = render_messages(prefix, cfg)
    for m in messages:
        if m["role"] == "assistant":
            m["content"] += marker
    if not getattr(tokenizer, "chat_template", None):
        raise DataError(f"tokenizer {getattr(tokenizer, 'name_or_path', '')!r} has no chat template")
    return tokenizer.apply_chat_template(messages, add_generation_prompt=generation_prompt, tokenize=False)


#: how a PRM sees a trajectory: the whole history, and no admissible-action lists (the renderer shows them
#: only in the current turn, so with them a prefix's text would not be a prefix of the trajectory's text)
PRM_PROMPT = PromptConfig(history=None, show_admissible=False)


def prm_prompt(cfg: PromptConfig | None) -> PromptConfig:
    """`cfg` (None: `PRM_PROMPT`), refused unless it shows the whole trajectory in one pass."""
    cfg = cfg or PRM_PROMPT
    if cfg.history is not None:
        raise DataError("a PRM reads the whole trajectory in one pass: use a PromptConfig with history=None")
    if cfg.show_admissible:
        raise DataError("a PRM reads the whole trajectory in one pass: use a PromptConfig with "
                        "show_admissible=False (admissible actions are shown only in the current turn)")
    return cfg


def render_trajectory(
    tokenizer: Any,
    traj: Trajectory,
    labels: Sequence[float | None],
    cfg: PromptConfig | None = None,
    marker: str = "<|step|>",
) -> StepwiseExample:
    """A trajectory as one stepwise example: the chat text up to the first action is the prompt, and step
    k is the text from the end of step k−1's marker through action k (the observations in between
    included), so `prompt + Σ (step + marker)` is the chat-template text of the whole trajectory."""
    cfg = prm_prompt(cfg)
    if not traj.steps:
        raise DataError(f"trajectory {traj.id}: has no steps")
    if len(labels) != len(traj.steps):
        raise DataError(f"trajectory {traj.id}: {len(traj.steps)} steps but {len(labels)} labels")
    last = len(traj.steps) - 1
    full = _marked_chat(tokenizer, prefix_at(traj, last), cfg, marker, generation_prompt=True)
    full += format_action(traj.steps[last], None, cfg) + marker
    pieces = full.split(marker)
    if len(pieces) != len(traj.steps) + 1:
        raise DataError(f"trajectory {traj.id}: the step marker {marker!r} occurs inside its text")
    prompt = _marked_chat(tokenizer, prefix_at(traj, 0), cfg, marker, generation_prompt=True)
    if not pieces[0].startswith(prompt):
        raise DataError("the chat template does not render the first prompt as a prefix of the trajectory")
    completions = [pieces[0][len(prompt) :], *pieces[1:-1]]
    return StepwiseExample(
        prompt=prompt,
        completions=completions,
        labels=list(labels),
        id=traj.id,
        outcome=traj.score,
        meta={"env": traj.env, "task_id": traj.task_id},
    )


def render_candidates(
    tokenizer: Any,
    prefix: Prefix,
    actions: Sequence[str],
    cfg: PromptConfig | None = None,
    marker: str = "<|step|>",
) -> tuple[str, list[str]]:
    """The shared text of a state (history with its markers, ending with the assistant prompt) and, per
    candidate action, the suffix `formatted action + marker`: prefix + suffix is exactly the text
    `render_trajectory` gives a trajectory that took that action."""
    cfg = prm_prompt(cfg)
    shared = _marked_chat(tokenizer, prefix, cfg, marker, generation_prompt=True)
    return shared, [format_action(a, None, cfg) + marker for a in actions]


def from_trajectories(
    tokenizer: Any,
    trajs: Iterable[Trajectory],
    target: str,
    cfg: PromptConfig | None = None,
    marker: str = "<|step|>",
    allow_missing: bool = False,
) -> list[StepwiseExample]:
    """Training examples from trajectories whose steps hold `Step.targets[target]` (from `proctor targets`).
    A step without that target is an error unless `allow_missing` (then it is scored, not supervised)."""
    out = []
    for traj in trajs:
        labels: list[float | None] = []
        for t, step in enumerate(traj.steps):
            if target not in step.targets and not allow_missing:
                raise DataError(
                    f"trajectory {traj.id} step {t}: no target {target!r} "
                    f"(has {sorted(step.targets)}); run `proctor targets` first"
                )
            labels.append(step.targets.get(target))
        out.append(render_trajectory(tokenizer, traj, labels, cfg, marker))
    return out


def render_states(
    tokenizer: Any,
    traj: Trajectory,
    labels: Sequence[float | None],
    cfg: PromptConfig | None = None,
    marker: str = "<|step|>",
) -> StepwiseExample:
    """A trajectory with the marker after each state s_t (its inference prompt, ending with the assistant
    generation prompt): step t is the text that state t adds to state t−1, so `Σ (step + marker)` is the
    chat text of the whole trajectory (without its last action) with a marker at every decision point."""
    cfg = prm_prompt(cfg)
    if len(labels) != len(traj.steps) or not traj.steps:
        raise DataError(f"trajectory {traj.id}: {len(traj.steps)} steps but {len(labels)} labels")
    texts = [render_prompt(tokenizer, prefix_at(traj, t), cfg) for t in range(len(traj.steps))]
    pieces = []
    for t, text in enumerate(texts):
        before = texts[t - 1] if t else ""
        if not text.startswith(before):
            raise DataError(f"trajectory {traj.id}: the chat text of state {t} does not extend state {t - 1}")
        if marker in text:
            raise DataError(f"trajectory {traj.id}: the step marker {marker!r} occurs inside its text")
        pieces.append(text[len(before) :])
    return StepwiseExample(
        prompt="",
        completions=pieces,
        labels=list(labels),
        id=traj.id,
        outcome=traj.score,
        meta={"env": traj.env, "task_id": traj.task_id, "score_at": "state"},
    )

"""The one prompt renderer: trajectory prefix → chat messages → model text, for SFT, PRM training, RL and
inference alike, so training and inference never disagree on the template.

A prefix at step t renders as (with `history=k`, only the last k steps are shown; the task line is then
followed by "[n earlier steps omitted]", or with `memory=True` by a compact memory of them, "Earlier actions:
a_0; a_1; ...", so a short window still knows what was done, e.g. which places were already searched):

    system     instruction (mentions the output format)
    user       "Task: <task>\n\n<observation of the first shown step>"
    assistant  <that step's action, written in the output format>
    user       <next observation>
    ...
    user       <current observation>  (+ the admissible actions when the env gives them, as a list under
               `ADMISSIBLE_HEADER` and the format's "reply with exactly one action from the list" line)

Past assistant turns are re-written from `Step.action`/`Step.reason` with `format_action`, so a step's
prompt depends only on stored fields: `render_training_text(tok, traj, t)` reproduces exactly the prompt
the agent saw at step t, provided `Step.info["admissible_actions"]` holds the list the agent was shown.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from proctor.prompts.formats import (
    FORMAT_INSTRUCTIONS,
    LIST_INSTRUCTIONS,
    OutputFormat,
    read_output,
    write_output,
)
from proctor.prompts.turns import Candidate, Prefix
from proctor.trajectory import Step, Trajectory

#: the `Step.info` keys that describe the state before the action (what `prefix_at` puts in `Prefix.info`)
PREFIX_INFO_KEYS: tuple[str, ...] = ("admissible_actions", "expert_action")

#: introduces the admissible list. Worded as a request: SmolLM2-135M-Instruct echoes the observation under an
#: "Admissible actions:" heading, but picks from the list under this one (README: real models)
ADMISSIBLE_HEADER = "Choose the next action from this list of admissible actions:"

DEFAULT_SYSTEM = (
    "You are an agent acting in a text environment. Each turn you see the result of your last action; "
    "choose the next action that best progresses toward completing the task."
)


class PromptConfig(BaseModel):
    """How prefixes are rendered and outputs parsed."""

    model_config = ConfigDict(extra="forbid")

    format: OutputFormat = Field(default="plain", description="how the model writes its action: plain (the "
                                 "action on one line), reason_action (REASON: / ACTION:), thought_action "
                                 "(Thought: / Action:) or xml (`<think>…</think><action>…</action>`)")
    history: int | None = Field(default=None, ge=0, description="None: full history; k: the last k steps")
    system: str | None = Field(default=None, description="None: the default instruction; '': no system turn")
    show_admissible: bool = Field(default=True, description="list the env's admissible actions after the "
                                  "observation, with an instruction to pick exactly one; false: the observation "
                                  "alone")
    memory: bool = Field(default=False, description="with a history window: list the hidden earlier steps' "
                         "actions ('Earlier actions: a; b; ...') instead of only their number")

    def system_prompt(self) -> str:
        if self.system is not None:
            return self.system
        return f"{DEFAULT_SYSTEM} {FORMAT_INSTRUCTIONS[self.format]}"


def format_action(
    step_or_action: Step | Candidate | str, reason: str | None = None, cfg: PromptConfig | None = None
) -> str:
    """What the assistant wrote for an action: `step.action`/`step.reason` (or the given action and reason)
    in the configured output format."""
    cfg = cfg or PromptConfig()
    if isinstance(step_or_action, (Step, Candidate)):
        action = step_or_action.action
        reason = reason if reason is not None else step_or_action.reason
    else:
        action = step_or_action
    return write_output(action, reason, cfg.format)


def parse_output(text: str, cfg: PromptConfig | None = None) -> Candidate:
    """Model output → `Candidate` (unparseable → `parsed=False`, best-effort action; never raises)."""
    return read_output(text, (cfg or PromptConfig()).format)


def _current_turn(prefix: Prefix, cfg: PromptConfig) -> str:
    text = prefix.observation
    admissible = prefix.admissible_actions
    if cfg.show_admissible and admissible:
        listed = "\n".join(f"- {a}" for a in admissible)
        text += f"\n\n{ADMISSIBLE_HEADER}\n{listed}\n\n{LIST_INSTRUCTIONS[cfg.format]}"
    return text


def render_messages(prefix: Prefix, cfg: PromptConfig | None = None) -> list[dict[str, str]]:
    """The chat messages for `prefix` (see module docstring)."""
    cfg = cfg or PromptConfig()
    steps = prefix.history
    first = 0 if cfg.history is None else max(0, len(steps) - cfg.history)
    shown = steps[first:]
    observations = [s.observation for s in shown] + [_current_turn(prefix, cfg)]

    messages: list[dict[str, str]] = []
    system = cfg.system_prompt()
    if system:
        messages.append({"role": "system", "content": system})
    header = f"Task: {prefix.task}\n\n"
    if first > 0 and cfg.memory:
        header += "Earlier actions: " + "; ".join(s.action for s in steps[:first]) + "\n\n"
    elif first > 0:
        header += f"[{first} earlier step{'s' if first > 1 else ''} omitted]\n\n"
    messages.append({"role": "user", "content": header + observations[0]})
    for step, next_obs in zip(shown, observations[1:], strict=True):
        messages.append({"role": "assistant", "content": format_action(step, None, cfg)})
        messages.append({"role": "user", "content": next_obs})
    return messages


def _chat_template(tokenizer: Any, messages: list[dict[str, str]], add_generation_prompt: bool) -> str:
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError(
            f"tokenizer {getattr(tokenizer, 'name_or_path', '')!r} has no chat template; use an instruct "
            "model, a model made by proctor.models.build_tiny, or set tokenizer.chat_template"
        )
    return tokenizer.apply_chat_template(messages, add_generation_prompt=add_generation_prompt, tokenize=False)


def render_prompt(tokenizer: Any, prefix: Prefix, cfg: PromptConfig | None = None) -> str:
    """The model input text for `prefix`: its messages through the tokenizer's chat template, ending with
    the assistant generation prompt. Tokenize it with `add_special_tokens=False` (the template has them)."""
    return _chat_template(tokenizer, render_messages(prefix, cfg), add_generation_prompt=True)


def prefix_at(traj: Trajectory, t: int) -> Prefix:
    """The prefix before step `t` of a stored trajectory (t = len(steps): the final state)."""
    if not 0 <= t <= len(traj.steps):
        raise IndexError(f"trajectory {traj.id}: step {t} out of range 0..{len(traj.steps)}")
    if t < len(traj.steps):
        observation = traj.steps[t].observation
        info = {k: traj.steps[t].info[k] for k in PREFIX_INFO_KEYS if k in traj.steps[t].info}
    else:
        observation, info = traj.final_observation, {}
    return Prefix(
        env=traj.env, task_id=traj.task_id, task=traj.task, observation=observation,
        history=list(traj.steps[:t]), info=info, sample=traj.sample, seed=traj.seed,
    )


def render_training_text(
    tokenizer: Any, traj: Trajectory, t: int, cfg: PromptConfig | None = None
) -> tuple[str, str]:
    """`(prompt_text, completion_text)` for step `t`: the inference prompt of step t, and the assistant turn
    that follows it in the chat template (the formatted action plus the template's end-of-turn text)."""
    if not 0 <= t < len(traj.steps):
        raise IndexError(f"trajectory {traj.id}: step {t} out of range 0..{len(traj.steps) - 1}")
    prefix = prefix_at(traj, t)
    prompt = render_prompt(tokenizer, prefix, cfg)
    reply = {"role": "assistant", "content": format_action(traj.steps[t], None, cfg)}
    full = _chat_template(tokenizer, render_messages(prefix, cfg) + [reply], add_generation_prompt=False)
    if not full.startswith(prompt):
        raise ValueError(
            f"the chat template of {getattr(tokenizer, 'name_or_path', '')!r} does not render the prompt as "
            "a prefix of prompt + reply, so the completion cannot be separated from the prompt"
        )
    return prompt, full[len(prompt):]

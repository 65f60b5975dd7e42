"""SFT examples from trajectories: token ids plus a loss mask that is 1 exactly on the agent's tokens.

Every text comes from the one renderer (`proctor.prompts.render_training_text`), and prompts are tokenized
exactly as the agents tokenize them (the whole prompt string, `add_special_tokens=False`), so the model is
trained on the token sequences it will see at inference. The agent's tokens of a reply are those an agent
generates: the formatted action and the end-of-turn token, not what the template writes after it (ChatML's
newline after `<|im_end|>`).

- `step_example` (`examples: steps`): step t's inference prompt (its history window, admissible list,
  memory) followed by its reply; the mask is 1 on the reply only. Earlier assistant turns shown in the prompt
  are context, not targets.
- `episode_example` (`examples: episodes`): the whole episode as one sequence with the mask 1 on every
  reply. It equals the T step examples at once, and is used only when it is exact: every step's prompt ids
  must be a prefix of the sequence (full history, no admissible list, which only the current turn shows);
  otherwise it raises. T times fewer prompt tokens to run.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from proctor.prompts.render import PromptConfig, render_training_text
from proctor.trajectory import Trajectory


@dataclass
class Example:
    """One training sequence: `ids` and `mask` (1: an agent token the loss is computed on) of equal length."""

    ids: list[int]
    mask: list[int]
    source: str  # "<trajectory id>" or "<trajectory id>#<step>"

    def __post_init__(self) -> None:
        if len(self.ids) != len(self.mask):
            raise ValueError(f"{self.source}: {len(self.ids)} ids but {len(self.mask)} mask values")


def _encode(tokenizer: Any, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def reply_mask(reply_ids: Sequence[int], eos_ids: set[int] | Sequence[int]) -> list[int]:
    """1 on the reply's tokens up to and including its first end-of-turn token, 0 after it (all 1 when it
    has none): the tokens an agent generates."""
    eos = set(eos_ids)
    end = next((i + 1 for i, tok in enumerate(reply_ids) if tok in eos), len(reply_ids))
    return [1] * end + [0] * (len(reply_ids) - end)


def step_example(tokenizer: Any, traj: Trajectory, t: int, cfg: PromptConfig, eos_ids: set[int]) -> Example:
    """Step `t` of `traj`: its prompt (mask 0) and its reply (mask 1 on the agent's tokens)."""
    prompt, reply = render_training_text(tokenizer, traj, t, cfg)
    p_ids, r_ids = _encode(tokenizer, prompt), _encode(tokenizer, reply)
    return Example(p_ids + r_ids, [0] * len(p_ids) + reply_mask(r_ids, eos_ids), f"{traj.id}#{t}")


def episode_example(tokenizer: Any, traj: Trajectory, cfg: PromptConfig, eos_ids: set[int]) -> Example:
    """All steps of `traj` in one sequence, the mask 1 on every reply's agent tokens (see module docstring).

    The sequence is the step prompts' new text and the replies, tokenized piece by piece; it must equal the
    tokenization of the whole text (no merge across a turn boundary), else it raises."""
    pieces: list[str] = []
    text = ""
    for t in range(len(traj.steps)):
        prompt, reply = render_training_text(tokenizer, traj, t, cfg)
        if not prompt.startswith(text):
            raise ValueError(
                f"trajectory {traj.id} step {t}: its prompt does not extend the previous steps' text, so one "
                "sequence per episode would not match the step prompts (use examples: steps, or a prompt with "
                "history: null and show_admissible: false)")
        pieces += [prompt[len(text):], reply]
        text = prompt + reply
    encoded = tokenizer(pieces, add_special_tokens=False)["input_ids"]
    ids: list[int] = []
    mask: list[int] = []
    for k, piece_ids in enumerate(encoded):
        ids += piece_ids
        mask += reply_mask(piece_ids, eos_ids) if k % 2 else [0] * len(piece_ids)
    if ids != _encode(tokenizer, text):
        raise ValueError(f"trajectory {traj.id}: the tokenizer merges across a turn boundary, so the episode's "
                         "ids differ from the step prompts'; use examples: steps")
    return Example(ids, mask, traj.id)


def build_examples(tokenizer: Any, trajs: Sequence[Trajectory], cfg: PromptConfig, eos_ids: set[int],
                   per: str = "steps") -> list[Example]:
    """Examples of every step of `trajs`: one per step (`per="steps"`) or one per episode (`"episodes"`)."""
    if per == "episodes":
        return [episode_example(tokenizer, tr, cfg, eos_ids) for tr in trajs if tr.steps]
    if per != "steps":
        raise ValueError(f"examples must be 'steps' or 'episodes', got {per!r}")
    return [step_example(tokenizer, tr, t, cfg, eos_ids) for tr in trajs for t in range(len(tr.steps))]


def length_grouped_batches(lengths: Sequence[int], batch_size: int, rng: random.Random,
                           group: int = 16) -> Iterator[list[int]]:
    """Endless batches of example indices: each epoch shuffles, sorts chunks of `group` batches by length (so
    a batch pads little) and shuffles the batches."""
    if not lengths:
        raise ValueError("no examples to batch")
    order = list(range(len(lengths)))
    while True:
        rng.shuffle(order)
        batches = []
        for start in range(0, len(order), batch_size * group):
            chunk = sorted(order[start:start + batch_size * group], key=lambda i: lengths[i])
            batches += [chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size)]
        rng.shuffle(batches)
        yield from batches

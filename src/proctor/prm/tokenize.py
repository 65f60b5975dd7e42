"""Tokenization of stepwise examples: every step ends at a marker position that carries its label.

Two modes produce the same features, `{"input_ids", "labels", "step_mask"}` (+ `"outcome"` when set):
`labels` holds the step label at the position that ends each step and -100 elsewhere, `step_mask` is 1 at
every step-end position (also for unlabelled steps, which are still scored).

- `tokenize_marked` (proctor's default): the text `prompt + step_1 + MARKER + step_2 + MARKER ...` is
  tokenized ONCE; the marker is a dedicated special token (e.g. `<|step|>`), so its positions are exactly
  the step ends, at training and at inference alike.
- `tokenize_trl` reproduces TRL's `PRMTrainer.tokenize_row` (ALGORITHMS.md §7): prompt and each
  `step + separator` are tokenized separately without special tokens, the label sits on the last token of
  `step + separator`, BOS is prepended when the tokenizer has one, and truncation cuts the completion first
  (`max_completion_length`), then the whole sequence (`max_length`).

Both fail loudly (`TokenizationError`) when no labelled position survives tokenization or truncation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch
from pydantic import BaseModel, ConfigDict

from proctor.prm.data import StepwiseExample

IGNORE = -100


class TokenizationError(ValueError):
    """An example whose step ends cannot be placed or whose labels were all cut away."""


def _label(x: float | None) -> float:
    return IGNORE if x is None else float(x)


def _encode(tokenizer: Any, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def _with_bos(tokenizer: Any, ids: list[int]) -> list[int]:
    bos = tokenizer.bos_token_id
    return [bos] + ids if bos is not None else ids


def _check_survivors(labels: Sequence[float], ex: StepwiseExample, why: str) -> None:
    if all(x == IGNORE for x in labels) and any(x is not None for x in ex.labels):
        raise TokenizationError(f"example {ex.id!r}: no labelled step position survives {why}")


def tokenize_trl(
    ex: StepwiseExample,
    tokenizer: Any,
    step_separator: str = "\n",
    max_length: int | None = None,
    max_prompt_length: int | None = None,
    max_completion_length: int | None = None,
    train_on_last_step_only: bool = False,
    is_eval: bool = False,
) -> dict[str, list]:
    """TRL's `PRMTrainer.tokenize_row`, exactly (see the module docstring), plus `step_mask`."""
    prompt_ids = _encode(tokenizer, ex.prompt)
    sep_ids = _encode(tokenizer, step_separator)
    steps = [_encode(tokenizer, c) + sep_ids for c in ex.completions]
    step_labels = [_label(x) for x in ex.labels]
    if train_on_last_step_only and not is_eval:
        step_labels = [IGNORE] * (len(step_labels) - 1) + step_labels[-1:]
    completion_ids, labels, mask = [], [], []
    for ids, lab in zip(steps, step_labels, strict=True):
        completion_ids += ids
        labels += [IGNORE] * (len(ids) - 1) + [lab]
        mask += [0] * (len(ids) - 1) + [1]
    prompt_ids = _with_bos(tokenizer, prompt_ids)
    if max_prompt_length is not None:
        prompt_ids = prompt_ids[-max_prompt_length:]
    if max_completion_length is not None:
        completion_ids, labels, mask = (x[:max_completion_length] for x in (completion_ids, labels, mask))
    input_ids = prompt_ids + completion_ids
    labels = [IGNORE] * len(prompt_ids) + labels
    mask = [0] * len(prompt_ids) + mask
    if max_length is not None:
        input_ids, labels, mask = input_ids[:max_length], labels[:max_length], mask[:max_length]
    _check_survivors(labels, ex, "truncation")
    return _finish(ex, input_ids, labels, mask)


def marker_id(tokenizer: Any, marker: str) -> int:
    """The id of `marker`, which must encode to exactly one token (a special token)."""
    ids = _encode(tokenizer, marker)
    if len(ids) != 1:
        raise TokenizationError(
            f"step marker {marker!r} encodes to {len(ids)} tokens {ids}; add it to the "
            f"tokenizer as a special token (tokenizer.add_special_tokens)"
        )
    return ids[0]


def tokenize_marked(
    ex: StepwiseExample, tokenizer: Any, marker: str, max_length: int | None = None, add_bos: bool = True
) -> dict[str, list]:
    """Tokenize `prompt + Σ (step + marker)` once; labels sit on the marker tokens (module docstring).
    Right truncation to `max_length` drops the steps whose marker is cut."""
    mid = marker_id(tokenizer, marker)
    for k, text in enumerate([ex.prompt, *ex.completions]):
        if marker in text:
            part = "the prompt" if k == 0 else f"step {k - 1}"
            raise TokenizationError(f"example {ex.id!r}: {part} contains the step marker {marker!r}")
    ids = _encode(tokenizer, ex.prompt + "".join(c + marker for c in ex.completions))
    if add_bos and tokenizer.bos_token_id is not None and (not ids or ids[0] != tokenizer.bos_token_id):
        ids = [tokenizer.bos_token_id] + ids
    positions = [i for i, t in enumerate(ids) if t == mid]
    if len(positions) != ex.num_steps:
        raise TokenizationError(
            f"example {ex.id!r}: {ex.num_steps} steps but {len(positions)} marker tokens "
            f"after tokenization (does a step merge with the marker?)"
        )
    labels = [IGNORE] * len(ids)
    mask = [0] * len(ids)
    for pos, lab in zip(positions, ex.labels, strict=True):
        labels[pos], mask[pos] = _label(lab), 1
    if max_length is not None:
        ids, labels, mask = ids[:max_length], labels[:max_length], mask[:max_length]
    if not any(mask):
        raise TokenizationError(f"example {ex.id!r}: no step marker survives truncation to {max_length}")
    _check_survivors(labels, ex, f"truncation to {max_length}")
    return _finish(ex, ids, labels, mask)


def _finish(ex: StepwiseExample, ids: list[int], labels: list[float], mask: list[int]) -> dict[str, list]:
    out: dict[str, Any] = {"input_ids": ids, "labels": labels, "step_mask": mask}
    if ex.outcome is not None:
        out["outcome"] = ex.outcome
    return out


class TokenizeConfig(BaseModel):
    """How examples become features: `mode` "marked" (marker token) or "trl" (TRL's tokenize_row)."""

    model_config = ConfigDict(extra="forbid")

    mode: Literal["marked", "trl"] = "marked"
    marker: str = "<|step|>"
    step_separator: str = "\n"
    max_length: int | None = None
    max_prompt_length: int | None = None
    max_completion_length: int | None = None
    train_on_last_step_only: bool = False

    def __call__(self, ex: StepwiseExample, tokenizer: Any, is_eval: bool = False) -> dict[str, list]:
        if self.mode == "marked":
            return tokenize_marked(ex, tokenizer, self.marker, self.max_length)
        return tokenize_trl(
            ex,
            tokenizer,
            self.step_separator,
            self.max_length,
            self.max_prompt_length,
            self.max_completion_length,
            self.train_on_last_step_only,
            is_eval,
        )


def collate(features: Sequence[dict[str, Any]], pad_token_id: int) -> dict[str, torch.Tensor]:
    """Right-pad a batch: input_ids with `pad_token_id`, labels with -100, masks with 0."""
    width = max(len(f["input_ids"]) for f in features)

    def pad(key: str, value: float, dtype: torch.dtype) -> torch.Tensor:
        return torch.tensor([list(f[key]) + [value] * (width - len(f[key])) for f in features], dtype=dtype)

    batch = {
        "input_ids": pad("input_ids", pad_token_id, torch.long),
        "attention_mask": torch.tensor(
            [[1] * len(f["input_ids"]) + [0] * (width - len(f["input_ids"])) for f in features],
            dtype=torch.long,
        ),
        "labels": pad("labels", IGNORE, torch.float),
        "step_mask": pad("step_mask", 0, torch.bool),
    }
    if any("outcome" in f for f in features):
        missing = [i for i, f in enumerate(features) if "outcome" not in f]
        if missing:
            raise ValueError(f"batch rows {missing} have no 'outcome' while others do")
        batch["outcome"] = torch.tensor([float(f["outcome"]) for f in features])
    return batch


@dataclass
class PRMCollator:
    """A `data_collator` for the HF Trainer (see `collate`)."""

    pad_token_id: int

    def __call__(self, features: Sequence[dict[str, Any]]) -> dict[str, torch.Tensor]:
        return collate(features, self.pad_token_id)

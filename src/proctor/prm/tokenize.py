"""Tokenization of stepwise examples: every step ends at a marker position that carries its label.

Two modes produce the same features, `{"input_ids", "labels", "step_mask"}` (+ `"outcome"` when set):
`labels` holds the step label at the position that ends each step and -100 elsewhere, `step_mask` is 1 at
every step-end position (also for unlabelled steps, which are still scored).

- `tokenize_marked` (proctor's default): the text `prompt + step_1 + MARKER + step_2 + MARKER ...` is
  tokenized ONCE; the marker is a dedicated special token (e.g. `<|step|>`), so its positions are exactly
  the step ends, at training and at inference alike.
- `tokenize_trl` reproduces TRL's `PRMTrainer.tokenize_row` (docs/methods.md §7.3): prompt and each
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
from pydantic import BaseModel, ConfigDict, Field

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

    mode: Literal["marked", "trl"] = Field(default="marked", description="marked: a special marker token ends "
                                           "each step and carries its label; trl: TRL's tokenize_row (each step "
                                           "tokenized with `step_separator`, the label on its last token)")
    marker: str = Field(default="<|step|>", description="marked: the step-end token (added to the tokenizer as a "
                        "special token)")
    step_separator: str = Field(default="\n", description="trl: the text after each step")
    max_length: int | None = Field(default=None, description="most tokens per example; longer ones are cut "
                                   "at the right, with the steps whose end is cut (None: no limit)")
    max_prompt_length: int | None = Field(default=None, description="trl: keep the prompt's last this many "
                                          "tokens (None: all)")
    max_completion_length: int | None = Field(default=None, description="trl: keep the steps' first this "
                                              "many tokens (None: all)")
    train_on_last_step_only: bool = Field(default=False, description="trl: train on the last step's label only "
                                          "(evaluation still scores every step)")

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
    """Right-pad a batch: input_ids with `pad_token_id`, labels with -100, masks with 0; `sequence_ids` [B, L]
    holds the index of the feature each token belongs to (its row here), -1 on padding."""
    width = max(len(f["input_ids"]) for f in features)

    def pad(key: str, value: float, dtype: torch.dtype) -> torch.Tensor:
        return torch.tensor([list(f[key]) + [value] * (width - len(f[key])) for f in features], dtype=dtype)

    lengths = [len(f["input_ids"]) for f in features]
    batch = {
        "input_ids": pad("input_ids", pad_token_id, torch.long),
        "attention_mask": torch.tensor([[1] * n + [0] * (width - n) for n in lengths], dtype=torch.long),
        "labels": pad("labels", IGNORE, torch.float),
        "step_mask": pad("step_mask", 0, torch.bool),
        "sequence_ids": torch.tensor([[i] * n + [-1] * (width - n) for i, n in enumerate(lengths)]),
    }
    return _with_outcome(batch, features)


def _with_outcome(
    batch: dict[str, torch.Tensor], features: Sequence[dict[str, Any]]
) -> dict[str, torch.Tensor]:
    if any("outcome" in f for f in features):
        missing = [i for i, f in enumerate(features) if "outcome" not in f]
        if missing:
            raise ValueError(f"batch rows {missing} have no 'outcome' while others do")
        batch["outcome"] = torch.tensor([float(f["outcome"]) for f in features])
    return batch


def pack_rows(lengths: Sequence[int], width: int) -> list[list[int]]:
    """First-fit-decreasing bin packing: the feature indices of each row, every row ≤ `width` tokens."""
    rows: list[list[int]] = []
    free: list[int] = []
    for i in sorted(range(len(lengths)), key=lambda k: (-lengths[k], k)):
        if lengths[i] > width:
            raise ValueError(f"feature {i} has {lengths[i]} tokens, more than the packing width {width}")
        slot = next((r for r, room in enumerate(free) if room >= lengths[i]), None)
        if slot is None:
            rows.append([])
            free.append(width)
            slot = len(rows) - 1
        rows[slot].append(i)
        free[slot] -= lengths[i]
    return rows


def pack(
    features: Sequence[dict[str, Any]], pad_token_id: int, width: int | None = None
) -> dict[str, torch.Tensor]:
    """Pack several features per row (`pack_rows`; rows are `width` tokens, or the longest feature if that is
    longer) with NO attention mask and `position_ids` restarting at 0 for every feature (and for the padding
    tail of a row).

    transformers (sdpa, eager, flash-attention) reads restarting `position_ids` without an attention mask as
    packed sequences and keeps attention within each (masking_utils.find_packed_sequence_indices), so each
    feature is computed exactly as on its own, without the padding of `collate`. `sequence_ids` [R, W] holds
    the feature index of each token (-1 on padding); `outcome` stays in feature order."""
    lengths = [len(f["input_ids"]) for f in features]
    width = max(max(lengths), width or 0)
    rows = pack_rows(lengths, width)
    shape = (len(rows), width)
    ids = torch.full(shape, pad_token_id, dtype=torch.long)
    pos = torch.zeros(shape, dtype=torch.long)
    labels = torch.full(shape, float(IGNORE))
    steps = torch.zeros(shape, dtype=torch.bool)
    seq = torch.full(shape, -1, dtype=torch.long)
    for r, members in enumerate(rows):
        start = 0
        for i in members:
            f, n = features[i], lengths[i]
            span = slice(start, start + n)
            ids[r, span] = torch.tensor(list(f["input_ids"]))
            labels[r, span] = torch.tensor(list(f["labels"]), dtype=torch.float)
            steps[r, span] = torch.tensor(list(f["step_mask"]), dtype=torch.bool)
            pos[r, span] = torch.arange(n)
            seq[r, span] = i
            start += n
        pos[r, start:] = torch.arange(width - start)
    batch = {"input_ids": ids, "position_ids": pos, "labels": labels, "step_mask": steps, "sequence_ids": seq}
    return _with_outcome(batch, features)


def flatten_pairs(features: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Pair items `{"chosen": f, "rejected": f}` become the features [c_0, r_0, c_1, r_1, ...]; plain features
    pass through (a batch must not mix the two)."""
    paired = ["chosen" in f for f in features]
    if not any(paired):
        return list(features)
    if not all(paired):
        raise ValueError("a batch mixes preference pairs and single examples")
    return [g for f in features for g in (f["chosen"], f["rejected"])]


@dataclass
class PRMCollator:
    """A `data_collator` for the HF Trainer: `collate` (padding), or `pack` when `packing` (several
    features per row, `pack_width` tokens per row, default the longest in the batch). Preference pairs are
    flattened first (`flatten_pairs`)."""

    pad_token_id: int
    packing: bool = False
    pack_width: int | None = None

    def __call__(self, features: Sequence[dict[str, Any]]) -> dict[str, torch.Tensor]:
        flat = flatten_pairs(features)
        if self.packing:
            return pack(flat, self.pad_token_id, self.pack_width)
        return collate(flat, self.pad_token_id)

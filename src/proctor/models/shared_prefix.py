"""Log-probabilities of several completions of one prompt from one row: the prompt, then every completion.

A 4D attention mask lets each completion token see the prompt and the earlier tokens of its own completion,
nothing else, and its position ids continue from the end of the prompt, so every completion is scored as if it
followed the prompt alone (the prompt runs once and no key/value cache is copied per completion; the tree
attention of speculative decoding, e.g. SpecInfer, Miao et al. 2023, arXiv 2305.09781, on a tree of depth one).
Rows are sorted by length into passes of a few rows of similar widths (`MAX_ROWS_PER_PASS`) and left-padded, so
the completions end at the last column and only the last K + 1 positions are projected to the vocabulary (K: a
row's completion tokens, at most). A pad position sees only itself (no empty softmax row).

The mask is additive (0 or the dtype's lowest value), which the `sdpa` and `eager` attention implementations of
`transformers` take as given (a 4D mask is passed through unchanged); it is exact only for plain full attention,
so callers check `takes_tree_mask` and a model's cache type (`proctor.agents.prefix_cache.reusable_cache`).

    rows = shared_prefix_logprobs(model, prompts, [(prompt index, completion ids), ...], pad_id)
    # rows[j]: log π of each token of completion j given its prompt (floats; `shared_prefix_token_logprobs`:
    # tensors with gradients, for a loss over all the actions at a state)
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from proctor.models.sequences import MAX_ROWS_PER_PASS, length_sorted_chunks

#: most mask entries (rows × width²) in one forward pass; larger calls run in chunks of prompts
MAX_MASK_ENTRIES = 2**25


def takes_tree_mask(model: torch.nn.Module) -> bool:
    """Whether `model`'s attention takes a custom additive 4D mask (`sdpa` or `eager`; not flash attention)."""
    return getattr(getattr(model, "config", None), "_attn_implementation", None) in ("sdpa", "eager")


def tree_mask(segments: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The additive mask [B, 1, W, W] of rows whose positions are labelled -1 (pad), 0 (prompt) or j ≥ 1
    (completion j): query q sees key k ≤ q when k is in the prompt or in q's own completion."""
    width = segments.shape[1]
    pos = torch.arange(width)
    causal = pos[:, None] >= pos[None, :]
    key, query = segments[:, None, :], segments[:, :, None]
    seen = causal[None] & (key >= 0) & ((key == 0) | (key == query))
    seen |= torch.eye(width, dtype=torch.bool)[None]
    return torch.zeros(seen.shape, dtype=dtype).masked_fill(~seen, torch.finfo(dtype).min)[:, None]


def shared_prefix_logprobs(model: torch.nn.Module, prompts: Sequence[Sequence[int]],
                           completions: Sequence[tuple[int, Sequence[int]]], pad_id: int) -> list[list[float]]:
    """Per-token log π of every completion (an index into `prompts` and its token ids) given its prompt, in the
    order given (module docstring), without gradients."""
    with torch.inference_mode():
        return [row.tolist() for row in shared_prefix_token_logprobs(model, prompts, completions, pad_id)]


def shared_prefix_token_logprobs(model: torch.nn.Module, prompts: Sequence[Sequence[int]],
                                 completions: Sequence[tuple[int, Sequence[int]]], pad_id: int
                                 ) -> list[torch.Tensor]:
    """`shared_prefix_logprobs` as one float32 tensor per completion, with gradients where autograd is on (the
    trainers' form: a loss over all the actions at a state)."""
    if any(not p for p in prompts) or any(not c for _, c in completions):
        raise ValueError("empty prompt or completion")
    groups: list[list[int]] = [[] for _ in prompts]
    for j, (i, _) in enumerate(completions):
        groups[i].append(j)
    length = {i: len(prompts[i]) + sum(len(completions[j][1]) for j in groups[i]) for i in range(len(prompts))
              if groups[i]}
    out: list[torch.Tensor] = [torch.empty(0)] * len(completions)
    for chunk in length_sorted_chunks(length, MAX_ROWS_PER_PASS, MAX_MASK_ENTRIES):
        rows = _score_rows(model, [(prompts[i], [completions[j][1] for j in groups[i]]) for i in chunk], pad_id)
        for j, row in zip((j for i in chunk for j in groups[i]), rows, strict=True):
            out[j] = row
    return out


def _score_rows(model: torch.nn.Module, rows: Sequence[tuple[Sequence[int], Sequence[Sequence[int]]]],
                pad_id: int) -> list[torch.Tensor]:
    """The per-token log-probs of every completion of `rows` (prompt, its completions), in row order, from one
    forward pass."""
    lengths = [len(p) + sum(len(c) for c in cs) for p, cs in rows]
    width, keep = max(lengths), max(sum(len(c) for c in cs) for _, cs in rows) + 1
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    segments = torch.full((len(rows), width), -1, dtype=torch.long)
    positions = torch.zeros((len(rows), width), dtype=torch.long)
    for b, ((prompt, comps), length) in enumerate(zip(rows, lengths, strict=True)):
        seq, seg, pos = list(prompt), [0] * len(prompt), list(range(len(prompt)))
        for n, c in enumerate(comps, start=1):
            seq += c
            seg += [n] * len(c)
            pos += range(len(prompt), len(prompt) + len(c))
        ids[b, width - length:] = torch.tensor(seq)
        segments[b, width - length:] = torch.tensor(seg)
        positions[b, width - length:] = torch.tensor(pos)
    dev = next(model.parameters()).device
    mask = tree_mask(segments, next(model.parameters()).dtype)
    logits = model(input_ids=ids.to(dev), attention_mask=mask.to(dev), position_ids=positions.to(dev),
                   use_cache=False, logits_to_keep=keep).logits
    logp = torch.log_softmax(logits.float(), dim=-1)  # column c: position width − keep + c
    out = []
    for b, (_, comps) in enumerate(rows):
        last = keep - 1 - sum(len(c) for c in comps)  # the prompt's last token predicts each first token
        col = last
        for c in comps:
            cols = torch.tensor([last] + list(range(col + 1, col + len(c))), device=dev)
            out.append(logp[b, cols, torch.tensor(list(c), device=dev)])
            col += len(c)
    return out

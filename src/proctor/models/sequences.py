"""Per-token log-probabilities of completions given prompts, in one forward pass per batch.

Every row is `prompt ids + completion ids` (token ids as given: the policy's own generated ids when it has
them, never a re-tokenization). Rows are left-padded so that all completions end at the last column; the
model then projects to the vocabulary only the last K + 1 positions (`logits_to_keep`, K = the longest
completion), which is where every completion token is predicted. Prompts, often most of the tokens, never
pay for the vocabulary projection or the log-softmax.

    logps, mask = completion_logprobs(model, [(prompt_ids, completion_ids), ...], pad_id)
    # logps[b, k]: log π(completion token) for the K right-aligned completion positions; mask: real tokens

When several completions share one prompt (DPO's chosen and rejected, a group's samples), `shared_prompt_logprobs`
runs each prompt once: the prompts' forward pass keeps its KV cache, which is repeated for the n completions of
each prompt, and only the completions run on top of it (right-padded, positions continuing after their prompt).
Gradients flow through the cache into the prompt's pass, so the result and its gradient equal those of the
concatenated rows, at about 1/n of the prompt cost. Needs a model whose cache is a plain KV cache (no gradient
checkpointing, which turns the cache off in training).
"""


from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from proctor.models.kv_cache import cache_kwargs, output_cache


@dataclass
class CompletionBatch:
    """Left-padded rows (see module docstring)."""

    input_ids: torch.Tensor  # [B, L]
    attention_mask: torch.Tensor  # [B, L]
    position_ids: torch.Tensor  # [B, L]
    completion_mask: torch.Tensor  # [B, K] 1 on each row's completion tokens (right-aligned)

    @property
    def tokens(self) -> int:
        """Real (non-pad) tokens in the batch."""
        return int(self.attention_mask.sum())


def collate_completions(rows: Sequence[tuple[Sequence[int], Sequence[int]]], pad_id: int) -> CompletionBatch:
    """Left-pad `(prompt_ids, completion_ids)` rows; every prompt and completion needs at least one token."""
    if not rows:
        raise ValueError("no rows to collate")
    for i, (p, c) in enumerate(rows):
        if not p or not c:
            raise ValueError(f"row {i}: empty {'prompt' if not p else 'completion'}")
    width = max(len(p) + len(c) for p, c in rows)
    k = max(len(c) for _, c in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    attn = torch.zeros((len(rows), width), dtype=torch.long)
    comp = torch.zeros((len(rows), k), dtype=torch.long)
    for b, (p, c) in enumerate(rows):
        seq = list(p) + list(c)
        ids[b, width - len(seq):] = torch.tensor(seq, dtype=torch.long)
        attn[b, width - len(seq):] = 1
        comp[b, k - len(c):] = 1
    positions = (attn.cumsum(dim=1) - 1).clamp(min=0)
    return CompletionBatch(ids, attn, positions, comp)


def left_pad(rows: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(ids, attention mask, position ids) [B, W] of token rows left-padded to the longest; positions count
    each row's real tokens from 0."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    attn = torch.zeros((len(rows), width), dtype=torch.long)
    for b, r in enumerate(rows):
        ids[b, width - len(r):] = torch.tensor(list(r), dtype=torch.long)
        attn[b, width - len(r):] = 1
    return ids, attn, (attn.cumsum(dim=1) - 1).clamp(min=0)


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """log softmax(logits)[target] per position, computed in float32: z[y] − logsumexp(z). [B, K]."""
    logits = logits.float()
    return logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, dim=-1)


def batch_logprobs(model: torch.nn.Module, batch: CompletionBatch) -> torch.Tensor:
    """Per-token log-probs [B, K] of the completion positions of `batch` (0 where the mask is 0)."""
    dev = next(model.parameters()).device
    k = batch.completion_mask.shape[1]
    out = model(input_ids=batch.input_ids.to(dev), attention_mask=batch.attention_mask.to(dev),
                position_ids=batch.position_ids.to(dev), logits_to_keep=k + 1, use_cache=False)
    logits = out.logits[:, :-1]
    targets = batch.input_ids[:, -k:].to(dev)
    mask = batch.completion_mask.to(dev).bool()
    return torch.where(mask, token_logprobs(logits, targets), torch.zeros((), device=dev))


def completion_logprobs(model: torch.nn.Module, rows: Sequence[tuple[Sequence[int], Sequence[int]]],
                        pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(per-token log-probs [B, K], completion mask [B, K]) of `rows` (see module docstring)."""
    batch = collate_completions(rows, pad_id)
    return batch_logprobs(model, batch), batch.completion_mask.to(next(model.parameters()).device)


def sequence_logprobs(token_logps: torch.Tensor, mask: torch.Tensor, average: bool = False) -> torch.Tensor:
    """Σ_k log π(y_k) per row, or the mean over the row's tokens (`average`). [B, K] → [B]."""
    m = mask.to(token_logps.dtype)
    total = (token_logps * m).sum(dim=1)
    return total / m.sum(dim=1).clamp(min=1.0) if average else total


#: most rows in one forward pass of `row_logprobs` and of the tree-mask rows (`proctor.models.shared_prefix`): rows
#: sorted by length and cut into passes of similar widths pad little. Measured on 2 threads: a likelihood-PRM step
#: of 16 + 16 household rows 0.44 s in two random passes, 0.33–0.37 s in sorted passes of 6 / 8 / 11 rows; π0 of the
#: household quickstart on 100 test tasks 22.8 s in one pass per call, 20.9 / 19.7 / 21.5 s in passes of 4 / 8 / 16
MAX_ROWS_PER_PASS = 8


def length_sorted_chunks(lengths: dict[int, int], max_rows: int, max_entries: int | None = None) -> list[list[int]]:
    """The keys of `lengths` (row → tokens) in passes of at most `max_rows` rows (and, if given, `max_entries`
    attention-mask entries, rows × width²), sorted by length so that each pass pads its rows only to a width
    near their own. Each row's result is the same, up to float rounding, whatever pass it runs in."""
    chunks: list[list[int]] = []
    for i in sorted(lengths, key=lambda i: lengths[i]):  # ascending: the row joining a pass sets its width
        last = chunks[-1] if chunks else []
        if last and len(last) < max_rows and (max_entries is None or (len(last) + 1) * lengths[i] ** 2 <= max_entries):
            last.append(i)
        else:
            chunks.append([i])
    return chunks


def row_logprobs(model: torch.nn.Module, rows: Sequence[tuple[Sequence[int], Sequence[int]]], pad_id: int,
                 max_rows: int = MAX_ROWS_PER_PASS) -> tuple[torch.Tensor, torch.Tensor]:
    """(Σ_k log π(completion token k) [B], completion tokens [B]) of `rows`, with gradients where autograd is on:
    `completion_logprobs` + `sequence_logprobs` over passes of at most `max_rows` rows of similar lengths
    (`length_sorted_chunks`), which pad far less than one pass of rows in random order (a quarter of a batch of
    16 household steps is padding; 8 sorted rows of 32, a tenth). Results in the order of `rows`."""
    if not rows:
        raise ValueError("no rows to score")
    for i, (p, c) in enumerate(rows):  # named here: a pass would name the row by its place in the pass
        if not p or not c:
            raise ValueError(f"row {i}: empty {'prompt' if not p else 'completion'}")
    chunks = length_sorted_chunks({i: len(p) + len(c) for i, (p, c) in enumerate(rows)}, max_rows)
    sums: list[torch.Tensor] = [torch.empty(0)] * len(rows)
    counts = torch.tensor([float(len(c)) for _, c in rows])
    for chunk in chunks:
        logps, mask = completion_logprobs(model, [rows[i] for i in chunk], pad_id)
        for i, total in zip(chunk, sequence_logprobs(logps, mask), strict=True):
            sums[i] = total
    return torch.stack(sums), counts.to(sums[0].device)


def shared_prompt_logprobs(model: torch.nn.Module, prompts: Sequence[Sequence[int]],
                           completions: Sequence[Sequence[Sequence[int]]], pad_id: int
                           ) -> tuple[torch.Tensor, torch.Tensor, int]:
    """(per-token log-probs [P·n, K], completion mask [P·n, K], real tokens) of the n completions of every
    prompt, rows in prompt-major order (prompt 0's n completions, then prompt 1's, ...); completions are
    left-aligned here (mask 1 on each row's first len(completion) positions). See module docstring."""
    if not prompts or len(prompts) != len(completions):
        raise ValueError(f"{len(prompts)} prompts but {len(completions)} completion lists")
    n = len(completions[0])
    if n < 1 or any(len(cs) != n for cs in completions):
        raise ValueError("every prompt needs the same number (>= 1) of completions")
    rows = [list(c) for cs in completions for c in cs]
    if any(not p for p in prompts) or any(not c for c in rows):
        raise ValueError("empty prompt or completion")
    dev = next(model.parameters()).device
    ids, attn, positions = left_pad(prompts, pad_id)
    out = model(input_ids=ids.to(dev), attention_mask=attn.to(dev), position_ids=positions.to(dev), use_cache=True,
                logits_to_keep=1)
    cache = output_cache(out)
    cache.batch_repeat_interleave(n)
    k = max(len(c) for c in rows)
    cids = torch.full((len(rows), k), pad_id, dtype=torch.long)
    cmask = torch.zeros((len(rows), k), dtype=torch.long)
    for b, c in enumerate(rows):
        cids[b, :len(c)] = torch.tensor(c, dtype=torch.long)
        cmask[b, :len(c)] = 1
    full_mask = torch.cat([attn.repeat_interleave(n, dim=0), cmask], dim=1)
    cpos = attn.sum(dim=1).repeat_interleave(n)[:, None] + torch.arange(k)[None, :]
    out2 = model(input_ids=cids.to(dev), attention_mask=full_mask.to(dev), position_ids=cpos.to(dev),
                 use_cache=True, **cache_kwargs(cache))
    logits = torch.cat([out.logits[:, -1:].repeat_interleave(n, dim=0), out2.logits[:, :-1]], dim=1)
    cids, cmask = cids.to(dev), cmask.to(dev)
    logps = torch.where(cmask.bool(), token_logprobs(logits, cids), torch.zeros((), device=dev))
    return logps, cmask, int(attn.sum()) * n + int(cmask.sum())

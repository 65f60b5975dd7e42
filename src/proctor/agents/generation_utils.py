"""What `transformers.generate` output means, shared by `HFAgent` and `proctor serve`'s `Generator`: the
end-of-turn token ids, where a row ends, stop strings, and the sampled tokens' log-probabilities."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch


def eos_token_ids(model: Any, tokenizer: Any) -> list[int]:
    """End-of-turn ids, sorted: the generation config's and the tokenizer's EOS, and <|im_end|> when it is
    one token of the vocabulary (ChatML models whose EOS is <|endoftext|> end a turn with it)."""
    return config_eos_token_ids(model.generation_config, tokenizer)


def config_eos_token_ids(generation_config: Any, tokenizer: Any) -> list[int]:
    """`eos_token_ids` from a `GenerationConfig` (None: the tokenizer's alone), for a model not loaded here."""
    ids: set[int] = set()
    gen_eos = getattr(generation_config, "eos_token_id", None)
    ids.update(gen_eos if isinstance(gen_eos, (list, tuple)) else [gen_eos] if gen_eos is not None else [])
    if tokenizer.eos_token_id is not None:
        ids.add(tokenizer.eos_token_id)
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    if isinstance(im_end, int) and im_end != tokenizer.unk_token_id:
        ids.add(im_end)
    return sorted(ids)


def first_eos(tokens: Sequence[int], eos_ids: set[int] | Sequence[int]) -> int | None:
    """The index of the first end-of-turn token in `tokens`, or None."""
    return next((i for i, tok in enumerate(tokens) if tok in eos_ids), None)


def generation_end(tokens: Sequence[int], eos_ids: set[int], pad_id: int | None,
                   max_new_tokens: int) -> tuple[int, bool]:
    """`(n_tokens, finished)` for one row of `generate`'s new tokens.

    The row ends after its first end-of-turn token (finished). Otherwise trailing pad tokens (put after a
    row that stopped on a stop string) are not part of it, and it is finished iff it is shorter than
    `max_new_tokens` (generation stopped before the budget ran out)."""
    eos_at = first_eos(tokens, eos_ids)
    if eos_at is not None:
        return eos_at + 1, True
    end = len(tokens)
    if pad_id is not None and pad_id not in eos_ids:
        while end > 0 and tokens[end - 1] == pad_id:
            end -= 1
    return end, end < max_new_tokens


def find_stop(text: str, stops: Sequence[str]) -> tuple[int, int] | None:
    """(start, end) of the earliest stop-string occurrence in `text` (the longest one on ties), or None."""
    best: tuple[int, int] | None = None
    for stop in stops:
        i = text.find(stop)
        if i >= 0 and (best is None or i < best[0] or (i == best[0] and i + len(stop) > best[1])):
            best = (i, i + len(stop))
    return best


def cut_at_stop(text: str, stops: Sequence[str]) -> tuple[str, bool]:
    """`text` up to (without) the earliest stop string, and whether one was found."""
    hit = find_stop(text, stops)
    return (text[: hit[0]], True) if hit else (text, False)


def sampled_logprobs(
    logits: Sequence[torch.Tensor], tokens: torch.Tensor, k: int = 0
) -> tuple[list[list[float]], list[list[list[tuple[int, float]]]]]:
    """Per row b of a generated batch: log p(y_t) = log_softmax(z_t)[y_t] for every step t, from the raw
    logits `logits[t]` (batch x vocab) and the sampled `tokens` (batch x steps); and the `k` most likely
    (token id, log-probability) pairs of every step (k = 0: empty lists).

    One step at a time, so the peak memory is batch x vocab, not batch x steps x vocab."""
    rows = tokens.shape[0]
    if not logits:
        return [[] for _ in range(rows)], [[] for _ in range(rows)]
    picked, top_ids, top_values = [], [], []
    for t, step_logits in enumerate(logits):
        logp = torch.log_softmax(step_logits.float(), dim=-1)
        picked.append(logp.gather(1, tokens[:, t:t + 1].to(logp.device)).squeeze(1))
        if k:
            values, ids = logp.topk(k, dim=-1)
            top_ids.append(ids)
            top_values.append(values)
    chosen = torch.stack(picked, dim=1).cpu().tolist()
    if not k:
        return chosen, [[[] for _ in logits] for _ in range(rows)]
    ids_all = torch.stack(top_ids, dim=1).cpu().tolist()
    values_all = torch.stack(top_values, dim=1).cpu().tolist()
    top = [[list(zip(i_t, v_t, strict=True)) for i_t, v_t in zip(i_b, v_b, strict=True)]
           for i_b, v_b in zip(ids_all, values_all, strict=True)]
    return chosen, top

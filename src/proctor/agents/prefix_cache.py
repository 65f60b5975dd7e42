"""Prefix caching for multi-turn agents: keep each episode's KV cache between steps and reuse it.

An agent's prompt at step t+1 starts with most of its prompt at step t (system turn, task, past turns), so
recomputing it every step makes the prompt prefill grow quadratically with the episode. `PrefixCache` keeps,
per episode key, the token ids the model last processed for that episode and their per-layer keys/values;
on the next call only the tokens after the longest common token prefix are run through the model (the idea
of vLLM's automatic prefix caching, with one entry per episode and exact token-id matching, so a cached
state is used only for the identical token prefix it was computed from).

Batches are left-padded. Row i of width W has `pad_i = W - len_i` pads and can reuse `r_i` tokens, so the
batch reuses the first `P = min_i(pad_i + r_i)` positions: row i's slot holds zeros for its pads (masked
out) and its cached states for its first `P - pad_i` tokens. Positions come from the attention mask, so a
token keeps the position it had when it was cached (counted from the row's first real token).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch


def common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    """The number of leading positions where `a` and `b` hold the same token id."""
    n = min(len(a), len(b))
    if n == 0:
        return 0
    diff = np.flatnonzero(np.asarray(a[:n]) != np.asarray(b[:n]))
    return int(diff[0]) if diff.size else n


def reusable_cache(cache: Any) -> bool:
    """Whether `cache` (a `transformers` cache) holds plain full-attention key/value tensors for every layer
    (no sliding window, no recurrent state), the only kind whose prefix can be cut out and reused."""
    from transformers.cache_utils import DynamicLayer

    layers = getattr(cache, "layers", None)
    return bool(layers) and all(type(layer) is DynamicLayer for layer in layers)


@dataclass
class _Entry:
    ids: list[int]
    keys: list[torch.Tensor]  # per layer: heads x len(ids) x head_dim
    values: list[torch.Tensor]


class PrefixCache:
    """Per-episode token ids and KV states, the `capacity` most recently used episodes (see module docstring)."""

    def __init__(self, capacity: int):
        if capacity < 1:
            raise ValueError(f"prefix cache capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self._entries: OrderedDict[Hashable, _Entry] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._entries

    def drop(self, key: Hashable) -> None:
        self._entries.pop(key, None)

    def clear(self) -> None:
        self._entries.clear()

    def reusable(self, key: Hashable, ids: Sequence[int]) -> int:
        """How many leading tokens of `ids` have cached states under `key` (at most len(ids) - 1: the model
        must still run on at least one token to produce the next-token logits)."""
        entry = self._entries.get(key)
        if entry is None:
            return 0
        return max(0, min(common_prefix_len(entry.ids, ids), len(ids) - 1))

    def past(self, keys: Sequence[Hashable], rows: Sequence[Sequence[int]]) -> tuple[Any, int]:
        """`(past_key_values, P)` for the left-padded batch of token-id `rows` (width = the longest row):
        a `DynamicCache` covering the first P positions of every row, or `(None, 0)` when nothing is reusable."""
        from transformers import DynamicCache

        width = max(len(ids) for ids in rows)
        reuse = [self.reusable(k, ids) for k, ids in zip(keys, rows, strict=True)]
        past_len = min(width - len(ids) + r for ids, r in zip(rows, reuse, strict=True))
        if past_len <= 0:
            return None, 0
        # the longest row has no pads, so it reuses past_len > 0 tokens: its entry gives shapes and dtype
        template = next(self._entries[k] for k, ids, r in zip(keys, rows, reuse, strict=True) if r > 0)
        layers = []
        for layer in range(len(template.keys)):
            heads, _, dim = template.keys[layer].shape
            like = template.keys[layer]
            k_all = like.new_zeros(len(rows), heads, past_len, dim)
            v_all = like.new_zeros(len(rows), heads, past_len, dim)
            for b, (key, ids) in enumerate(zip(keys, rows, strict=True)):
                pad = width - len(ids)
                used = past_len - pad
                if used > 0:
                    entry = self._entries[key]
                    k_all[b, :, pad:] = entry.keys[layer][:, :used]
                    v_all[b, :, pad:] = entry.values[layer][:, :used]
            layers.append((k_all, v_all))
        for key, r in zip(keys, reuse, strict=True):
            if r > 0:
                self._entries.move_to_end(key)
        return DynamicCache(ddp_cache_data=layers), past_len

    def store(self, key: Hashable, ids: Sequence[int], cache: Any, row: int, start: int) -> None:
        """Keep row `row` of a batch `cache`: `ids` are the tokens at positions start, start+1, ... whose
        states the cache holds (the row's prompt without pads, then what was generated)."""
        n = min(len(ids), cache.layers[0].keys.shape[-2] - start)
        if n <= 0:
            return
        self._entries[key] = _Entry(
            ids=list(ids[:n]),
            keys=[layer.keys[row, :, start:start + n].clone() for layer in cache.layers],
            values=[layer.values[row, :, start:start + n].clone() for layer in cache.layers],
        )
        self._entries.move_to_end(key)
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)

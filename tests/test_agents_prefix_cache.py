"""Prefix caching: token-prefix matching, the left-padded batch cache, LRU, and HFAgent giving the same
outputs with the cache as without it over multi-step episodes."""

from __future__ import annotations

import pytest
import torch

from proctor.agents import HFAgent, Prefix
from proctor.agents.generation_utils import eos_token_ids
from proctor.agents.prefix_cache import PrefixCache, common_prefix_len
from proctor.trajectory import Step


class _Layer:
    def __init__(self, keys: torch.Tensor, values: torch.Tensor):
        self.keys, self.values = keys, values


class _BatchCache:
    """The two attributes `PrefixCache.store` reads from a `transformers` cache: per-layer keys and values."""

    def __init__(self, layers: list[_Layer]):
        self.layers = layers


def _entry_cache(length: int, heads: int = 2, dim: int = 3, layers: int = 2) -> _BatchCache:
    """A batch-of-1 cache whose key at (layer l, head h, position t, d) is 1000 l + 100 h + t (+ 0.5 for values)."""
    out = []
    for layer in range(layers):
        k = (1000 * layer + 100 * torch.arange(heads)[:, None, None] + torch.arange(length)[None, :, None]
             ).float().expand(heads, length, dim)[None].clone()
        out.append(_Layer(k, k + 0.5))
    return _BatchCache(out)


def test_common_prefix_len():
    assert common_prefix_len([1, 2, 3, 4], [1, 2, 9, 4]) == 2
    assert common_prefix_len([1, 2], [1, 2, 3]) == 2
    assert common_prefix_len([], [1]) == 0
    assert common_prefix_len([5], [6]) == 0


def test_reusable_keeps_one_token_to_run_and_drop_forgets():
    cache = PrefixCache(4)
    cache.store("a", [1, 2, 3, 4], _entry_cache(4), row=0, start=0)
    assert cache.reusable("a", [1, 2, 3, 9, 9]) == 3
    assert cache.reusable("a", [1, 2, 3, 4]) == 3  # identical prompt: the last token is run again
    assert cache.reusable("a", [1, 2, 3, 4, 5, 6]) == 4
    assert cache.reusable("b", [1, 2]) == 0
    cache.drop("a")
    assert "a" not in cache and cache.reusable("a", [1, 2, 3]) == 0


def test_store_keeps_only_positions_the_cache_holds_and_lru_evicts():
    cache = PrefixCache(2)
    batch = _entry_cache(6)  # row 0 of a batch: positions 0..5, the row's first real token at position 2
    cache.store("a", [7, 8, 9, 10, 11], batch, row=0, start=2)  # only 4 positions (2..5) are held
    assert cache.reusable("a", [7, 8, 9, 10, 11, 12]) == 4
    cache.store("b", [1], _entry_cache(1), row=0, start=0)
    cache.reusable("a", [7])  # a lookup does not refresh; only past() and store() do
    cache.store("c", [1], _entry_cache(1), row=0, start=0)
    assert len(cache) == 2 and "a" not in cache and "b" in cache and "c" in cache


def test_past_builds_the_left_padded_batch_cache():
    cache = PrefixCache(4)
    cache.store("a", [1, 2, 3, 4], _entry_cache(4), row=0, start=0)
    # row 0 ("a", 4 tokens, no pad) reuses 3; row 1 (new, 2 tokens, 2 pads) reuses 0 -> P = min(0 + 3, 2 + 0) = 2
    past, p = cache.past(["a", "new"], [[1, 2, 3, 9], [5, 6]])
    assert p == 2 and past.get_seq_length() == 2
    for layer_idx, layer in enumerate(past.layers):
        assert layer.keys.shape == (2, 2, 2, 3)
        expected = (1000 * layer_idx + 100 * torch.arange(2)[:, None] + torch.arange(2)[None, :]).float()
        assert torch.equal(layer.keys[0, :, :, 0], expected)
        assert torch.equal(layer.values[0, :, :, 0], expected + 0.5)
        assert torch.count_nonzero(layer.keys[1]) == 0  # the new row's two pad positions
    # a row that reuses beyond its pads: "a" (3 tokens reusable) next to a longer new row leaves P = 0
    assert cache.past(["a", "new"], [[1, 2, 3, 9], [5, 6, 7, 8, 9]]) == (None, 0)


@pytest.fixture(scope="module")
def peaked(tiny_model_dir):
    """The tiny model with larger random weights, so greedy decoding varies with the prompt."""
    from proctor.models import load

    model, tok = load(tiny_model_dir)
    with torch.random.fork_rng(), torch.no_grad():
        torch.manual_seed(0)
        for p in model.parameters():
            p.normal_(0.0, 0.35)
    return model, tok


def _episode(agent: HFAgent, steps: int) -> list[list[tuple[str, list[float], int]]]:
    """Two episodes stepped together for `steps` steps (n = 2 samples per prefix); per step and row:
    (text, log-probs, prompt tokens reused)."""
    prefixes = [Prefix(env="household", task_id=f"t{k}", task="put a mug in the cabinet", sample=k,
                       observation="You arrive at the kitchen. " * (k + 1),
                       info={"admissible_actions": ["go to cabinet 1", "look"]}) for k in range(2)]
    for p in prefixes:
        agent.reset(p)
    seen = []
    for t in range(steps):
        cands = agent.act(prefixes, n=2)
        seen.append([(c.raw_output, c.logprobs, c.meta["reused_prompt_tokens"]) for cs in cands for c in cs])
        prefixes = [Prefix(env=p.env, task_id=p.task_id, task=p.task, sample=p.sample, info=p.info,
                           observation=f"You see a drawer {t}.",
                           history=[*p.history, Step(observation=p.observation, action=cs[0].action)])
                    for p, cs in zip(prefixes, cands, strict=True)]
    return seen


def test_agent_outputs_are_the_same_with_and_without_the_cache(peaked):
    model, tok = peaked
    cached = HFAgent(model, tok, temperature=0, max_new_tokens=6)
    plain = HFAgent(model, tok, temperature=0, max_new_tokens=6, prefix_cache=0)
    with_cache, without = _episode(cached, 3), _episode(plain, 3)
    for step_a, step_b in zip(with_cache, without, strict=True):
        assert [r[0] for r in step_a] == [r[0] for r in step_b]
        for a, b in zip(step_a, step_b, strict=True):
            assert a[1] == pytest.approx(b[1], abs=1e-4)
    assert all(r[2] == 0 for step in without for r in step)
    assert all(r[2] == 0 for r in with_cache[0])  # the episodes were reset: nothing to reuse at step 0
    assert all(r[2] > 0 for step in with_cache[1:] for r in step)  # later steps reuse the episode's prefix
    assert len(cached.prefix_cache) == 2  # one entry per episode, not per sample
    assert len({r[0] for step in with_cache for r in step}) > 2  # not a degenerate constant output


def test_sampling_with_the_cache_is_reproducible(peaked):
    model, tok = peaked
    runs = [_episode(HFAgent(model, tok, temperature=1.0, seed=3, max_new_tokens=6), 2) for _ in range(2)]
    assert [[r[0] for r in step] for step in runs[0]] == [[r[0] for r in step] for step in runs[1]]


def test_eos_token_ids_include_the_chatml_end_of_turn(peaked):
    model, tok = peaked
    assert tok.convert_tokens_to_ids("<|im_end|>") in eos_token_ids(model, tok)
    with pytest.raises(ValueError, match="prefix_cache"):
        HFAgent(model, tok, prefix_cache=-1)

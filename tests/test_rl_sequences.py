"""Completion log-probabilities (proctor.models.sequences, proctor.models.shared_prefix): padded batches,
shared-prompt passes and one row per prompt under a tree mask give the numbers and gradients of one unpadded
forward per row; DPO's pair log-probs agree between the paths."""

from __future__ import annotations

import pytest
import torch

from proctor.models import load, shared_prefix
from proctor.models.sequences import (
    completion_logprobs,
    length_sorted_chunks,
    row_logprobs,
    sequence_logprobs,
    shared_prompt_logprobs,
)
from proctor.models.shared_prefix import (
    shared_prefix_logprobs,
    shared_prefix_token_logprobs,
    takes_tree_mask,
    tree_mask,
)
from proctor.rl.dpo_step import pair_logprobs
from proctor.rl.pairs import CandidatePair

PROMPTS = [[5, 6, 7, 8, 9, 30, 31], [12, 13], [18, 19, 20, 40]]
COMPLETIONS = [[[10, 11], [50, 51, 52]], [[14, 15, 16, 17], [60]], [[21], [70, 71]]]


@pytest.fixture(scope="module")
def model(tiny_model_dir):
    return load(tiny_model_dir)[0]


def _reference(model, prompt, completion) -> list[float]:
    """log π of each completion token from one unpadded forward pass of prompt + completion."""
    with torch.no_grad():
        full = torch.log_softmax(model(torch.tensor([prompt + completion])).logits[0].float(), -1)
    return [float(full[len(prompt) - 1 + j, tok]) for j, tok in enumerate(completion)]


def test_completion_logprobs_equal_one_unpadded_forward_per_row(model):
    rows = [(p, cs[0]) for p, cs in zip(PROMPTS, COMPLETIONS, strict=True)]
    logps, mask = completion_logprobs(model, rows, pad_id=0)
    logps = logps.detach()
    assert mask.tolist() == [[0, 0, 1, 1], [1, 1, 1, 1], [0, 0, 0, 1]]  # right-aligned completions
    for b, (p, c) in enumerate(rows):
        assert logps[b][mask[b].bool()].tolist() == pytest.approx(_reference(model, p, c), abs=1e-5)
    sums = sequence_logprobs(logps, mask)
    assert float(sums[2]) == pytest.approx(float(logps[2, 3]), abs=1e-6)
    assert float(sequence_logprobs(logps, mask, average=True)[1]) == pytest.approx(float(sums[1]) / 4, abs=1e-6)


def test_length_sorted_chunks_by_hand():
    lengths = {0: 5, 1: 2, 2: 9, 3: 3, 4: 2}
    # ascending lengths 2, 2, 3, 5, 9 (ties keep their order), two rows a pass
    assert length_sorted_chunks(lengths, max_rows=2) == [[1, 4], [3, 0], [2]]
    # three rows a pass and at most 50 mask entries: 3 rows × 3² = 27 fit, 2 × 9² = 162 do not
    assert length_sorted_chunks(lengths, max_rows=3, max_entries=50) == [[1, 4, 3], [0], [2]]
    assert length_sorted_chunks({7: 4}, max_rows=1, max_entries=1) == [[7]]  # a row always gets a pass


def test_row_logprobs_in_sorted_passes_equal_one_padded_batch_values_and_gradients(model):
    rows = [(p, c) for p, cs in zip(PROMPTS, COMPLETIONS, strict=True) for c in cs]
    params = list(model.parameters())
    model.zero_grad()
    sums, lengths = row_logprobs(model, rows, pad_id=0, max_rows=2)  # three passes of two rows
    assert lengths.tolist() == [2.0, 3.0, 4.0, 1.0, 1.0, 2.0]
    for b, (p, c) in enumerate(rows):
        assert float(sums[b].detach()) == pytest.approx(sum(_reference(model, p, c)), abs=1e-5)
    (sums / lengths).sum().backward()
    sorted_grads = [q.grad.clone() for q in params]
    model.zero_grad()
    logps, mask = completion_logprobs(model, rows, pad_id=0)
    sequence_logprobs(logps, mask, average=True).sum().backward()
    for a, q in zip(sorted_grads, params, strict=True):
        assert torch.allclose(a, q.grad, atol=1e-5)
    model.zero_grad()
    with pytest.raises(ValueError, match="row 3: empty completion"):  # named by its place in `rows`, not in a pass
        row_logprobs(model, rows[:3] + [(PROMPTS[0], [])], pad_id=0, max_rows=2)
    with pytest.raises(ValueError, match="no rows"):
        row_logprobs(model, [], pad_id=0)


def test_shared_prompt_logprobs_equal_the_concatenated_rows_values_and_gradients(model):
    model.zero_grad()
    logps, mask, tokens = shared_prompt_logprobs(model, PROMPTS, COMPLETIONS, pad_id=0)
    assert mask.tolist() == [[1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1], [1, 0, 0, 0], [1, 0, 0, 0], [1, 1, 0, 0]]
    assert tokens == 2 * (7 + 2 + 4) + (2 + 3 + 4 + 1 + 1 + 2)  # each prompt counted once per completion
    rows = [(p, c) for p, cs in zip(PROMPTS, COMPLETIONS, strict=True) for c in cs]
    for b, (p, c) in enumerate(rows):
        assert logps[b][mask[b].bool()].tolist() == pytest.approx(_reference(model, p, c), abs=1e-5)
    sequence_logprobs(logps, mask).sum().backward()
    shared_grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    lp, m = completion_logprobs(model, rows, pad_id=0)
    sequence_logprobs(lp, m).sum().backward()
    for n, p in model.named_parameters():
        assert torch.allclose(shared_grads[n], p.grad, atol=1e-5), n
    model.zero_grad()


def test_pair_logprobs_paths_agree(model):
    pairs = [CandidatePair(p, cs[0], cs[1], (True, True), "", "", (1.0, 0.0))
             for p, cs in zip(PROMPTS, COMPLETIONS, strict=True)]
    with torch.no_grad():
        c1, r1, t1 = pair_logprobs(model, pairs, 0, shared_prompt=True)
        c2, r2, t2 = pair_logprobs(model, pairs, 0, shared_prompt=False)
    assert c1.tolist() == pytest.approx(c2.tolist(), abs=1e-5) and r1.tolist() == pytest.approx(r2.tolist(), abs=1e-5)
    assert t1 == t2 == sum(p.tokens for p in pairs)
    with pytest.raises(ValueError, match="same number"):
        shared_prompt_logprobs(model, PROMPTS[:2], [[[1]], [[1], [2]]], 0)


# -- a prompt and all its completions in one row under a tree mask (proctor.models.shared_prefix) --------
#: (prompt index, completion): interleaved prompts, one- and many-token completions; prompt 3 has none
TREE_PROMPTS = [[5, 6, 7, 8, 9, 30, 31], [12, 13], [18, 19, 20, 40], [22, 23]]
TREE_COMPLETIONS = [(1, [14, 15, 16, 17]), (0, [10, 11]), (2, [21]), (0, [50, 51, 52]), (1, [60]), (2, [70, 71])]


def test_tree_mask_by_hand() -> None:
    # one pad, a 2-token prompt, completion 1 (1 token), completion 2 (2 tokens)
    seen = tree_mask(torch.tensor([[-1, 0, 0, 1, 2, 2]]), torch.float32)[0, 0] == 0
    assert seen.int().tolist() == [
        [1, 0, 0, 0, 0, 0],  # the pad sees only itself
        [0, 1, 0, 0, 0, 0],  # prompt: causal
        [0, 1, 1, 0, 0, 0],
        [0, 1, 1, 1, 0, 0],  # completion 1: the prompt and itself
        [0, 1, 1, 0, 1, 0],  # completion 2: the prompt, not completion 1
        [0, 1, 1, 0, 1, 1],
    ]
    assert float(tree_mask(torch.tensor([[0, 1]]), torch.float32)[0, 0, 0, 1]) == torch.finfo(torch.float32).min


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_logprobs_equal_one_forward_per_completion(model, attention) -> None:
    before = model.config._attn_implementation
    model.config._attn_implementation = attention
    try:
        assert takes_tree_mask(model)
        rows = shared_prefix_logprobs(model, TREE_PROMPTS, TREE_COMPLETIONS, pad_id=0)
    finally:
        model.config._attn_implementation = before
    assert len(rows) == len(TREE_COMPLETIONS)
    for (i, c), row in zip(TREE_COMPLETIONS, rows, strict=True):
        assert row == pytest.approx(_reference(model, TREE_PROMPTS[i], c), abs=1e-5)


def test_gradients_equal_those_of_one_row_per_completion(model) -> None:
    """Σ over completions of their summed log-probs: the same gradient as prompt + completion rows."""
    params = [p for p in model.parameters() if p.requires_grad]
    model.zero_grad()
    rows = shared_prefix_token_logprobs(model, TREE_PROMPTS, TREE_COMPLETIONS, pad_id=0)
    torch.stack([row.sum() for row in rows]).sum().backward()
    tree = [p.grad.clone() for p in params]
    model.zero_grad()
    logps, mask = completion_logprobs(model, [(TREE_PROMPTS[i], c) for i, c in TREE_COMPLETIONS], pad_id=0)
    sequence_logprobs(logps, mask).sum().backward()
    for a, p in zip(tree, params, strict=True):
        assert torch.allclose(a, p.grad, atol=1e-5)
    model.zero_grad()


def test_chunks_give_the_same_logprobs(model, monkeypatch) -> None:
    whole = shared_prefix_logprobs(model, TREE_PROMPTS, TREE_COMPLETIONS, pad_id=0)
    monkeypatch.setattr(shared_prefix, "MAX_MASK_ENTRIES", 1)  # one prompt per forward pass
    chunked = shared_prefix_logprobs(model, TREE_PROMPTS, TREE_COMPLETIONS, pad_id=0)
    assert chunked == [pytest.approx(r, abs=1e-6) for r in whole]


def test_flash_attention_and_empty_rows_are_refused(model) -> None:
    before = model.config._attn_implementation
    model.config._attn_implementation = "flash_attention_2"
    try:
        assert not takes_tree_mask(model)
    finally:
        model.config._attn_implementation = before
    with pytest.raises(ValueError, match="empty prompt or completion"):
        shared_prefix_logprobs(model, TREE_PROMPTS, [(0, [])], pad_id=0)

"""Several completions of one prompt scored from one row under a 4D mask: the mask by hand, and the log-probs
equal one unpadded forward pass per (prompt, completion), in any order, in chunks, with sdpa and eager."""

from __future__ import annotations

import pytest
import torch

from proctor.models import load, shared_prefix
from proctor.models.sequences import completion_logprobs, sequence_logprobs
from proctor.models.shared_prefix import (
    shared_prefix_logprobs,
    shared_prefix_token_logprobs,
    takes_tree_mask,
    tree_mask,
)

PROMPTS = [[5, 6, 7, 8, 9, 30, 31], [12, 13], [18, 19, 20, 40], [22, 23]]
#: (prompt index, completion): interleaved prompts, one- and many-token completions; prompt 3 has none
COMPLETIONS = [(1, [14, 15, 16, 17]), (0, [10, 11]), (2, [21]), (0, [50, 51, 52]), (1, [60]), (2, [70, 71])]


@pytest.fixture(scope="module")
def model(tiny_model_dir):
    return load(tiny_model_dir)[0]


def _reference(model, prompt, completion) -> list[float]:
    with torch.no_grad():
        full = torch.log_softmax(model(torch.tensor([prompt + completion])).logits[0].float(), -1)
    return [float(full[len(prompt) - 1 + j, tok]) for j, tok in enumerate(completion)]


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
        rows = shared_prefix_logprobs(model, PROMPTS, COMPLETIONS, pad_id=0)
    finally:
        model.config._attn_implementation = before
    assert len(rows) == len(COMPLETIONS)
    for (i, c), row in zip(COMPLETIONS, rows, strict=True):
        assert row == pytest.approx(_reference(model, PROMPTS[i], c), abs=1e-5)


def test_gradients_equal_those_of_one_row_per_completion(model) -> None:
    """Σ over completions of their summed log-probs: the same gradient as prompt + completion rows."""
    params = [p for p in model.parameters() if p.requires_grad]
    model.zero_grad()
    torch.stack([row.sum() for row in shared_prefix_token_logprobs(model, PROMPTS, COMPLETIONS, pad_id=0)]).sum().backward()
    tree = [p.grad.clone() for p in params]
    model.zero_grad()
    logps, mask = completion_logprobs(model, [(PROMPTS[i], c) for i, c in COMPLETIONS], pad_id=0)
    sequence_logprobs(logps, mask).sum().backward()
    for a, p in zip(tree, params, strict=True):
        assert torch.allclose(a, p.grad, atol=1e-5)
    model.zero_grad()


def test_chunks_give_the_same_logprobs(model, monkeypatch) -> None:
    whole = shared_prefix_logprobs(model, PROMPTS, COMPLETIONS, pad_id=0)
    monkeypatch.setattr(shared_prefix, "MAX_MASK_ENTRIES", 1)  # one prompt per forward pass
    assert shared_prefix_logprobs(model, PROMPTS, COMPLETIONS, pad_id=0) == [pytest.approx(r, abs=1e-6) for r in whole]


def test_flash_attention_and_empty_rows_are_refused(model) -> None:
    before = model.config._attn_implementation
    model.config._attn_implementation = "flash_attention_2"
    try:
        assert not takes_tree_mask(model)
    finally:
        model.config._attn_implementation = before
    with pytest.raises(ValueError, match="empty prompt or completion"):
        shared_prefix_logprobs(model, PROMPTS, [(0, [])], pad_id=0)

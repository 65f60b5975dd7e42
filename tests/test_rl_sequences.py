"""Completion log-probabilities (proctor.models.sequences): padded batches and shared-prompt passes give the numbers
and gradients of one unpadded forward per row; DPO's pair log-probs agree between the two paths."""

from __future__ import annotations

import pytest
import torch

from proctor.models import load
from proctor.models.sequences import completion_logprobs, sequence_logprobs, shared_prompt_logprobs
from proctor.rl.dpo_losses import sigmoid_loss
from proctor.rl.dpo_step import dpo_step, pair_logprobs
from proctor.rl.pairs import PreferencePair

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
    pairs = [PreferencePair(p, cs[0], cs[1], (True, True), "", "", (1.0, 0.0))
             for p, cs in zip(PROMPTS, COMPLETIONS, strict=True)]
    with torch.no_grad():
        c1, r1, t1 = pair_logprobs(model, pairs, 0, shared_prompt=True)
        c2, r2, t2 = pair_logprobs(model, pairs, 0, shared_prompt=False)
    assert c1.tolist() == pytest.approx(c2.tolist(), abs=1e-5) and r1.tolist() == pytest.approx(r2.tolist(), abs=1e-5)
    assert t1 == t2 == sum(p.tokens for p in pairs)
    with pytest.raises(ValueError, match="same number"):
        shared_prompt_logprobs(model, PROMPTS[:2], [[[1]], [[1], [2]]], 0)


@pytest.mark.parametrize("average", [False, True])
def test_dpo_step_adds_rpos_chosen_nll(model, average):
    """loss = mean DPO loss + α·mean(−log π(y_c)/|y_c|), with the numbers taken before the update."""
    pairs = [PreferencePair(p, cs[0], cs[1], (True, True), "", "", (1.0, 0.0))
             for p, cs in zip(PROMPTS, COMPLETIONS, strict=True)]
    with torch.no_grad():
        pc, pr, _ = pair_logprobs(model, pairs, 0, average)
    ref_c, ref_r = pc - 0.5, pr + 0.25
    sums = pc * torch.tensor([2.0, 4.0, 1.0]) if average else pc  # chosen lengths 2, 4, 1
    nll = float((-sums / torch.tensor([2.0, 4.0, 1.0])).mean())
    dpo = float(sigmoid_loss(pc, pr, ref_c, ref_r, beta=0.1).mean())
    state = {k: v.clone() for k, v in model.state_dict().items()}
    sgd = torch.optim.SGD(model.parameters(), lr=0.0)
    stats = dpo_step(model, sgd, pairs, ref_c, ref_r, pad_id=0, average=average, rpo_alpha=2.0)
    assert stats["nll"] == pytest.approx(nll, abs=1e-5)
    assert stats["loss"] == pytest.approx(dpo + 2.0 * nll, abs=1e-5)
    assert dpo_step(model, sgd, pairs, ref_c, ref_r, pad_id=0, average=average)["loss"] == pytest.approx(dpo, abs=1e-5)
    model.load_state_dict(state)
    model.zero_grad()

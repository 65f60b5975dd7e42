"""proctor.prm.losses against hand-computed values."""

from __future__ import annotations

import math

import pytest
import torch

from proctor.prm import losses

LN3 = math.log(3.0)


def t(*x):
    return torch.tensor(x, dtype=torch.float)


def test_soft_bce():
    # BCE(0, 0.5) = ln 2; BCE(ln 3, 1) = -ln σ(ln 3) = -ln 3/4
    got = losses.soft_bce_loss(t(0.0, LN3), t(0.5, 1.0))
    assert got.item() == pytest.approx((math.log(2) - math.log(0.75)) / 2, abs=1e-6)


def test_mse():
    assert losses.mse_loss(t(1.0, 2.0), t(0.0, 4.0)).item() == pytest.approx(2.5)


def test_bradley_terry():
    # -ln σ(1) = softplus(-1) = 0.3132617; -ln σ(0) = ln 2
    got = losses.bradley_terry_loss(t(1.0, 0.0), t(0.0, 0.0))
    assert got.item() == pytest.approx((0.3132617 + math.log(2)) / 2, abs=1e-6)


def test_progress_sum_only_supervises_the_sum():
    values = torch.tensor([[0.2, 9.0, 0.3], [0.5, 7.0, 0.0]])
    mask = torch.tensor([[1, 0, 1], [1, 0, 0]], dtype=torch.bool)
    # sums 0.5 and 0.5 against outcomes 1 and 0: (0.25 + 0.25) / 2
    assert losses.progress_sum_loss(values, mask, t(1.0, 0.0)).item() == pytest.approx(0.25)
    values = torch.tensor([[0.9, 0.0, 0.1]])
    assert losses.progress_sum_loss(values, mask[:1], t(1.0)).item() == pytest.approx(0.0)


def test_cross_entropy_hard_and_soft():
    logits = torch.tensor([[0.0, LN3], [0.0, LN3]])
    # p(correct) = 3/4: -ln 3/4 for label 1, -ln 1/4 for label 0
    assert losses.cross_entropy_loss(logits, torch.tensor([True, False])).item() == pytest.approx(
        (-math.log(0.75) - math.log(0.25)) / 2, abs=1e-6
    )
    assert losses.soft_cross_entropy_loss(logits[:1], t(0.5)).item() == pytest.approx(
        0.5 * (-math.log(0.75) - math.log(0.25)), abs=1e-6
    )
    # soft CE with hard targets equals hard CE
    assert losses.soft_cross_entropy_loss(logits, t(1.0, 0.0)).item() == pytest.approx(
        losses.cross_entropy_loss(logits, t(1.0, 0.0)).item(), abs=1e-6
    )


def test_td_difference_bce():
    # r̂ = 2 - 0.5·1 = 1.5 (non-terminal, label 1) and r̂ = 1 (terminal, q_next ignored, label 0)
    got = losses.td_difference_bce_loss(
        t(2.0, 1.0), t(1.0, 5.0), torch.tensor([False, True]), t(1.0, 0.0), 0.5
    )
    expected = (math.log1p(math.exp(-1.5)) + math.log1p(math.exp(1.0))) / 2
    assert got.item() == pytest.approx(expected, abs=1e-6)


def test_losses_have_gradients():
    z = t(0.3, -0.2).requires_grad_()
    losses.soft_bce_loss(z, t(1.0, 0.0)).backward()
    # d/dz mean BCE = (σ(z) - y) / N
    assert z.grad.tolist() == pytest.approx(
        [(torch.sigmoid(t(0.3)).item() - 1) / 2, torch.sigmoid(t(-0.2)).item() / 2], abs=1e-6
    )

"""DPO and IPO losses (proctor.rl.dpo_losses); numbers worked out by hand."""

from __future__ import annotations

import math

import pytest
import torch

from proctor.rl.dpo_losses import (
    DPO_LOSSES,
    chosen_nll,
    implicit_rewards,
    ipo_loss,
    log_ratio_margin,
    rebel_loss,
    sigmoid_loss,
)

# two pairs: log π_c, log π_r, log π_ref,c, log π_ref,r
PC = torch.tensor([-1.0, -3.0])
PR = torch.tensor([-2.0, -1.0])
RC = torch.tensor([-1.5, -2.0])
RR = torch.tensor([-1.5, -2.0])


def test_margin():
    # pair 0: (−1 + 2) − (−1.5 + 1.5) = 1; pair 1: (−3 + 1) − 0 = −2
    assert log_ratio_margin(PC, PR, RC, RR).tolist() == [1.0, -2.0]


def test_sigmoid_hand_computed():
    # β = 0.5: z = [0.5, −1]; −log σ(z) = log(1 + e^{−z})
    loss = sigmoid_loss(PC, PR, RC, RR, beta=0.5)
    assert loss.tolist() == pytest.approx([math.log(1 + math.exp(-0.5)), math.log(1 + math.exp(1.0))])
    assert loss.tolist() == pytest.approx([0.474077, 1.313262], abs=1e-6)


def test_sigmoid_label_smoothing_hand_computed():
    # ε = 0.1, z = 0.5: 0.9·log(1 + e^{−0.5}) + 0.1·log(1 + e^{0.5}) = 0.9·0.474077 + 0.1·0.974077 = 0.524077
    loss = sigmoid_loss(PC[:1], PR[:1], RC[:1], RR[:1], beta=0.5, label_smoothing=0.1)
    assert float(loss) == pytest.approx(0.524077, abs=1e-6)


def test_ipo_hand_computed():
    # β = 0.5: target 1/(2β) = 1: (1 − 1)² = 0, (−2 − 1)² = 9; β = 0.25: target 2: (1 − 2)² = 1, (−4)² = 16
    assert ipo_loss(PC, PR, RC, RR, beta=0.5).tolist() == [0.0, 9.0]
    assert ipo_loss(PC, PR, RC, RR, beta=0.25).tolist() == [1.0, 16.0]


def test_rebel_hand_computed():
    # h = [1, −2]; Δr = [0.3, 0.2]; β = 0.5: (0.5 − 0.3)² = 0.04, (−1 − 0.2)² = 1.44
    loss = rebel_loss(PC, PR, RC, RR, beta=0.5, reward_margin=torch.tensor([0.3, 0.2]))
    assert loss.tolist() == pytest.approx([0.04, 1.44])
    with pytest.raises(ValueError, match="needs each pair's reward margin"):
        rebel_loss(PC, PR, RC, RR, beta=0.5)


def test_implicit_rewards():
    # β·(log π − log π_ref): 0.5·(−1 + 1.5) = 0.25; 0.5·(−3 + 2) = −0.5
    assert implicit_rewards(PC, RC, 0.5).tolist() == [0.25, -0.5]


def test_chosen_nll_hand_computed():
    # RPO's term −log π(y_c)/|y_c|: −(−1)/2 = 0.5, −(−3)/4 = 0.75
    assert chosen_nll(PC, torch.tensor([2, 4])).tolist() == [0.5, 0.75]
    with pytest.raises(ValueError, match="at least one token"):
        chosen_nll(PC, torch.tensor([2, 0]))


def test_gradient_raises_chosen_and_lowers_rejected():
    pc, pr = PC.clone().requires_grad_(), PR.clone().requires_grad_()
    for name in DPO_LOSSES.names():
        pc.grad = pr.grad = None
        DPO_LOSSES[name](pc, pr, RC, RR, beta=0.1, reward_margin=torch.tensor([1.0, 1.0])).sum().backward()
        assert (pc.grad < 0).all() and (pr.grad > 0).all(), name


def test_registry_and_bad_input():
    assert DPO_LOSSES.names() == ["ipo", "rebel", "sigmoid"]
    assert DPO_LOSSES["sigmoid"] is sigmoid_loss
    with pytest.raises(KeyError, match="unknown DPO loss 'hinge'; known: ipo, rebel, sigmoid"):
        DPO_LOSSES["hinge"]
    with pytest.raises(ValueError, match="beta must be > 0"):
        sigmoid_loss(PC, PR, RC, RR, beta=0.0)
    with pytest.raises(ValueError, match="no label smoothing"):
        ipo_loss(PC, PR, RC, RR, beta=0.1, label_smoothing=0.1)

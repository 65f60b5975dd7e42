"""PPO clipped surrogate, REINFORCE, value loss and KL estimators (proctor.rl.policy_losses); numbers by hand."""

from __future__ import annotations

import math

import pytest
import torch

from proctor.rl.policy_losses import (
    KL_PENALTIES,
    POLICY_LOSSES,
    aggregate_loss,
    masked_mean,
    pg_loss,
    ppo_clip_loss,
    value_loss,
)


def test_ppo_clip_hand_computed():
    # ratios 1.5, 1.5, 0.5, 0.5 with A = 1, −1, 1, −1 and ε = 0.2:
    # −min(ρA, clip(ρ)A) = −min(1.5, 1.2) = −1.2; −min(−1.5, −1.2) = 1.5; −min(0.5, 0.8) = −0.5; −min(−0.5, −0.8) = 0.8
    old = torch.tensor([[-1.0, -1.0, -2.0, -2.0]])
    new = old + torch.log(torch.tensor([[1.5, 1.5, 0.5, 0.5]]))
    adv = torch.tensor([[1.0, -1.0, 1.0, -1.0]])
    mask = torch.ones(1, 4)
    loss, stats = ppo_clip_loss(new, old, adv, mask, clip_low=0.2)
    assert float(loss) == pytest.approx((-1.2 + 1.5 - 0.5 + 0.8) / 4)
    assert stats["clipfrac"] == pytest.approx(0.5)  # tokens 0 and 3: the clipped term is the smaller one
    assert stats["ratio"] == pytest.approx(1.0)
    # masking the two clipped tokens leaves (1.5 − 0.5) / 2
    loss, _ = ppo_clip_loss(new, old, adv, torch.tensor([[0.0, 1.0, 1.0, 0.0]]))
    assert float(loss) == pytest.approx(0.5)
    # clip-higher: ε_high = 0.6 lets ratio 1.5 through for A = 1: −1.5 instead of −1.2
    loss, _ = ppo_clip_loss(new[:, :1], old[:, :1], adv[:, :1], mask[:, :1], clip_low=0.2, clip_high=0.6)
    assert float(loss) == pytest.approx(-1.5)


def test_ppo_gradient_is_zero_where_clipped():
    old = torch.zeros(1, 2)
    new = torch.log(torch.tensor([[1.5, 1.1]])).requires_grad_()
    loss, _ = ppo_clip_loss(new, old, torch.ones(1, 2), torch.ones(1, 2))
    loss.backward()
    # token 0 is clipped (ρ = 1.5 > 1.2, A > 0): no gradient; token 1: d(−ρ/2)/d log ρ = −ρ/2 = −0.55
    assert new.grad.tolist()[0] == pytest.approx([0.0, -0.55])


def test_aggregations_hand_computed():
    loss = torch.tensor([[1.0, 2.0, 3.0], [4.0, 0.0, 0.0], [9.0, 9.0, 9.0]])
    mask = torch.tensor([[1, 1, 1], [1, 0, 0], [0, 0, 0]])
    assert float(aggregate_loss(loss, mask, "token-mean")) == pytest.approx(10 / 4)
    assert float(aggregate_loss(loss, mask, "seq-mean-token-mean")) == pytest.approx((2 + 4) / 2)
    assert float(aggregate_loss(loss, mask, "seq-mean-token-sum")) == pytest.approx((6 + 4) / 2)
    assert float(masked_mean(loss, torch.zeros(3, 3))) == 0.0
    with pytest.raises(ValueError, match="unknown aggregation"):
        aggregate_loss(loss, mask, "sum")


def test_pg_loss():
    logp = torch.tensor([[-1.0, -2.0]], requires_grad=True)
    loss, _ = pg_loss(logp, torch.tensor([[2.0, -1.0]]), torch.ones(1, 2))
    assert float(loss.detach()) == pytest.approx(-(2 * -1.0 + -1 * -2.0) / 2)  # = 0
    loss.backward()
    assert logp.grad.tolist() == [[-1.0, 0.5]]


def test_value_loss_hand_computed():
    v, r, old = torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 0.0]]), torch.tensor([[0.5, 0.0]])
    m = torch.ones(1, 2)
    assert float(value_loss(v, r, m)) == pytest.approx(0.5 * (1.0 + 0.0) / 2)
    # clip 0.2: clipped V = 0.5 + 0.2 = 0.7, max(1², 0.7²) = 1 (the pessimistic term)
    assert float(value_loss(v, r, m, old_values=old, clip=0.2)) == pytest.approx(0.25)
    # V = 0.6 from old 1.0 toward R = 0: clipped 0.8, max(0.36, 0.64) = 0.64
    assert float(value_loss(torch.tensor([[0.6]]), torch.zeros(1, 1), torch.ones(1, 1),
                            old_values=torch.ones(1, 1), clip=0.2)) == pytest.approx(0.32)
    with pytest.raises(ValueError, match="needs old_values"):
        value_loss(v, r, m, clip=0.2)


def test_kl_estimators_hand_computed():
    # log π = −1, log π_ref = −1.5: x = log π_ref − log π = −0.5
    lp, ref = torch.tensor([-1.0]), torch.tensor([-1.5])
    assert float(KL_PENALTIES["k1"](lp, ref)) == pytest.approx(0.5)
    assert float(KL_PENALTIES["k2"](lp, ref)) == pytest.approx(0.125)
    assert float(KL_PENALTIES["k3"](lp, ref)) == pytest.approx(math.exp(-0.5) + 0.5 - 1)
    assert float(KL_PENALTIES["abs"](lp, ref)) == pytest.approx(0.5)
    # k3 is unbiased: E_π[k3] = KL(π‖π_ref); two-outcome check with π = (0.8, 0.2), π_ref = (0.5, 0.5)
    p, q = torch.tensor([0.8, 0.2]), torch.tensor([0.5, 0.5])
    k3 = KL_PENALTIES["k3"](p.log(), q.log())
    assert float((p * k3).sum()) == pytest.approx(float((p * (p / q).log()).sum()))


def test_registries():
    assert POLICY_LOSSES.names() == ["pg", "ppo_clip"]
    assert KL_PENALTIES.names() == ["abs", "k1", "k2", "k3"]
    with pytest.raises(ValueError, match="shapes differ"):
        ppo_clip_loss(torch.zeros(1, 2), torch.zeros(1, 3), torch.zeros(1, 2), torch.ones(1, 2))

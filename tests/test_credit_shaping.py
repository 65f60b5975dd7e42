"""Shaped targets with a value function on the ±1 scale (docs/methods.md §4); numbers worked out by hand."""

from __future__ import annotations

import math

import pytest

from credit_fixtures import toy_rollouts
from proctor.credit import CreditError, Sources, run_method
from proctor.credit.shaping import shaped_returns, soft_labels


def _by_step(records):
    return {(r.trajectory_id, r.step): r for r in records}


def test_shaped_returns_formula():
    # y_t = γ^{T−1−t} R̃ + 𝟙[t<T−1](γ V_{t+1} − V_t), γ = 0.5, R̃ = 1, V = [0.2, 0.6, −0.4]
    assert shaped_returns(1.0, [0.2, 0.6, -0.4], 0.5) == pytest.approx(
        [0.25 + 0.3 - 0.2, 0.5 - 0.2 - 0.6, 1.0])


def test_shaped_with_mc_value_hand_computed():
    # MC V (γ = 0.5): V(s0) = −1/3, V(s1) = 0.
    # τ1: y0 = 0.5 + (0.5·0 + 1/3) = 5/6, y1 = 1; τ2: y0 = −0.5 + 1/3 = −1/6, y1 = −1; τ3: y0 = −1.
    # per (s,a): (s0,x) = (5/6 − 1/6)/2 = 1/3, (s0,w) = −1, (s1,y) = 1, (s1,z) = −1.
    recs = _by_step(run_method("shaped", Sources(toy_rollouts()), {"gamma": 0.5}).records)
    assert recs[("tau1", 0)].target == pytest.approx(1 / 3) and recs[("tau1", 0)].visits == 2
    assert recs[("tau1", 0)].extra["y_step"] == pytest.approx(5 / 6)
    assert recs[("tau2", 0)].extra["y_step"] == pytest.approx(-1 / 6)
    assert recs[("tau3", 0)].target == pytest.approx(-1.0)
    assert recs[("tau1", 1)].target == pytest.approx(1.0)


def test_soft_label_hand_computed():
    # ȳ over distinct (s,a): [1/3, −1, 1, −1]; m = −1/6; quartiles (linear) −1 and 1/2 → IQR 1.5, k = 3/1.5 = 2.
    recs = _by_step(run_method("shaped", Sources(toy_rollouts()), {"gamma": 0.5, "soft_label": True}).records)
    sig = lambda z: 1 / (1 + math.exp(-z))
    assert recs[("tau1", 0)].target == pytest.approx(sig(1.0))
    assert recs[("tau3", 0)].target == pytest.approx(sig(-5 / 3))
    assert recs[("tau1", 1)].target == pytest.approx(sig(7 / 3))
    assert soft_labels([0.4, 0.4]) == pytest.approx([0.5, 0.5])  # IQR 0 → k = 1


def test_value_given_as_callable_and_scale():
    # V ≡ 0.5 on the [0,1] scale is 0 on the ±1 scale: shaping vanishes, y = the MC return.
    value = lambda t: [0.5] * len(t.steps)
    recs = _by_step(run_method("shaped", Sources(toy_rollouts(), value=value),
                               {"gamma": 0.5, "value_scale": "unit"}).records)
    assert recs[("tau1", 0)].target == pytest.approx(0.0)  # mean(0.5, −0.5)
    pm1 = _by_step(run_method("shaped", Sources(toy_rollouts(), value=value), {"gamma": 0.5}).records)
    # V ≡ 0.5 on ±1: y0 of τ1 = 0.5 + (0.25 − 0.5) = 0.25, τ2: −0.5 − 0.25 = −0.75 → mean −0.25
    assert pm1[("tau1", 0)].target == pytest.approx(-0.25)


def test_value_of_wrong_length_names_trajectory():
    with pytest.raises(CreditError, match=r"'tau1', field 'value'"):
        run_method("shaped", Sources(toy_rollouts(), value=lambda t: [0.0]))

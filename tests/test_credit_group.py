"""GRPO, leave-one-out and GiGPO advantages (docs/methods.md §3); numbers worked out by hand."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from credit_fixtures import toy_rollouts, traj
from proctor.credit import CreditError, Sources, run_method
from proctor.credit.group import (
    GiGPOConfig,
    anchor_ids,
    gigpo_group,
    gigpo_step_advantages,
    grpo_advantages,
    loo_advantages,
    returns_to_go,
)
from proctor.credit.outcome import OutcomeConfig, scored


def _by_step(records):
    return {(r.trajectory_id, r.step): r for r in records}


def test_grpo_hand_computed():
    # R = [1, 0, 0]: mean 1/3, sample std sqrt(((2/3)² + 2·(1/3)²)/2) = sqrt(1/3).
    s = math.sqrt(1 / 3)
    assert grpo_advantages([1, 0, 0]) == pytest.approx([(2 / 3) / s, -(1 / 3) / s, -(1 / 3) / s])
    assert grpo_advantages([1, 0, 0], normalize=False) == pytest.approx([2 / 3, -1 / 3, -1 / 3])
    assert grpo_advantages([1, 1, 1]) == [0.0, 0.0, 0.0]
    assert grpo_advantages([0.7]) == [0.0]
    recs = _by_step(run_method("grpo", Sources(toy_rollouts())).records)
    assert recs[("tau1", 1)].target == pytest.approx(2 / math.sqrt(3))  # = (2/3)/sqrt(1/3)
    assert recs[("tau3", 0)].visits == 3


def test_loo_hand_computed():
    # b1 = mean(0, 0) = 0, b2 = b3 = mean(1, 0) = 0.5.
    assert loo_advantages([1, 0, 0]) == pytest.approx([1.0, -0.5, -0.5])
    recs = _by_step(run_method("loo", Sources(toy_rollouts())).records)
    assert recs[("tau2", 1)].target == pytest.approx(-0.5)
    with pytest.raises(CreditError, match=r"'tau3', field 'task_id'.*leave-one-out"):
        run_method("loo", Sources([toy_rollouts()[2]]))


def test_returns_to_go():
    assert returns_to_go([0, 0, 1], 0.5) == pytest.approx([0.25, 0.5, 1.0])
    assert returns_to_go([1, -1, 2], 1.0) == pytest.approx([2.0, 1.0, 2.0])


def test_gigpo_hand_computed_unnormalised():
    # γ = 0.5, outcome rewards at the last step: R_t τ1 [0.5, 1], τ2 [0, 0], τ3 [0].
    # anchor o0: {0.5, 0, 0} mean 1/6; anchor o1: {1, 0} mean 1/2.
    # A^S: τ1 [1/3, 1/2], τ2 [−1/6, −1/2], τ3 [−1/6]; A^E (F = 1): [2/3, −1/3, −1/3].
    recs = _by_step(run_method("gigpo", Sources(toy_rollouts()),
                               {"gamma": 0.5, "normalize": False, "step_reward": "outcome"}).records)
    expected = {("tau1", 0): 1.0, ("tau1", 1): 7 / 6, ("tau2", 0): -0.5, ("tau2", 1): -5 / 6, ("tau3", 0): -0.5}
    for k, v in expected.items():
        assert recs[k].target == pytest.approx(v)
    assert recs[("tau1", 1)].extra["step"] == pytest.approx(0.5)
    assert recs[("tau1", 0)].visits == 3 and recs[("tau1", 1)].visits == 2


def test_gigpo_omega_and_normalised_step():
    # ω = 2, normalised: anchor o1 values {1, 0}: mean 1/2, sample std sqrt(1/2) → A^S = ±(1/2)/sqrt(1/2).
    recs = _by_step(run_method("gigpo", Sources(toy_rollouts()),
                               {"gamma": 0.5, "omega": 2.0, "step_reward": "outcome"}).records)
    a_s = 0.5 / math.sqrt(0.5)
    a_e = (2 / 3) / math.sqrt(1 / 3)
    assert recs[("tau1", 1)].target == pytest.approx(a_e + 2 * a_s)


def test_gigpo_env_rewards():
    t1 = traj("a", [("o", "x"), ("p", "y")], True, sample=0)
    t2 = traj("b", [("o", "x"), ("p", "z")], False, sample=1)
    t1.steps[0].reward, t1.steps[1].reward = 1.0, 2.0
    items, _ = scored([t1, t2], OutcomeConfig())
    recs = _by_step(gigpo_group(items, GiGPOConfig(step_reward="env", gamma=1.0, normalize=False)))
    # R_t: a [3, 2], b [0, 0]; anchor o {3, 0} → ±1.5; anchor p {2, 0} → ±1; A^E = ±0.5
    assert recs[("a", 0)].target == pytest.approx(2.0) and recs[("b", 1)].target == pytest.approx(-1.5)


def test_gigpo_default_step_reward_is_the_papers_env_reward():
    """GiGPO (arXiv 2505.10978) defines R_t from the env's step rewards; twenty_questions gives −1 per turn."""
    assert GiGPOConfig().step_reward == "env"
    t1 = traj("a", [("o", "x"), ("p", "y")], True, sample=0)
    t2 = traj("b", [("o", "x"), ("q", "z"), ("p", "y")], False, sample=1)
    for t in (t1, t2):
        for s in t.steps:
            s.reward = -1.0
    t1.steps[-1].reward = 0.0
    items, _ = scored([t1, t2], OutcomeConfig())
    recs = _by_step(gigpo_group(items, GiGPOConfig(gamma=1.0, normalize=False)))
    # R_t: a [−1, 0], b [−3, −2, −1]; anchor o {−1, −3} → ±1; anchor p {0, −1} → ±0.5; A^E = ±0.5
    assert recs[("a", 0)].extra["return_to_go"] == -1.0 and recs[("b", 0)].extra["return_to_go"] == -3.0
    assert recs[("a", 0)].target == pytest.approx(1.5) and recs[("b", 2)].target == pytest.approx(-1.0)
    assert recs[("b", 1)].target == pytest.approx(-0.5)  # singleton anchor q: A^S = 0


def test_similarity_anchors():
    obs = ["You are in the kitchen.", "You are in the kitchen!", "A garden."]
    assert anchor_ids(obs) == obs
    ids = anchor_ids(obs, similarity=0.9)
    assert ids[0] == ids[1] != ids[2]


def test_mixed_tasks_in_one_group_is_an_error():
    a = traj("a", [("o", "x")], True, task_id="t1")
    b = traj("b", [("o", "x")], False, task_id="t2", sample=1)
    items, _ = scored([a, b], OutcomeConfig())
    with pytest.raises(CreditError, match=r"'b', field 'task_id'.*mixed tasks"):
        gigpo_group(items, GiGPOConfig())


@settings(max_examples=80, deadline=None)
@given(st.lists(st.lists(st.tuples(st.sampled_from(["a", "b", "c", "d"]), st.floats(-5, 5)), min_size=1,
                         max_size=5), min_size=1, max_size=6))
def test_gigpo_step_advantage_properties(rollouts):
    anchors = [[a for a, _ in r] for r in rollouts]
    returns = [[g for _, g in r] for r in rollouts]
    adv, size = gigpo_step_advantages(returns, anchors, normalize=False)
    sums: dict[str, float] = {}
    for row_a, row_adv, row_n in zip(anchors, adv, size, strict=True):
        for a, v, n in zip(row_a, row_adv, row_n, strict=True):
            if n == 1:
                assert v == 0.0
            sums[a] = sums.get(a, 0.0) + v
    for total in sums.values():
        assert total == pytest.approx(0.0, abs=1e-9)

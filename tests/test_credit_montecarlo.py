"""Monte-Carlo Q/V targets, keys and outcome handling (docs/methods.md §1); numbers worked out by hand."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from credit_fixtures import toy_rollouts, traj
from proctor.credit import CreditError, Sources, run_method
from proctor.credit.group import returns_to_go
from proctor.credit.keys import prefix_keys
from proctor.credit.montecarlo import MCConfig, mc_q, mc_v, outcome_returns
from proctor.credit.outcome import OutcomeConfig, outcome, scored


def _by_step(records):
    return {(r.trajectory_id, r.step): r for r in records}


def test_mc_q_to_go_hand_computed():
    # γ = 0.5, R̃ = +1, −1, −1. G (to go): τ1 [0.5, 1], τ2 [−0.5, −1], τ3 [−1].
    # Q(s0,x) = (0.5 − 0.5)/2 = 0 → 0.5 (2 visits); Q(s0,w) = −1 → 0; Q(s1,y) = 1 → 1; Q(s1,z) = −1 → 0.
    recs = _by_step(run_method("mc-q", Sources(toy_rollouts()), {"gamma": 0.5}).records)
    expected = {("tau1", 0): (0.5, 2, 0.0), ("tau2", 0): (0.5, 2, 0.0), ("tau3", 0): (0.0, 1, -1.0),
                ("tau1", 1): (1.0, 1, 1.0), ("tau2", 1): (0.0, 1, -1.0)}
    assert set(recs) == set(expected)
    for k, (label, visits, q) in expected.items():
        assert recs[k].target == pytest.approx(label)
        assert recs[k].visits == visits
        assert recs[k].extra["q"] == pytest.approx(q)
    assert recs[("tau1", 0)].extra["return"] == pytest.approx(0.5)
    assert recs[("tau1", 0)].state_key == recs[("tau3", 0)].state_key
    assert recs[("tau1", 1)].state_key == recs[("tau2", 1)].state_key != recs[("tau1", 0)].state_key


def test_mc_q_from_start_hand_computed():
    # G = γ^t R̃: τ1 [1, 0.5], τ2 [−1, −0.5], τ3 [−1] → Q(s1,y) = 0.5 → 0.75, Q(s1,z) = −0.5 → 0.25.
    recs = _by_step(run_method("mc-q", Sources(toy_rollouts()), {"gamma": 0.5, "discount": "from_start"}).records)
    assert recs[("tau1", 0)].target == pytest.approx(0.5)
    assert recs[("tau3", 0)].target == pytest.approx(0.0)
    assert recs[("tau1", 1)].target == pytest.approx(0.75)
    assert recs[("tau2", 1)].target == pytest.approx(0.25)


def test_mc_v_hand_computed():
    # V(s0) = (0.5 − 0.5 − 1)/3 = −1/3 → 1/3 (3 visits); V(s1) = (1 − 1)/2 = 0 → 0.5 (2 visits).
    recs = _by_step(run_method("mc-v", Sources(toy_rollouts()), {"gamma": 0.5}).records)
    for tid in ("tau1", "tau2", "tau3"):
        assert recs[(tid, 0)].target == pytest.approx(1 / 3)
        assert recs[(tid, 0)].visits == 3
    assert recs[("tau1", 1)].target == pytest.approx(0.5)
    assert recs[("tau2", 1)].extra["v"] == pytest.approx(0.0)


def test_outcome_returns_default_gamma():
    assert outcome_returns(1.0, 3, 0.95) == pytest.approx([0.9025, 0.95, 1.0])
    assert outcome_returns(-1.0, 3, 0.95, "from_start") == pytest.approx([-1.0, -0.95, -0.9025])
    # "to_go" is the return to go of a reward on the last step alone (the other meaning, per-step rewards)
    assert outcome_returns(1.0, 3, 0.95) == pytest.approx(returns_to_go([0.0, 0.0, 1.0], 0.95))
    assert MCConfig().gamma == 0.95 and MCConfig().discount == "to_go"


def test_reason_switch():
    a = traj("a", [("o0", "x")], True, sample=0, reasons=["because"])
    b = traj("b", [("o0", "x")], False, sample=1, reasons=["why not"])
    merged = run_method("mc-q", Sources([a, b]), {}).records
    assert [r.visits for r in merged] == [2, 2] and merged[0].target == pytest.approx(0.5)
    split = run_method("mc-q", Sources([a, b]), {"include_reason": True}).records
    assert [r.visits for r in split] == [1, 1]
    assert sorted(r.target for r in split) == [0.0, 1.0]


def test_keys_are_canonical_and_unambiguous():
    s1, _ = prefix_keys(traj("a", [("ab", "c"), ("o", "x")], True))
    s2, _ = prefix_keys(traj("b", [("a", "bc"), ("o", "x")], True))
    assert s1[0] != s2[0] and s1[1] != s2[1]  # same concatenated text, different fields
    other_task, _ = prefix_keys(traj("c", [("ab", "c")], True, task_id="t2"))
    assert other_task[0] != s1[0]
    again, _ = prefix_keys(traj("z", [("ab", "c"), ("o", "y")], False, sample=5))
    assert again == s1  # the key depends on the prefix only, not on the id, sample, outcome or later steps


def test_outcome_sources_and_errors():
    t = traj("s", [("o", "a")], False, score=1.7)
    assert outcome(t, "success") == 0.0 and outcome(t, "score") == 1.0
    assert outcome(traj("n", [("o", "a")], False, score=-0.2), "score") == 0.0
    bad = traj("broken", [("o", "a")], False, termination="env_error")
    with pytest.raises(CreditError, match=r"'broken'.*'termination'"):
        scored([bad], OutcomeConfig())
    items, dropped = scored([bad, *toy_rollouts()], OutcomeConfig(drop_errors=True))
    assert dropped == 1 and len(items) == 3
    assert run_method("mc-q", Sources([bad, *toy_rollouts()]), {"drop_errors": True}).dropped == 1


def test_malformed_input_names_trajectory_and_field():
    empty = traj("empty", [], False)
    with pytest.raises(CreditError, match=r"'empty', field 'steps'"):
        run_method("mc-q", Sources([empty]))
    dup = toy_rollouts() + [traj("tau1", [("o", "a")], True, sample=9)]
    with pytest.raises(CreditError, match=r"'tau1', field 'id'"):
        run_method("mc-v", Sources(dup))
    with pytest.raises(ValueError, match=r"'mc-q'.*gamma"):
        run_method("mc-q", Sources(toy_rollouts()), {"gamma": 1.5})
    with pytest.raises(ValueError, match=r"'mc-q'.*bogus"):
        run_method("mc-q", Sources(toy_rollouts()), {"bogus": 1})


# -- property tests ---------------------------------------------------------------------------------
step_st = st.tuples(st.sampled_from(["a", "b"]), st.sampled_from(["x", "y", "z"]))
rollout_st = st.tuples(st.lists(step_st, min_size=1, max_size=4), st.booleans())


def _rollouts(spec, task_id="t"):
    return [traj(f"{task_id}-{i}", steps, ok, task_id=task_id, sample=i) for i, (steps, ok) in enumerate(spec)]


@settings(max_examples=60, deadline=None)
@given(st.lists(rollout_st, min_size=1, max_size=8))
def test_gamma_one_all_success_is_one_all_failure_is_zero(spec):
    trajs = _rollouts(spec)
    cfg = MCConfig(gamma=1.0)
    items, _ = scored(trajs, cfg)
    outcomes_through: dict[str, set[bool]] = {}
    q = mc_q(items, cfg)
    v = mc_v(items, cfg)
    for r in q:
        outcomes_through.setdefault(r.state_key, set()).add(next(t.success for t in trajs if t.id == r.trajectory_id))
    for rq, rv in zip(q, v, strict=True):
        seen = outcomes_through[rq.state_key]
        if seen == {True}:
            assert rq.target == 1.0 and rv.target == 1.0
        elif seen == {False}:
            assert rq.target == 0.0 and rv.target == 0.0
        assert 0.0 <= rq.target <= 1.0


@settings(max_examples=30, deadline=None)
@given(st.lists(rollout_st, min_size=1, max_size=8), st.lists(rollout_st, min_size=1, max_size=4),
       st.randoms(use_true_random=False))
def test_determinism_independent_of_input_order(spec1, spec2, rnd):
    trajs = _rollouts(spec1, "t1") + _rollouts(spec2, "t2")
    shuffled = list(trajs)
    rnd.shuffle(shuffled)
    for method in ("mc-q", "mc-v", "preference", "shaped", "grpo", "gigpo", "spa"):
        a = [r.to_row() for r in run_method(method, Sources(trajs), {}).records]
        b = [r.to_row() for r in run_method(method, Sources(shuffled), {}).records]
        assert a == b, method


def test_same_input_same_output_across_calls():
    trajs = toy_rollouts()
    random.Random(0).shuffle(trajs)
    first = [r.to_row() for r in run_method("mc-q", Sources(trajs)).records]
    assert first == [r.to_row() for r in run_method("mc-q", Sources(toy_rollouts())).records]

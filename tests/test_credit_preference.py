"""Preference pairs for the relative loss (docs/methods.md §1.3); numbers worked out by hand."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from credit_fixtures import toy_rollouts, traj
from proctor.credit import Sources, run_method
from proctor.credit.montecarlo import mc_q
from proctor.credit.outcome import scored
from proctor.credit.preference import PreferenceConfig, mc_preference_pairs


def test_pairs_hand_computed():
    # γ = 0.5: at s0 Q(x) = 0 > Q(w) = −1 + δ; at s1 Q(y) = 1 > Q(z) = −1 + δ; nothing the other way.
    pairs = run_method("preference", Sources(toy_rollouts()), {"gamma": 0.5}).records
    assert [(p.chosen, p.rejected) for p in pairs] == [("x", "w"), ("y", "z")]
    x_w = pairs[0]
    assert (x_w.q_chosen, x_w.q_rejected, x_w.visits_chosen, x_w.visits_rejected) == (0.0, -1.0, 2, 1)
    assert (x_w.trajectory_id, x_w.step, x_w.rejected_trajectory_id, x_w.rejected_step) == ("tau1", 0, "tau3", 0)
    assert x_w.method == "preference" and '"delta": 0.03' in x_w.params


def test_margin_delta_on_the_pm1_scale():
    # δ = 1.5: s0 needs 0 > −1 + 1.5 (no); s1 needs 1 > −1 + 1.5 (yes).
    pairs = run_method("preference", Sources(toy_rollouts()), {"gamma": 0.5, "delta": 1.5}).records
    assert [(p.chosen, p.rejected) for p in pairs] == [("y", "z")]


def test_state_seen_with_one_action_emits_nothing():
    trajs = [traj("a", [("o", "x")], True, sample=0), traj("b", [("o", "x")], False, sample=1)]
    assert run_method("preference", Sources(trajs)).records == []


step_st = st.tuples(st.sampled_from(["a", "b"]), st.sampled_from(["x", "y", "z"]))
rollout_st = st.tuples(st.lists(step_st, min_size=1, max_size=3), st.booleans())


@settings(max_examples=60, deadline=None)
@given(st.lists(rollout_st, min_size=1, max_size=10), st.sampled_from([0.0, 0.03, 0.5, 1.0]),
       st.sampled_from([0.5, 0.95, 1.0]))
def test_pairs_respect_delta_and_never_pair_an_action_with_itself(spec, delta, gamma):
    trajs = [traj(f"r{i}", steps, ok, sample=i) for i, (steps, ok) in enumerate(spec)]
    cfg = PreferenceConfig(delta=delta, gamma=gamma)
    items, _ = scored(trajs, cfg)
    pairs = mc_preference_pairs(items, cfg)
    for p in pairs:
        assert p.chosen != p.rejected
        assert p.q_chosen > p.q_rejected + delta
    # completeness: every ordered pair of distinct actions at a state with the margin is emitted, once
    q_at: dict[str, dict[str, float]] = {}
    for r in mc_q(items, cfg):
        q_at.setdefault(r.state_key, {})[r.action] = r.extra["q"]
    expected = {(s, a, b) for s, qs in q_at.items() for a, b in itertools.permutations(qs, 2)
                if qs[a] > qs[b] + delta}
    got = [(p.state_key, p.chosen, p.rejected) for p in pairs]
    assert len(got) == len(set(got)) and set(got) == expected


def test_pair_q_values_match_mc_q():
    cfg = PreferenceConfig(gamma=0.5)
    items, _ = scored(toy_rollouts(), cfg)
    q = {(r.state_key, r.action): r.extra["q"] for r in mc_q(items, cfg)}
    for p in mc_preference_pairs(items, cfg):
        assert q[(p.state_key, p.chosen)] == pytest.approx(p.q_chosen)
        assert q[(p.state_key, p.rejected)] == pytest.approx(p.q_rejected)

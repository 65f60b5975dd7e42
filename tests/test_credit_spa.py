"""SPA progress-estimator layout and dense-reward composer (docs/methods.md §6)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from credit_fixtures import traj
from proctor.credit import CreditError, Sources, run_method
from proctor.credit.spa import compose_rewards


def test_compose_rewards_hand_computed():
    # α = 1, β = 0.5, w = 1, R = 1: r0 = 0.3 + 0.5, r1 = 0.6 + 0 + 1
    assert compose_rewards([0.3, 0.6], [True, False], 1.0) == pytest.approx([0.8, 1.6])
    assert compose_rewards([0.3, 0.6], [True, False], 1.0, alpha=2, beta=1, outcome_weight=0) == \
        pytest.approx([1.6, 1.2])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(-3, 3), st.booleans()), min_size=1, max_size=8), st.floats(0, 1),
       st.floats(0, 2))
def test_composer_with_zero_weights_is_only_the_outcome(turns, outcome, w):
    progress, valid = [c for c, _ in turns], [g for _, g in turns]
    r = compose_rewards(progress, valid, outcome, alpha=0.0, beta=0.0, outcome_weight=w)
    assert r[:-1] == [0.0] * (len(turns) - 1)
    assert r[-1] == pytest.approx(w * outcome)


def test_progress_examples_and_dense_rewards():
    t = traj("a", [("o0", "x"), ("o1", "y")], True, valid=[True, False],
             scores=[{"prog": 0.3}, {"prog": 0.6}])
    ex = run_method("spa", Sources([t])).records
    assert [(e.trajectory_id, e.turns, e.outcome) for e in ex] == [("a", [0, 1], 1.0)]
    recs = run_method("spa", Sources([t]), {"progress_score": "prog"}).records
    assert [r.target for r in recs] == pytest.approx([0.8, 1.6])
    assert [r.extra["grounding"] for r in recs] == [1.0, 0.0]
    with pytest.raises(CreditError, match=r"'a', field 'steps\[0\].scores\[other\]'"):
        run_method("spa", Sources([t]), {"progress_score": "other"})

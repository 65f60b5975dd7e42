"""Math-Shepherd labels and inverse-PRM transitions from a store of completions (docs/methods.md §2, §5)."""

from __future__ import annotations

import pytest

from credit_fixtures import toy_rollouts, traj
from proctor.credit import CreditError, Sources, run_method
from proctor.credit.math_shepherd import shepherd_labels


def _completions(src="tau1", k=1, outcomes=(True, False, False, True)):
    return [traj(f"c{i}", [("o0", "x"), ("o1", f"a{i}")], ok, sample=10 + i,
                 meta={"prefix_of": src, "prefix_len": k}) for i, ok in enumerate(outcomes)]


def test_shepherd_labels():
    assert shepherd_labels([1, 0, 0, 1]) == (1.0, 0.5)
    assert shepherd_labels([0, 0, 0]) == (0.0, 0.0)
    assert shepherd_labels([0.6, 0.9], correct_at=0.8) == (1.0, 0.5)


def test_math_shepherd_from_completions_hand_computed():
    # step 0 of τ1: completions from prefix [x] succeed 2 of 4 → hard 1, soft 0.5, N = 4;
    # step 1 (last): the trajectory's own outcome → hard 1, soft 1, N = 1.
    src = toy_rollouts()[:1]
    recs = run_method("math-shepherd", Sources(src, completions=_completions())).records
    assert [(r.step, r.target, r.extra["hard"], r.visits) for r in recs] == [(0, 0.5, 1.0, 4), (1, 1.0, 1.0, 1)]


def test_math_shepherd_missing_completions_names_trajectory_and_step():
    with pytest.raises(CreditError, match=r"'tau1', field 'completions\[prefix_len=1\]'"):
        run_method("math-shepherd", Sources(toy_rollouts()[:1], completions=[]))


def test_completion_layout_is_checked():
    bad = traj("c9", [("o0", "w"), ("o1", "y")], True, sample=9, meta={"prefix_of": "tau1", "prefix_len": 1})
    with pytest.raises(CreditError, match=r"'c9', field 'steps'"):
        run_method("math-shepherd", Sources(toy_rollouts()[:1], completions=[bad]))
    nometa = traj("c8", [("o0", "x")], True, sample=8)
    with pytest.raises(CreditError, match=r"'c8', field 'meta.prefix_of'"):
        run_method("math-shepherd", Sources(toy_rollouts()[:1], completions=[nometa]))
    far = traj("c7", [("o0", "x")], True, sample=7, meta={"prefix_of": "tau1", "prefix_len": 5})
    with pytest.raises(CreditError, match=r"'c7', field 'meta.prefix_len'"):
        run_method("math-shepherd", Sources(toy_rollouts()[:1], completions=[far]))


def _inverse_inputs():
    expert = traj("exp", [("o0", "x"), ("o1", "y")], True, sample=5)
    resample = traj("c", [("o0", "x"), ("o1", "q")], False, sample=6, meta={"prefix_of": "exp", "prefix_len": 1})
    policy = toy_rollouts()[1:]  # τ2 (2 steps), τ3 (1 step)
    return expert, resample, policy


def test_inverse_transitions_hand_checked():
    expert, resample, policy = _inverse_inputs()
    recs = run_method("inverse", Sources([expert], completions=[resample], policy=policy),
                      {"balance": False}).records
    rows = [(r.trajectory_id, r.step, r.action, r.next_action, r.terminal, r.label) for r in recs]
    assert rows == [("exp", 0, "x", "q", False, 1.0), ("exp", 1, "y", None, True, 1.0),
                    ("tau2", 0, "x", "z", False, 0.0), ("tau2", 1, "z", None, True, 0.0),
                    ("tau3", 0, "w", None, True, 0.0)]
    assert recs[0].next_state_key == recs[2].next_state_key  # s' = (o0, x, o1) in both
    assert recs[0].state_key == recs[4].state_key


def test_inverse_is_balanced_and_seeded():
    expert, resample, policy = _inverse_inputs()
    src = Sources([expert], completions=[resample], policy=policy)
    recs = run_method("inverse", src, {"seed": 3}).records
    assert sum(r.label for r in recs) == 2 and len(recs) == 4
    assert [r.to_row() for r in recs] == [r.to_row() for r in run_method("inverse", src, {"seed": 3}).records]


def test_inverse_missing_resample_names_expert_and_step():
    expert, _, policy = _inverse_inputs()
    with pytest.raises(CreditError, match=r"'exp', field 'resampled\[step=1\]'"):
        run_method("inverse", Sources([expert], completions=[], policy=policy))


def test_inverse_truncated_last_step_is_not_terminal():
    """A policy rollout cut by the step limit: its last step yields no (terminal) transition, and the step
    before it bootstraps from it (non-terminal, a' = the last action)."""
    expert, resample, _ = _inverse_inputs()
    cut = traj("cut", [("o0", "x"), ("o1", "z")], False, sample=5, termination="max_steps")
    cut.steps[-1].done = cut.steps[-1].truncated = True
    recs = run_method("inverse", Sources([expert], completions=[resample], policy=[cut]), {"balance": False}).records
    rows = [(r.trajectory_id, r.step, r.next_action, r.terminal) for r in recs if r.trajectory_id == "cut"]
    assert rows == [("cut", 0, "z", False)]

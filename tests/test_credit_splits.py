"""Splits by task, never by row: proctor's split cannot leak a prefix into two splits (docs/methods.md §1.4)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from credit_fixtures import traj
from proctor.credit import Sources, SplitLeakError, check_no_leak, run_method, split_tasks, with_splits
from proctor.credit.splits import SPLITS
from proctor.envs import SPLITS as ENV_SPLITS


def _many_tasks(n_tasks: int, k: int, seed: int = 0):
    """K rollouts per task that share their first steps (so rows of one task share state prefixes)."""
    rng = random.Random(seed)
    out = []
    for t in range(n_tasks):
        for i in range(k):
            steps = [("start", "look"), ("room", rng.choice(["go a", "go b"])), ("end", rng.choice(["x", "y"]))]
            out.append(traj(f"T{t}-{i}", steps, rng.random() < 0.5, task_id=f"T{t}", sample=i))
    return out


def test_split_names_match_envs():
    assert SPLITS == ENV_SPLITS


def test_exact_block_sizes_and_order_independence():
    tasks = [("toy", f"T{i}") for i in range(10)]
    a = split_tasks(tasks, (0.8, 0.1, 0.1), seed=1)
    assert sorted(a.values()).count("train") == 8 and list(a.values()).count("test") == 1
    assert a == split_tasks(list(reversed(tasks)) + tasks, (0.8, 0.1, 0.1), seed=1)
    assert a != split_tasks(tasks, (0.8, 0.1, 0.1), seed=2) or len(tasks) < 3
    with pytest.raises(ValueError, match="sum to 1"):
        split_tasks(tasks, (0.5, 0.1, 0.1))


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 30), st.integers(1, 5), st.integers(0, 10**6),
       st.sampled_from([(0.8, 0.1, 0.1), (0.5, 0.25, 0.25), (0.34, 0.33, 0.33)]))
def test_task_split_never_leaks_a_prefix(n_tasks, k, seed, fractions):
    trajs = _many_tasks(n_tasks, k, seed)
    assignment = split_tasks([(t.env, t.task_id) for t in trajs], fractions, seed)
    recs = run_method("mc-q", Sources(with_splits(trajs, assignment))).records
    check_no_leak(recs)
    split_of_state: dict[str, set[str]] = {}
    for r in recs:
        split_of_state.setdefault(r.state_key, set()).add(r.split)
        assert r.split == assignment[(r.env, r.task_id)]
    assert all(len(s) == 1 for s in split_of_state.values())


def test_row_split_like_the_released_code_is_caught():
    trajs = _many_tasks(5, 4)
    recs = run_method("mc-q", Sources(trajs)).records
    rng = random.Random(0)
    for r in recs:  # a row split: each labelled step independently to train or test
        r.split = "train" if rng.random() < 0.8 else "test"
    with pytest.raises(SplitLeakError, match="in splits"):
        check_no_leak(recs)


def test_with_splits_unknown_task_names_trajectory():
    with pytest.raises(KeyError, match="'T0-0'"):
        with_splits(_many_tasks(1, 1), {})

"""ArCHer / CHAI / filtered-BC math (proctor.rl.td), with numbers worked by hand."""

from __future__ import annotations

import pytest
import torch

from proctor.rl.td import (
    TARGET_HEADS,
    TRAJECTORY_FILTERS,
    archer_advantage,
    chai_select,
    expected_value,
    polyak_update,
    q_targets,
    v_targets,
)


def test_q_targets_bootstrap_at_truncation_not_at_termination():
    # r = [−1, −1, 0], V̄(s') = [(2, 4), (2, 4), (10, 10)], γ = 0.5, d = [0 (truncated), 1, 1]
    # min: y0 = −1 + 0.5·2 = 0 (bootstraps), y1 = −1 (terminated), y2 = 0
    r = torch.tensor([-1.0, -1.0, 0.0])
    nv = torch.tensor([[2.0, 4.0], [2.0, 4.0], [10.0, 10.0]])
    d = torch.tensor([False, True, True])
    assert q_targets(r, nv, d, 0.5).tolist() == [[0.0, 0.0], [-1.0, -1.0], [0.0, 0.0]]
    # per-head (ArCHer's code): y0 = (−1 + 1, −1 + 2) = (0, 1)
    assert q_targets(r, nv, d, 0.5, heads="per-head")[0].tolist() == [0.0, 1.0]
    with pytest.raises(ValueError, match="shapes differ"):
        q_targets(r[:2], nv, d, 0.5)
    with pytest.raises(KeyError, match="unknown target heads rule 'max'"):
        q_targets(r, nv, d, 0.5, heads="max")


def test_v_targets_average_min_q_over_sampled_actions():
    # one state, K = 2 actions: Q̄ = (1, 3) and (5, 2) → min 1 and 2 → mean 1.5; per-head: (3, 2.5)
    tq = torch.tensor([[[1.0, 3.0], [5.0, 2.0]]])
    assert v_targets(tq).tolist() == [[1.5, 1.5]]
    assert v_targets(tq, heads="per-head").tolist() == [[3.0, 2.5]]
    assert TARGET_HEADS.names() == ["min", "per-head"]


def test_polyak_update():
    # τ = 0.1: 0.1·10 + 0.9·0 = 1; 0.1·(−2) + 0.9·2 = 1.6
    target = [torch.tensor([0.0, 2.0])]
    polyak_update(target, [torch.tensor([10.0, -2.0])], 0.1)
    assert target[0].tolist() == pytest.approx([1.0, 1.6])
    polyak_update(target, [torch.tensor([3.0, 3.0])], 1.0)
    assert target[0].tolist() == [3.0, 3.0]
    with pytest.raises(ValueError, match="tau"):
        polyak_update(target, target, 1.5)


def test_archer_advantage_min_q_minus_min_v():
    # min(2, 3) − min(1, 0.5) = 1.5; min(−1, 0) − min(0, 0) = −1
    q = torch.tensor([[2.0, 3.0], [-1.0, 0.0]])
    v = torch.tensor([[1.0, 0.5], [0.0, 0.0]])
    assert archer_advantage(q, v).tolist() == [1.5, -1.0]


def test_expected_value_weights_each_actions_q_by_its_probability():
    # state 0: 0.5·0.2 + 0.25·0.6 + 0.25·0.9 = 0.475; state 1 has two actions (the third padded, p = 0): 0.5·(0.4 + 0.8)
    q = torch.tensor([[0.2, 0.6, 0.9], [0.4, 0.8, 0.0]])
    p = torch.tensor([[0.5, 0.25, 0.25], [0.5, 0.5, 0.0]])
    assert expected_value(q, p).tolist() == pytest.approx([0.475, 0.6])
    with pytest.raises(ValueError, match="must be a distribution"):
        expected_value(q, torch.tensor([[0.5, 0.25, 0.0], [0.5, 0.5, 0.0]]))
    with pytest.raises(ValueError, match=r"must both be \[B, M\]"):
        expected_value(q, p[:, :2])


def test_chai_select_argmax_q_optionally_penalised():
    q = torch.tensor([[0.1, 0.5, 0.5], [2.0, 1.0, 0.0]])
    assert chai_select(q).tolist() == [1, 0]  # ties to the first
    # α = 1: scores [0.1 − 0.1, 0.5 − 2, 0.5 − 0.3] = [0, −1.5, 0.2] → 2; [2 − 5, 1 − 1, 0 − 1] → 1
    lp = torch.tensor([[-0.1, -2.0, -0.3], [-5.0, -1.0, -1.0]])
    assert chai_select(q, lp, alpha=1.0).tolist() == [2, 1]
    with pytest.raises(ValueError, match="needs logprobs"):
        chai_select(q, alpha=1.0)


def test_trajectory_filters():
    r = torch.tensor([-20.0, -5.0, -12.0, -3.0, -5.0])
    # top 40%: ⌈0.4·5⌉ = 2nd highest = −5, ties kept → −5, −3, −5
    assert TRAJECTORY_FILTERS["top-fraction"](r, 0.4).tolist() == [False, True, False, True, True]
    # 50th percentile of sorted [−20, −12, −5, −5, −3] = −5
    assert TRAJECTORY_FILTERS["percentile"](r, 50).tolist() == [False, True, False, True, True]
    # 90th percentile of a pool [0, 10]: 9 → only returns ≥ 9
    pool = torch.tensor([0.0, 10.0])
    assert TRAJECTORY_FILTERS["percentile"](torch.tensor([8.0, 9.0]), 90, pool).tolist() == [False, True]
    assert TRAJECTORY_FILTERS["threshold"](r, -5.0).tolist() == [False, True, False, True, True]

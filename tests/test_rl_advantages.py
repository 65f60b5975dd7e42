"""GAE and the group advantages as tensors (proctor.rl.advantages): hand-computed numbers, and equality
with proctor.credit's list versions (GRPO, leave-one-out, GiGPO) on the same trajectories."""

from __future__ import annotations

import math
import random

import pytest
import torch

from credit_fixtures import toy_rollouts, traj
from proctor.credit import Sources, run_method
from proctor.rl.advantages import (
    ADVANTAGES,
    gae,
    gigpo_advantages,
    group_centred,
    grpo_advantages,
    loo_advantages,
    masked_returns_to_go,
)
from proctor.rl.groups import group_batch


def test_gae_hand_computed():
    r = torch.tensor([[0.0, 0.0, 1.0]])
    v = torch.tensor([[0.5, 0.6, 0.7]])
    m = torch.ones(1, 3)
    # γ = λ = 1: A_t = R − V_t = [0.5, 0.4, 0.3]
    adv, ret = gae(r, v, m, gamma=1.0, lam=1.0)
    assert adv.tolist()[0] == pytest.approx([0.5, 0.4, 0.3])
    assert ret.tolist()[0] == pytest.approx([1.0, 1.0, 1.0])
    # γ = 0.9, λ = 0.5: δ = [0.9·0.6 − 0.5, 0.9·0.7 − 0.6, 1 − 0.7] = [0.04, 0.03, 0.3];
    # A2 = 0.3, A1 = 0.03 + 0.45·0.3 = 0.165, A0 = 0.04 + 0.45·0.165 = 0.11425
    adv, _ = gae(r, v, m, gamma=0.9, lam=0.5)
    assert adv.tolist()[0] == pytest.approx([0.11425, 0.165, 0.3])


def test_gae_skips_masked_positions_and_bootstraps():
    # the middle position (an observation token) is skipped: its value 9 is never read
    r, v = torch.tensor([[0.0, 5.0, 1.0]]), torch.tensor([[0.5, 9.0, 0.7]])
    adv, ret = gae(r, v, torch.tensor([[1, 0, 1]]), gamma=1.0, lam=1.0)
    # A2 = 1 − 0.7 = 0.3; A0 = (0 + 0.7 − 0.5) + 0.3 = 0.5
    assert adv.tolist()[0] == pytest.approx([0.5, 0.0, 0.3])
    assert ret.tolist()[0] == pytest.approx([1.0, 0.0, 1.0])
    # truncated: bootstrap V = 2 after the last token: A2 = 1 + 0.5·2 − 0.7 = 1.3, A0 = 0.5·0.7 − 0.5 + 0.5·1.3
    adv, _ = gae(r, v, torch.tensor([[1, 0, 1]]), gamma=0.5, lam=1.0, last_values=torch.tensor([2.0]))
    assert adv.tolist()[0] == pytest.approx([0.5, 0.0, 1.3])


def test_masked_returns_to_go_hand_computed():
    r = torch.tensor([[0.0, 0.0, 1.0], [1.0, -1.0, 2.0]])
    assert masked_returns_to_go(r, torch.ones(2, 3), 0.5).tolist() == [[0.25, 0.5, 1.0], [1.0, 0.0, 2.0]]
    # padding after a row's last step: [0, 1, pad] → [0.5, 1, 0]
    assert masked_returns_to_go(torch.tensor([[0.0, 1.0, 7.0]]), torch.tensor([[1, 1, 0]]), 0.5).tolist() == \
        [[0.5, 1.0, 0.0]]


def test_grpo_loo_gigpo_hand_computed():
    s = math.sqrt(1 / 3)
    returns, groups = torch.tensor([1.0, 0.0, 0.0, 1.0]), torch.tensor([4, 4, 4, 9])
    assert grpo_advantages(returns, groups).tolist() == pytest.approx([(2 / 3) / s, -(1 / 3) / s, -(1 / 3) / s, 0.0])
    assert grpo_advantages(returns, groups, normalize=False).tolist() == pytest.approx([2 / 3, -1 / 3, -1 / 3, 0])
    assert group_centred(torch.tensor([0.3, 0.3]), torch.tensor([0, 0])).tolist() == [0.0, 0.0]
    assert loo_advantages(torch.tensor([1.0, 0.0, 0.0, 3.0, 1.0]), torch.tensor([0, 0, 0, 1, 1])).tolist() == \
        pytest.approx([1.0, -0.5, -0.5, 2.0, -2.0])
    with pytest.raises(ValueError, match="group 9 has 1"):
        loo_advantages(returns, groups)
    # A^S over anchors {7: [1.0, 0.9], 8: [0.0]} (F = 1): [0.05, −0.05, 0]; ω = 2
    a, a_s = gigpo_advantages(torch.tensor([0.5, 0.5, -0.5]), torch.tensor([1.0, 0.9, 0.0]),
                              torch.tensor([7, 7, 8]), omega=2.0, normalize=False)
    assert a_s.tolist() == pytest.approx([0.05, -0.05, 0.0])
    assert a.tolist() == pytest.approx([0.6, 0.4, -0.5])
    assert ADVANTAGES.names() == ["gae", "gigpo", "grpo", "loo"]


def _random_rollouts(seed: int) -> list:
    """Three tasks × 4 rollouts over a small observation alphabet, so anchor groups repeat across rollouts."""
    rng = random.Random(seed)
    out = []
    for task in ("a", "b", "c"):
        for k in range(4):
            n = rng.randint(1, 4)
            steps = [(rng.choice(["o0", "o1", "o2"]), rng.choice(["x", "y"])) for _ in range(n)]
            ok = rng.random() < 0.5
            out.append(traj(f"{task}{k}", steps, ok, task_id=task, sample=k, score=rng.random()))
    rng.shuffle(out)
    return out


def _credit_targets(method: str, trajs, params=None) -> dict[tuple[str, int], float]:
    return {(r.trajectory_id, r.step): r.target for r in run_method(method, Sources(trajs), params).records}


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("normalize", [True, False])
def test_tensor_group_advantages_equal_credit(seed, normalize):
    trajs = _random_rollouts(seed) + toy_rollouts()
    gb = group_batch(trajs, gamma=0.9)
    ids = [t.id for t in gb.trajectories]
    steps = [(ids[i], int(k)) for i, k in zip(gb.step_rollout, gb.step_index, strict=True)]

    grpo = grpo_advantages(gb.returns, gb.groups, normalize)
    expected = _credit_targets("grpo", trajs, {"normalize": normalize})
    assert {s: float(grpo[i]) for s, i in zip(steps, gb.step_rollout.tolist(), strict=True)} == \
        pytest.approx(expected, abs=1e-12)

    loo = loo_advantages(gb.returns, gb.groups)
    expected = _credit_targets("loo", trajs)
    assert {s: float(loo[i]) for s, i in zip(steps, gb.step_rollout.tolist(), strict=True)} == \
        pytest.approx(expected, abs=1e-12)

    a, _ = gigpo_advantages(grpo[gb.step_rollout], gb.step_returns, gb.anchors, omega=0.7, normalize=normalize)
    expected = _credit_targets("gigpo", trajs, {"normalize": normalize, "gamma": 0.9, "omega": 0.7})
    assert dict(zip(steps, a.tolist(), strict=True)) == pytest.approx(expected, abs=1e-12)


def test_tensor_gigpo_equals_credit_with_env_rewards_scores_and_similarity():
    trajs = _random_rollouts(11)
    for t in trajs:
        for j, s in enumerate(t.steps):
            s.reward = 0.1 * (j + 1)
    gb = group_batch(trajs, outcome_source="score", gamma=0.8, step_reward="env", similarity=0.5)
    ids = [t.id for t in gb.trajectories]
    steps = [(ids[i], int(k)) for i, k in zip(gb.step_rollout, gb.step_index, strict=True)]
    a, _ = gigpo_advantages(grpo_advantages(gb.returns, gb.groups)[gb.step_rollout], gb.step_returns, gb.anchors)
    expected = _credit_targets("gigpo", trajs, {"outcome": "score", "gamma": 0.8, "step_reward": "env",
                                                "similarity": 0.5})
    assert dict(zip(steps, a.tolist(), strict=True)) == pytest.approx(expected, abs=1e-12)

"""The PRM quality experiments (experiments/prm_arithmetic.py, experiments/prm_household.py), scaled down:
completions follow proctor's completion layout, Math-Shepherd labels line up with the env's ground truth,
MC-Q of completions is computed as hand-computed, and each experiment runs end to end."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from proctor.agents.experts import ExpertAgent
from proctor.credit.completions import index_completions
from proctor.envs.registry import EnvSpec
from proctor.rollout import rollout
from proctor.trajectory import Step, Trajectory

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"
sys.path.insert(0, str(EXPERIMENTS))
common = importlib.import_module("quality_common")
arith = importlib.import_module("prm_arithmetic")
house = importlib.import_module("prm_household")


def noisy_rollouts(tmp_path, n_tasks: int, samples: int) -> list[Trajectory]:
    spec = EnvSpec("arithmetic", {})
    ids = spec.make().task_ids("train")[:n_tasks]
    return rollout(spec, ExpertAgent("noisy"), ids, tmp_path / "roll", split="train", samples_per_task=samples,
                   progress=False).load()


def test_completions_follow_the_layout(tmp_path):
    src = noisy_rollouts(tmp_path, 3, 1)
    starts = common.shepherd_starts(src)
    assert len(starts) == sum(len(t.steps) - 1 for t in src)
    comps = common.complete(EnvSpec("arithmetic", {}), ExpertAgent("noisy"), starts, n=3)
    assert len(comps) == 3 * len(starts)
    index = index_completions(src, comps)  # checks prefix_of, prefix_len and the replayed actions
    assert sorted(len(v) for v in index.values()) == [3] * len(starts)
    for (src_id, k), cs in index.items():
        assert len({c.sample for c in cs}) == 3, "each completion has its own sample number"
        for c in cs:
            assert c.termination in ("success", "failure") and len(c.steps) > k
            source = next(t for t in src if t.id == src_id)
            assert [s.observation for s in c.steps[:k]] == [s.observation for s in source.steps[:k]]


def test_math_shepherd_labels_match_ground_truth(tmp_path):
    """The noisy solver carries a mistake to the answer, so completions from a prefix ending in a wrong step
    fail: the hard labels must agree with `info["step_correct"]` on most steps. A label shifted by one step
    (a misaligned prefix) would not."""
    train = noisy_rollouts(tmp_path, 30, 2)
    comps = common.complete(EnvSpec("arithmetic", {}), ExpertAgent("noisy"), common.shepherd_starts(train), n=4)
    arith.label_math_shepherd(train, comps, "hard")
    quality = arith.label_quality(train)
    assert quality["accuracy"] > 0.85 and quality["auroc"] > 0.85, quality
    for t in train:  # the last step's evidence is the trajectory's own outcome, which is the ground truth
        assert t.steps[-1].targets[arith.MS_TARGET] == float(t.success) == t.steps[-1].targets[arith.GT_TARGET]


def _completion(src: str, prefix_len: int, tag: str, n_steps: int, won: bool) -> Trajectory:
    steps = [Step(observation=f"o{i}", action=tag if i == prefix_len - 1 else f"a{i}") for i in range(n_steps)]
    return Trajectory(id=f"{src}-{tag}-{n_steps}-{won}", env="household", task_id="t", sample=n_steps, task="x",
                      split="test", seed=0, agent="p", steps=steps, success=won, score=float(won),
                      termination="success" if won else "failure",
                      meta={"prefix_of": src, "prefix_len": prefix_len, "tag": tag})


def test_mc_q_of_completions_hand_computed():
    # candidate "go" at step t = 1 (prefix_len 2): a 3-step win → γ^(3−1−1)·1 = 0.5; a 4-step loss → −0.25
    # (γ = 0.5): mean 0.125 → Q̃ = 0.5625. Candidate "look": one 2-step win → γ^0 = 1 → Q̃ = 1.
    comps = [_completion("s", 2, "go", 3, True), _completion("s", 2, "go", 4, False),
             _completion("s", 2, "look", 2, True)]
    q = house.mc_q_of_completions(comps, gamma=0.5)
    assert q == {("s", 1): {"go": pytest.approx(0.5625), "look": pytest.approx(1.0)}}


def test_arithmetic_experiment_end_to_end(tiny_model_dir, tmp_path):
    out = arith.main(["--backbone", str(tiny_model_dir), "--train-tasks", "12", "--samples", "2", "--test-tasks",
                      "12", "--completions", "2", "--max-steps", "3", "--batch-size", "8", "--threads", "1",
                      "--work", str(tmp_path)])
    assert out["train"]["trajectories"] == 24 and out["test"]["trajectories"] == 12
    assert out["train"]["completions"] == 2 * (out["train"]["steps"] - 24)
    assert 0 < out["test"]["wrong_step_fraction"] < 1
    for name in ("prm_math_shepherd", "prm_ground_truth"):
        assert out[name]["steps"] == 3
        assert 0.0 <= out[name]["auroc"] <= 1.0 and 0.0 <= out[name]["step_accuracy"] <= 1.0


def test_household_experiment_end_to_end(tiny_model_dir, tmp_path):
    out = house.main(["--backbone", str(tiny_model_dir), "--train-tasks", "6", "--samples", "1", "--test-tasks",
                      "3", "--completions", "2", "--max-steps", "2", "--batch-size", "4", "--threads", "1",
                      "--work", str(tmp_path)])
    assert out["train"]["trajectories"] == 6 and out["test"]["trajectories"] == 3
    assert out["test"]["completions"] == 2 * out["test"]["candidates"]
    prm = out["prm"]
    assert prm["steps"] == 2 and prm["pairs"] >= prm["states"] >= 1
    assert 0.0 <= prm["accuracy"] <= 1.0 and 0.0 <= prm["better_is_expert_fraction"] <= 1.0

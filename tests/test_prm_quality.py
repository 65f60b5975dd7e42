"""The PRM quality experiments (experiments/prm_arithmetic.py, experiments/prm_household.py), scaled down: each
runs end to end on library stages only (rollouts, completions, candidate starts, targets, train_prm, prm eval's
metrics) and reports what the README quotes."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"
sys.path.insert(0, str(EXPERIMENTS))
arith = importlib.import_module("prm_arithmetic")
house = importlib.import_module("prm_household")


def test_experiments_have_no_episode_loop_of_their_own():
    for name in ("quality_common.py", "prm_household.py", "prm_arithmetic.py"):
        text = (EXPERIMENTS / name).read_text()
        for loop in (".step(", ".reset(", ".replay(", ".act(", "_Live", "def complete"):
            assert loop not in text, f"{name} steps envs itself ({loop!r})"


def test_arithmetic_experiment_end_to_end(tiny_model_dir, tmp_path):
    out = arith.main(["--backbone", str(tiny_model_dir), "--train-tasks", "12", "--samples", "2", "--test-tasks",
                      "12", "--completions", "2", "--max-steps", "3", "--batch-size", "8", "--threads", "1",
                      "--bootstrap", "20", "--work", str(tmp_path)])
    assert out["train"]["trajectories"] == 24 and out["test"]["trajectories"] == 12
    assert out["train"]["completions"] == 2 * out["train"]["steps"]  # k = 1..T for every source
    assert 0 < out["test"]["wrong_step_fraction"] < 1
    labels = out["math_shepherd_labels"]["vs_ground_truth"]
    assert labels["n"] == out["train"]["steps"]
    assert labels["auroc"] > 0.6  # a floor: even 2 completions per prefix rank correct steps above wrong ones
    for name in ("prm_math_shepherd", "prm_ground_truth"):
        assert out[name]["steps"] == 3
        truth = out[name]["vs_ground_truth"]
        assert truth["steps"] == out["test"]["steps"] and 0.0 <= truth["auroc"] <= 1.0


@pytest.mark.parametrize("data", ["rollouts", "candidate-pairs"])
def test_household_experiment_end_to_end(tiny_model_dir, tmp_path, data):
    out = house.main(["--backbone", str(tiny_model_dir), "--train-tasks", "4", "--samples", "1", "--test-tasks",
                      "4", "--completions", "4", "--train-completions", "2", "--train-data", data, "--max-steps",
                      "2", "--batch-size", "4", "--threads", "1", "--bootstrap", "20", "--env-steps", "12",
                      "--work", str(tmp_path)])
    assert out["train"]["rollouts"] == 4 and out["test"]["trajectories"] == 4
    assert out["prm"]["steps"] == 2
    report = out["eval"]
    assert report["trajectories"] == 4 and report["score_spread"]["n"] == report["steps"]
    ranking = report["ranking"]
    assert ranking["completions_per_candidate"] == [4, 4]
    assert ranking["prm"]["pairs"] >= ranking["states_with_pairs"] >= 1
    assert 0.0 <= ranking["prm"]["accuracy"] <= 1.0 and 0.0 <= ranking["prefer_expert"]["accuracy"] <= 1.0

"""The quickstart loop: its pieces on hand-made data, and a scaled-down run end to end with resume."""

from __future__ import annotations

import json

import pytest

from proctor.quickstart import QuickstartConfig, mixed_policy, run_quickstart, step_metrics
from proctor.trajectory import Step, Trajectory


def _traj(tid: str, qs: list[float], success: bool) -> Trajectory:
    steps = [Step(observation=f"o{i}", action=f"a{i}", reward=0.0, done=i == len(qs) - 1,
                  targets={"mc-q": q}) for i, q in enumerate(qs)]
    return Trajectory(id=tid, env="household", task_id=tid, sample=0, task="t", split="test", seed=0,
                      agent="test", steps=steps, success=success,
                      score=float(success), termination="success" if success else "failure")


def test_step_metrics_by_hand():
    trajs = [_traj("a", [0.2, 1.0], True), _traj("b", [0.6, 0.0], False)]
    scores = [[0.1, 0.9], [0.7, 0.3]]
    m = step_metrics(scores, trajs)
    # Brier: ((0.1-0.2)^2 + (0.9-1)^2 + (0.7-0.6)^2 + (0.3-0)^2) / 4 = (0.01+0.01+0.01+0.09)/4
    assert m["brier_vs_mc_q"] == pytest.approx(0.03)
    # positives (q >= 0.5): 0.9, 0.7; negatives: 0.1, 0.3 -> perfectly separated
    assert m["auroc_step_mc_q>=0.5"] == pytest.approx(1.0)
    # last-step scores 0.9 (won) vs 0.3 (lost)
    assert m["auroc_last_step_success"] == pytest.approx(1.0)


def test_mixed_policy_rate_is_checked_and_pure_expert_follows_the_oracle():
    with pytest.raises(ValueError, match="epsilon"):
        mixed_policy(1.5, 0)
    from proctor.prompts.turns import Prefix

    prefix = Prefix(env="household", task_id="t", task="t", observation="o", history=[],
                    info={"expert_action": "go to desk 1", "admissible_actions": ["look", "go to desk 1"]})
    assert all(c[0].action == "go to desk 1" for c in mixed_policy(0.0, 0).act([prefix] * 5))
    assert mixed_policy(0.3, 0).needs_expert_hints


@pytest.mark.slow
def test_quickstart_runs_end_to_end_and_resumes(tmp_path):
    cfg = QuickstartConfig(train_tasks=3, test_tasks=2, samples=3, max_steps=10, prm_steps=4, prm_batch=4)
    seen = []
    summary = run_quickstart(tmp_path, cfg, report=lambda stage, payload: seen.append(stage))
    assert seen == ["model", "rollout:train", "targets:train", "rollout:test", "targets:test", "prm", "eval"]
    assert summary["rollout_train"]["episodes"] == 9 and summary["rollout_test"]["episodes"] == 6
    assert summary["targets_train"]["records"] == summary["rollout_train"]["steps"]
    for key in ("prm_before_training", "prm_after_training"):
        assert set(summary[key]) == {"brier_vs_mc_q", "auroc_step_mc_q>=0.5", "auroc_last_step_success"}
    assert json.loads((tmp_path / "summary.json").read_text())["config"]["samples"] == 3
    assert (tmp_path / "prm" / "model.safetensors").exists()
    log = tmp_path / "prm" / "train_log.json"
    stamp = log.stat().st_mtime_ns
    again = run_quickstart(tmp_path, cfg)  # everything is on disk: nothing is redone
    assert log.stat().st_mtime_ns == stamp
    assert again["prm_after_training"] == pytest.approx(summary["prm_after_training"])

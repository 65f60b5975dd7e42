"""experiments/dpo_transfer.py: the per-state numbers by hand, and a run end to end on a tiny policy and PRM."""

from __future__ import annotations

import importlib
import math
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments"))
transfer = importlib.import_module("dpo_transfer")


def test_state_stats_and_interval_by_hand():
    # p = [0.5, 0.3, 0.2], Q = [0.1, 0.9, 0.4]: E[Q] = 0.05 + 0.27 + 0.08 = 0.40; Q's best is action 1, p = 0.3;
    # the policy's mode is action 0; H = 0.5 ln 2 + 0.3 ln(1/0.3) + 0.2 ln 5 = 1.029653
    # π_N = best-of-2's law of p and Q: by score a0 (F 0.5), a2 (F 0.7), a1: [0.25, 0.51, 0.24]; its mode is a1;
    # KL(π_N ‖ p) = 0.25 ln(0.25/0.5) + 0.51 ln(0.51/0.3) + 0.24 ln(0.24/0.2) = 0.141091
    stats = transfer.state_stats([0.5, 0.3, 0.2], [0.1, 0.9, 0.4], [0.25, 0.51, 0.24])
    assert stats["expected_q"] == pytest.approx(0.40)
    assert stats["p_best"] == 0.3 and stats["mode_is_best"] == 0.0
    assert stats["entropy"] == pytest.approx(1.029653, abs=1e-6)
    assert stats["kl_to_best_of_n"] == pytest.approx(0.141091, abs=1e-6) and stats["mode_is_best_of_n_mode"] == 0.0
    assert transfer.state_stats([0.2, 0.8], [0.0, 1.0], [0.04, 0.96])["mode_is_best"] == 1.0
    # [1, 2, 3]: mean 2, sample sd 1, standard error 1/√3: 2 ± 1.96 × 0.57735
    assert transfer.mean_ci([1.0, 2.0, 3.0]) == {"mean": 2.0, "ci95": [round(2 - 1.96 / math.sqrt(3), 4),
                                                                      round(2 + 1.96 / math.sqrt(3), 4)]}


def test_end_to_end_on_a_tiny_policy(tiny_model_dir, tmp_path, capsys):
    from proctor.prm.model import ProcessRewardModel
    from proctor.rollout import RolloutConfig, run_rollout

    torch.manual_seed(0)
    prm = ProcessRewardModel.build(tiny_model_dir, head="scalar").save_pretrained(tmp_path / "prm")
    run_rollout(RolloutConfig(env="household", env_kwargs={"preset": "small", "max_steps": 3}, out=tmp_path / "states",
                              split="valid", tasks=3, agent={"kind": "random"}, progress=False))
    out = transfer.main(["--states", str(tmp_path / "states"), "--prm", str(prm), "--policy", str(tiny_model_dir),
                         "--policy", str(tiny_model_dir), "--states-n", "5"])
    assert out["states"] == 5
    first = out["policies"][str(tiny_model_dir)]
    assert 0 <= first["p_best"]["mean"] <= 1 and first["entropy"]["mean"] > 0
    with pytest.raises(SystemExit):
        transfer.main(["--states", str(tmp_path / "states"), "--prm", str(prm), "--policy", str(tiny_model_dir),
                       "--states-n", "0"])
    assert "--states-n and --n must be >= 1, got 0 and 8" in capsys.readouterr().err
    # a policy against itself: every paired difference is 0
    assert all(v == {"mean": 0.0, "ci95": [0.0, 0.0]} for v in out["minus_first"][str(tiny_model_dir)].values())

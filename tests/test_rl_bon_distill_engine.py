"""Best-of-N distillation on the training engine: one step at lr 1e-6 from a bf16 checkpoint moves the weights,
gradient accumulation and checkpointing follow the curve of the whole batch, and two processes (`proctor train
bon-distill` under torchrun) follow the curve of one at the same global batch."""

from __future__ import annotations

import json

import pytest
import yaml

from proctor.rl.bon_distill import METRICS_FILE, BonDistillConfig, train_bon_distill

#: curves that differ only by float rounding (the order of the sums): per-step losses within this
CURVE_TOL = 1e-4
PROMPT = {"history": 2, "memory": True, "show_admissible": False, "system": ""}


@pytest.fixture(scope="module")
def setup(scalar_prm_dir, random_states_store):
    """(the folder holding the `states` store, the PRM)."""
    return random_states_store.parent, str(scalar_prm_dir)


def config(policy, setup, out, **kw) -> dict:
    tmp, prm = setup
    return {"policy": str(policy), "prm": prm, "states_from": str(tmp / "states"), "output_dir": str(out),
            "prompt": PROMPT, "max_states": 8, "epochs": 2, "batch_size": 4, "learning_rate": 1e-3, "device": "cpu",
            "progress": False, **kw}


def curve(out) -> list[float]:
    return [r["loss"] for r in json.loads((out / METRICS_FILE).read_text())["curve"]]


def test_one_step_from_a_bf16_checkpoint_moves_the_weights(bf16_model_dir, setup, tmp_path):
    """At lr 1e-6, one optimizer step on float32 master weights moves ≥ 90% of them (saved in float32)."""
    from moved_weights import moved_fraction

    cfg = BonDistillConfig.model_validate({**config(bf16_model_dir, setup, tmp_path / "d"), "max_states": 4,
                                           "epochs": 1, "batch_size": 4, "learning_rate": 1e-6})
    policy_dir = train_bon_distill(cfg)
    assert [r["step"] for r in json.loads((tmp_path / "d" / METRICS_FILE).read_text())["curve"]] == [0]
    assert moved_fraction(bf16_model_dir, policy_dir) >= 0.9
    assert json.loads((policy_dir / "config.json").read_text())["dtype"] == "float32"


def test_accumulation_and_checkpointing_follow_the_whole_batchs_curve(tiny_model_dir, setup, tmp_path):
    def run(name: str, **kw) -> list[float]:
        train_bon_distill(BonDistillConfig.model_validate(config(tiny_model_dir, setup, tmp_path / name, **kw)))
        return curve(tmp_path / name)

    whole = run("whole")
    assert len(whole) == 4
    assert run("accumulated", gradient_accumulation_steps=2) == pytest.approx(whole, abs=CURVE_TOL)
    assert run("checkpointed", gradient_checkpointing=True) == pytest.approx(whole, abs=CURVE_TOL)


@pytest.mark.slow
def test_two_processes_follow_the_single_process_curve(tiny_model_dir, setup, tmp_path):
    """`proctor train bon-distill` on 2 CPU processes, batch 4 = 2 per process: the per-step losses of one
    process at batch 4 (float rounding only); one process writes."""
    from torchrun_cli import torchrun_cli

    cfg = config(tiny_model_dir, setup, tmp_path / "ddp")
    (tmp_path / "ddp.yaml").write_text(yaml.safe_dump(cfg))
    torchrun_cli(tmp_path, ["train", "bon-distill", str(tmp_path / "ddp.yaml")], 2, timeout=600)
    train_bon_distill(BonDistillConfig.model_validate({**cfg, "output_dir": str(tmp_path / "one")}))
    two, one = curve(tmp_path / "ddp"), curve(tmp_path / "one")
    assert len(two) == 4 and two == pytest.approx(one, abs=CURVE_TOL)
    assert sorted(p.name for p in (tmp_path / "ddp").iterdir()) == sorted(p.name for p in (tmp_path / "one").iterdir())

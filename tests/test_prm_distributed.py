"""Distributed PRM training: `proctor prm train` under torchrun with 2 CPU processes (gloo), with no
distributed setting in the config (no `use_cpu`), shares the data between the ranks: one epoch over 64
examples at 4 per process takes 64 / (2·4) = 8 steps (two separate full jobs would take 16 each), and the
loss curve is 1 process's at 8 per batch on the same global batches (every example has 2 labelled steps, so
the mean of the ranks' loss means is the global batch's mean)."""

from __future__ import annotations

import json

import pytest
import yaml

from proctor.prm.config import PRMTrainConfig
from proctor.prm.data import write_stepwise
from proctor.prm.trainer import train_prm
from test_prm_train import toy
from torchrun_cli import torchrun_cli

EXAMPLES, PER_RANK, RANKS, EPOCHS = 64, 4, 2, 2
STEPS = EPOCHS * EXAMPLES // (PER_RANK * RANKS)  # 16 when the ranks share the data


def two_step_examples(n: int):
    """`n` toy examples with exactly two labelled steps each."""
    return [ex for ex in toy(8 * n, 0) if ex.num_steps == 2][:n]


def config(tmp_path, tiny_model_dir, name: str, batch: int) -> dict:
    return {
        "model": {"backbone": str(tiny_model_dir), "head": "scalar", "dtype": "float32"},
        "data": {"train": str(tmp_path / "train.jsonl")},
        "packing": True,
        "training": {
            "output_dir": str(tmp_path / name),
            "num_train_epochs": EPOCHS,
            "learning_rate": 3e-3,
            "per_device_train_batch_size": batch,
            "logging_steps": 1,
            "save_strategy": "steps",
            "save_steps": STEPS,
            "disable_tqdm": True,
        },
    }


@pytest.mark.slow
def test_two_processes_share_the_data_and_follow_the_single_process_curve(tmp_path, tiny_model_dir):
    examples = two_step_examples(EXAMPLES)
    assert len(examples) == EXAMPLES
    write_stepwise(examples, tmp_path / "train.jsonl")
    (tmp_path / "ddp.yaml").write_text(yaml.safe_dump(config(tmp_path, tiny_model_dir, "ddp", PER_RANK)))
    res = torchrun_cli(tmp_path, ["prm", "train", str(tmp_path / "ddp.yaml")], RANKS)
    finals = [json.loads(line) for line in res.stdout.splitlines() if line.startswith('{"output_dir"')]
    assert [f["steps"] for f in finals] == [STEPS]  # rank 0 alone prints; a full job per rank would take 2 * STEPS
    state = json.loads((tmp_path / "ddp" / f"checkpoint-{STEPS}" / "trainer_state.json").read_text())
    assert state["global_step"] == STEPS and state["train_batch_size"] == PER_RANK
    ddp = [h["loss"] for h in state["log_history"] if "loss" in h]

    single_cfg = PRMTrainConfig.model_validate(config(tmp_path, tiny_model_dir, "single", PER_RANK * RANKS))
    _, _, trainer = train_prm(single_cfg)
    single = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert len(ddp) == len(single) == STEPS
    assert ddp == pytest.approx(single, abs=2e-3)  # the same global batches, the same updates
    for curve in (ddp, single):
        assert sum(curve[-4:]) < 0.8 * sum(curve[:4])
    assert (tmp_path / "ddp" / "prm_config.json").is_file()

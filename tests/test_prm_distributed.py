"""Distributed PRM training: `proctor prm train` under torchrun with 2 CPU processes (gloo) follows the same
loss curve as 1 process on the same global batches (split_batches: each process gets half of each batch)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from proctor.prm.config import PRMTrainConfig
from proctor.prm.data import write_stepwise
from proctor.prm.trainer import train_prm
from test_prm_train import toy

STEPS = 12


def config(tmp_path, tiny_model_dir, name: str) -> dict:
    return {
        "model": {"backbone": str(tiny_model_dir), "head": "scalar", "dtype": "float32"},
        "data": {"train": str(tmp_path / "train.jsonl")},
        "packing": True,
        "training": {
            "output_dir": str(tmp_path / name),
            "max_steps": STEPS,
            "learning_rate": 3e-3,
            "per_device_train_batch_size": 8,
            "logging_steps": 1,
            "save_strategy": "steps",
            "save_steps": STEPS,
            "use_cpu": True,
            "disable_tqdm": True,
            "accelerator_config": {"split_batches": True},
        },
    }


@pytest.mark.slow
def test_two_processes_follow_the_single_process_curve(tmp_path, tiny_model_dir):
    write_stepwise(toy(64, 0), tmp_path / "train.jsonl")
    (tmp_path / "ddp.yaml").write_text(yaml.safe_dump(config(tmp_path, tiny_model_dir, "ddp")))
    (tmp_path / "driver.py").write_text("from proctor.cli import main\n\nmain()\n")
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        str(tmp_path / "driver.py"),
        "prm",
        "train",
        str(tmp_path / "ddp.yaml"),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    res = subprocess.run(cmd, check=False, capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.count('"steps": 12') == 2  # both ranks finished all steps
    state = json.loads((tmp_path / "ddp" / f"checkpoint-{STEPS}" / "trainer_state.json").read_text())
    ddp = [h["loss"] for h in state["log_history"] if "loss" in h]

    _, _, trainer = train_prm(PRMTrainConfig.model_validate(config(tmp_path, tiny_model_dir, "single")))
    single = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert len(ddp) == len(single) == STEPS
    # the same global batches; the per-process loss means differ only in how labelled steps are weighted
    assert ddp == pytest.approx(single, abs=0.1)
    for curve in (ddp, single):
        assert sum(curve[-4:]) < 0.8 * sum(curve[:4])
    assert (tmp_path / "ddp" / "prm_config.json").is_file()

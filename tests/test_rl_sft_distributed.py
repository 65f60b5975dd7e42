"""Data-parallel SFT: `proctor train sft` under torchrun with 2 CPU processes (gloo) splits each global batch of
4 examples between the processes and normalises by the global batch's token weight, so its loss curve is that of
one process at batch 4 on the same global batches; one process writes the policy and prints."""

from __future__ import annotations

import json

import pytest
import yaml

from proctor.rl.sft import METRICS_FILE, SFTConfig, train_sft
from proctor.rollout import RolloutConfig, run_rollout
from proctor.training.engine import shard_batches
from torchrun_cli import torchrun_cli

BATCH, PROCESSES, STEPS = 4, 2, 16


def test_shard_batches_by_hand() -> None:
    # 2 processes × 2 accumulation steps: micro-batch c = g·P + r takes rows c, c + 4, ...; process r gets items
    # r, r + 2, ... of the sequence, so process 0 gets micro-batches 0 and 2 of each step
    assert shard_batches([[0, 1, 2, 3, 4], [5, 6, 7, 8]], 2, 2) == [[0, 4], [1], [2], [3], [5], [6], [7], [8]]
    assert shard_batches([[0, 1, 2]], 1, 1) == [[0, 1, 2]]
    with pytest.raises(ValueError, match="batch 1 has 1 rows, fewer than processes"):
        shard_batches([[0, 1], [2]], 2, 1)


def config(tmp_path, tiny_model_dir, demos, name: str, batch: int) -> dict:
    return {"model": str(tiny_model_dir), "data": str(demos), "output_dir": str(tmp_path / name), "steps": STEPS,
            "batch_size": batch, "learning_rate": 3e-3, "context_weight": 0.2, "device": "cpu", "progress": False,
            "prompt": {"history": 2, "memory": True, "show_admissible": False, "system": ""}}


@pytest.mark.slow
def test_two_processes_follow_the_single_process_curve(tmp_path, tiny_model_dir):
    demos = tmp_path / "demos"
    run_rollout(RolloutConfig(env="household", env_kwargs={"preset": "small"}, out=demos, split="train", tasks=8,
                              agent={"kind": "expert", "expert": "search"}, progress=False))
    (tmp_path / "ddp.yaml").write_text(yaml.safe_dump(config(tmp_path, tiny_model_dir, demos, "ddp", BATCH)))
    res = torchrun_cli(tmp_path, ["train", "sft", str(tmp_path / "ddp.yaml")], PROCESSES)
    printed = [json.loads(line) for line in res.stdout.splitlines() if line.startswith('{"output_dir"')]
    assert [p["output_dir"] for p in printed] == [str(tmp_path / "ddp")]
    ddp = json.loads((tmp_path / "ddp" / METRICS_FILE).read_text())
    assert ddp["processes"] == PROCESSES and len(ddp["losses"]) == STEPS

    single = train_sft(SFTConfig.model_validate(config(tmp_path, tiny_model_dir, demos, "single", BATCH)))
    one = json.loads((single / METRICS_FILE).read_text())
    assert one["processes"] == 1 and one["trained_tokens"] == ddp["trained_tokens"]
    assert ddp["losses"] == pytest.approx(one["losses"], abs=2e-3)  # the same global batches, the same updates
    assert sum(one["losses"][-3:]) < sum(one["losses"][:3])

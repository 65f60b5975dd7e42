"""Data-parallel ArCHer and online filtered BC: `proctor train archer|fbc` under torchrun with 2 CPU processes
(gloo). The main process rolls out (the same episodes as one process: the same seed and weights) and broadcasts
them; each process trains on half of every global batch, normalised by the whole batch's weight, so the critic's
and the actor's per-step losses are those of one process at the same batch sizes (to float rounding: 1e-4
relative); one process writes and prints."""

from __future__ import annotations

import json

import pytest
import yaml

from proctor.rl.archer import ArCHerConfig, train_archer
from proctor.rl.filtered_bc import FilteredBCConfig, train_filtered_bc
from torchrun_cli import torchrun_cli

AGENT = {"kind": "hf", "temperature": 1.0, "max_new_tokens": 8, "prompt": {"history": 1}}
#: 2 tasks × 2 episodes of at most 2 steps: one global actor batch of every step (4 to 8 rows, ≥ 2 per process)
RUN = {"env": "twenty_questions", "env_kwargs": {"max_steps": 2}, "tasks": 2, "rollouts_per_task": 2,
       "agent": AGENT, "learning_rate": 1e-3, "device": "cpu", "progress": False}
ARCHER = {**RUN, "critic_updates": 3, "critic_batch_size": 4, "critic_learning_rate": 1e-3, "minibatch_size": 16,
          "actor_epochs": 2}
FBC = {**RUN, "keep": "threshold", "keep_value": -100.0, "batch_size": 16, "epochs": 2}


def _both(tmp_path, policy, method: str, fields: dict) -> tuple[dict, dict, str]:
    """(iteration 1's metrics with 2 processes, with 1, the 2-process run's stdout)."""
    (tmp_path / f"{method}.yaml").write_text(yaml.safe_dump({**fields, "policy": str(policy),
                                                             "output_dir": str(tmp_path / "ddp")}))
    res = torchrun_cli(tmp_path, ["train", method, str(tmp_path / f"{method}.yaml")], 2)
    config, train = (ArCHerConfig, train_archer) if method == "archer" else (FilteredBCConfig, train_filtered_bc)
    train(config.model_validate({**fields, "policy": str(policy), "output_dir": str(tmp_path / "single")}))
    ddp, one = (json.loads((tmp_path / run / "iter-1/metrics.json").read_text()) for run in ("ddp", "single"))
    return ddp, one, res.stdout


def _losses(log: list[dict]) -> list[float]:
    return [s["loss"] for s in log]


@pytest.mark.slow
def test_archer_two_processes_follow_the_single_process_curves(tmp_path, tiny_model_dir):
    ddp, one, stdout = _both(tmp_path, tiny_model_dir, "archer", ARCHER)
    assert ddp["transitions"] == one["transitions"] and ddp["mean_return"] == one["mean_return"]
    assert len(ddp["critic"]["log"]) == 3 and len(ddp["train"]["log"]) == 2
    for part in ("critic", "train"):
        assert _losses(ddp[part]["log"]) == pytest.approx(_losses(one[part]["log"]), rel=1e-4, abs=1e-6), part
    assert [json.loads(line)["policy_dir"] for line in stdout.splitlines() if '"policy_dir"' in line] == [
        str(tmp_path / "ddp/iter-1/policy")]  # one process prints
    assert (tmp_path / "ddp/iter-1/critic/model.safetensors").is_file()


@pytest.mark.slow
def test_fbc_two_processes_follow_the_single_process_curve(tmp_path, tiny_model_dir):
    ddp, one, stdout = _both(tmp_path, tiny_model_dir, "fbc", FBC)
    assert ddp["examples"] == one["examples"] >= 4 and len(ddp["train"]["log"]) == 2
    assert ddp["train"]["log"] == pytest.approx(one["train"]["log"], rel=1e-4, abs=1e-6)
    assert sum('"policy_dir"' in line for line in stdout.splitlines()) == 1

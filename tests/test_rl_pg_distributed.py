"""Data-parallel GRPO and PPO: `proctor train grpo|ppo` under torchrun with 2 CPU processes (gloo): the main process
rolls out and broadcasts, each process trains on its half of every minibatch, normalised by the whole minibatch's
tokens, so the per-step loss curve is that of one process at the same global batch (here with 2 accumulation
steps, so that both leave out the same short last minibatch, if any); one process writes and prints."""

from __future__ import annotations

import json

import pytest
import yaml

from torchrun_cli import torchrun_cli

AGENT = {"kind": "choice", "temperature": 100.0, "prompt": {"history": 1}}


@pytest.mark.slow
@pytest.mark.parametrize("method", ["grpo", "ppo"])
def test_two_processes_follow_the_single_process_curve(tmp_path, tiny_model_dir, method):
    from proctor.rl.grpo import GRPOConfig, train_grpo
    from proctor.rl.ppo import PPOConfig, train_ppo

    def config(name: str, **kw) -> dict:
        return {"policy": str(tiny_model_dir), "output_dir": str(tmp_path / name), "env": "shop",
                "env_kwargs": {"max_steps": 6}, "tasks": 2, "rollouts_per_task": 4, "agent": AGENT,
                "outcome": "score", "ppo_epochs": 2, "minibatch_size": 4, "learning_rate": 1e-3, "kl_coef": 0.05,
                "device": "cpu", "progress": False, **kw}

    (tmp_path / "ddp.yaml").write_text(yaml.safe_dump(config("ddp")))
    res = torchrun_cli(tmp_path, ["train", method, str(tmp_path / "ddp.yaml")], 2)
    printed = [json.loads(line) for line in res.stdout.splitlines() if line.startswith('{"policy_dir"')]
    assert len(printed) == 1  # one writer
    ddp = json.loads((tmp_path / "ddp/iter-1/metrics.json").read_text())["train"]["log"]

    cls, train = (GRPOConfig, train_grpo) if method == "grpo" else (PPOConfig, train_ppo)
    one = train(cls.model_validate(config("single", gradient_accumulation_steps=2))).iterations[0]["train"]["log"]
    assert len(ddp) == len(one) > 0
    # the same global batches, the same updates, up to float rounding
    assert [s["loss"] for s in ddp] == pytest.approx([s["loss"] for s in one], abs=1e-4)
    if method == "ppo":
        assert [s["value_loss"] for s in ddp] == pytest.approx([s["value_loss"] for s in one], abs=1e-4)

"""`proctor train dpo CONFIG.yaml` end to end on a tiny model, and its one-line errors."""

from __future__ import annotations

import json

import torch
import yaml
from typer.testing import CliRunner

from proctor.cli import app
from proctor.prm.model import ProcessRewardModel

runner = CliRunner()


def test_train_dpo_cli(tiny_model_dir, tmp_path):
    torch.manual_seed(0)
    prm = ProcessRewardModel.build(tiny_model_dir, head="scalar").save_pretrained(tmp_path / "prm")
    config = tmp_path / "dpo.yaml"
    config.write_text(yaml.safe_dump({
        "policy": str(tiny_model_dir), "prm": str(prm), "output_dir": str(tmp_path / "unused"), "env": "household",
        "env_kwargs": {"max_steps": 2}, "tasks": 3, "agent": {"kind": "choice"}, "n_actions": 4,
        "batch_size": 4, "learning_rate": 1e-3, "progress": False}))
    result = runner.invoke(app, ["train", "dpo", str(config), "--output-dir", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert lines[0]["iteration"] == 1 and lines[0]["pairs"] > 0
    assert lines[-1]["policy_dir"] == str(tmp_path / "run/iter-1/policy")
    assert (tmp_path / "run/iter-1/policy/model.safetensors").is_file()


def test_train_dpo_cli_errors(tmp_path):
    config = tmp_path / "bad.yaml"
    config.write_text(yaml.safe_dump({"policy": "x", "prm": "y", "output_dir": "z", "env": "household",
                                      "beta": -1}))
    result = runner.invoke(app, ["train", "dpo", str(config)])
    assert result.exit_code == 2
    assert "bad.yaml: field 'beta'" in result.output
    result = runner.invoke(app, ["train", "dpo", str(tmp_path / "missing.yaml")])
    assert result.exit_code == 2 and "no such config file" in result.output


def test_train_grpo_and_ppo_cli_validate_their_configs(tmp_path):
    config = tmp_path / "pg.yaml"
    config.write_text(yaml.safe_dump({"policy": "x", "output_dir": "z", "env": "shop", "group_size": 1}))
    result = runner.invoke(app, ["train", "grpo", str(config)])
    assert result.exit_code == 2 and "pg.yaml: field 'group_size'" in result.output
    config.write_text(yaml.safe_dump({"policy": "x", "output_dir": "z", "env": "shop", "reward": "spa"}))
    result = runner.invoke(app, ["train", "ppo", str(config)])
    assert result.exit_code == 2 and "needs `prm`" in result.output


def test_readme_dpo_yaml_is_a_valid_config():
    from pathlib import Path

    from proctor.rl.online_dpo import OnlineDPOConfig

    text = (Path(__file__).resolve().parents[1] / "examples" / "rl" / "dpo.yaml").read_text()
    cfg = OnlineDPOConfig.model_validate(yaml.safe_load(text))
    assert cfg.agent.model == cfg.policy and cfg.n_actions == 4

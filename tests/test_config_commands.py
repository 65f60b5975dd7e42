"""A config given to the wrong command is one line naming the command that takes it; `proctor train --dry-run` and
`proctor prm train --dry-run` validate a config without its inputs, print it resolved (a config itself) and what it
would read."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from proctor.cli import app

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
#: every trainer recipe under examples/rl/ and the method that reads it
RL_EXAMPLES = {"dpo.yaml": "dpo", "dpo-anchored.yaml": "dpo", "bon.yaml": "bon-distill", "ppo.yaml": "ppo",
               "gigpo.yaml": "grpo", "archer.yaml": "archer", "archer-lik.yaml": "archer",
               "archer-q0.yaml": "archer"}
runner = CliRunner()


def one_line(args: list[str]) -> str:
    res = runner.invoke(app, args, terminal_width=400)
    assert res.exit_code == 2, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.output
    return lines[0]


@pytest.mark.parametrize(("example", "command"), [
    ("rl/dpo.yaml", "proctor train dpo"), ("rl/bon.yaml", "proctor train bon-distill"),
    ("stages/prm.yaml", "proctor prm train"), ("prm/lik.yaml", "proctor prm train-likelihood"),
    ("rollout/cand16.yaml", "proctor rollout --config")])
def test_run_given_another_commands_config_names_that_command(example, command):
    line = one_line(["run", str(EXAMPLES / example), "--dry-run"])
    assert f"{EXAMPLES / example} is a config for `{command}` (" in line
    assert "not for `proctor run` (PipelineConfig)" in line and line.endswith(f"run `{command} {EXAMPLES / example}`")


def test_train_given_another_methods_or_the_loops_config_names_its_command():
    line = one_line(["train", "grpo", str(EXAMPLES / "rl/dpo.yaml"), "--dry-run"])
    assert "is a config for `proctor train dpo` (OnlineDPOConfig), not for `proctor train grpo` (GRPOConfig)" in line
    line = one_line(["train", "dpo", str(EXAMPLES / "pipeline/quickstart-household.yaml")])
    assert "is a config for `proctor run` (PipelineConfig), not for `proctor train dpo`" in line


def test_a_mistake_in_a_config_of_the_right_command_is_still_named(tmp_path):
    data = yaml.safe_load((EXAMPLES / "pipeline/quickstart-household.yaml").read_text())
    data["sed"] = data.pop("seed")
    (tmp_path / "loop.yaml").write_text(yaml.safe_dump(data))
    assert one_line(["run", str(tmp_path / "loop.yaml"), "--dry-run"]).endswith(
        "loop.yaml: field 'sed': Extra inputs are not permitted")
    data = yaml.safe_load((EXAMPLES / "rl/dpo.yaml").read_text())
    data["beta"] = -1
    (tmp_path / "dpo.yaml").write_text(yaml.safe_dump(data))
    assert "dpo.yaml: field 'beta'" in one_line(["train", "dpo", str(tmp_path / "dpo.yaml"), "--dry-run"])


def test_every_rl_example_is_listed():
    assert {p.name for p in (EXAMPLES / "rl").glob("*.yaml")} == set(RL_EXAMPLES)


@pytest.mark.parametrize("name", list(RL_EXAMPLES))
def test_train_dry_run_validates_an_example_without_its_inputs(name, tmp_path, monkeypatch):
    from proctor.rl.trainers import trainer

    monkeypatch.chdir(tmp_path)  # none of the recipe's inputs exist here
    res = runner.invoke(app, ["train", RL_EXAMPLES[name], str(EXAMPLES / "rl" / name), "--dry-run"],
                        terminal_width=400)
    assert res.exit_code == 0, res.output
    config_class, _ = trainer(RL_EXAMPLES[name]).load()
    expected = config_class.model_validate(yaml.safe_load((EXAMPLES / "rl" / name).read_text()))
    assert yaml.safe_load(res.stdout) == expected.model_dump(mode="json", serialize_as_any=True)
    comments = [" ".join(line.split()) for line in res.stdout.splitlines() if line.startswith("#")]
    assert f"# policy {expected.policy}: not found here (read as a hub name when training starts)" in comments
    assert comments[-2:] == [f"# writes: {expected.output_dir}", "# nothing was run (--dry-run)"]
    assert not Path(expected.output_dir).exists()


def test_train_dry_run_prints_a_config_that_reads_back_the_same(tmp_path, tiny_model_dir):
    """The numbers as written (`3e-4`, `1e-8`) are numbers; the inputs found are marked so; the output is a config
    that validates to the same config."""
    (tmp_path / "demos").mkdir()
    config = tmp_path / "sft.yaml"
    config.write_text(f"model: {tiny_model_dir}\ndata: {tmp_path / 'demos'}\noutput_dir: {tmp_path / 'out'}\n"
                      "learning_rate: 3e-4\ntraining_args: {adam_epsilon: 1e-8}\n")
    res = runner.invoke(app, ["train", "sft", str(config), "--dry-run"], terminal_width=400)
    assert res.exit_code == 0, res.output
    resolved = yaml.safe_load(res.stdout)
    assert resolved["learning_rate"] == 3e-4 and resolved["training_args"] == {"adam_epsilon": 1e-8}
    assert f"#   model  {tiny_model_dir}: found" in res.stdout and f"#   data   {tmp_path / 'demos'}: found" in res.stdout
    (tmp_path / "resolved.yaml").write_text(res.stdout)
    again = runner.invoke(app, ["train", "sft", str(tmp_path / "resolved.yaml"), "--dry-run"], terminal_width=400)
    assert again.exit_code == 0, again.output
    assert again.stdout.splitlines()[1:] == res.stdout.splitlines()[1:]
    assert not (tmp_path / "out").exists()


def test_prm_train_dry_run_prints_the_resolved_config_and_what_it_reads(tmp_path, monkeypatch):
    from proctor.prm.config import load_config

    monkeypatch.chdir(tmp_path)  # of the recipe's inputs, only the store its pairs name is here
    Path("runs/cand").mkdir(parents=True)
    example = EXAMPLES / "stages" / "prm.yaml"
    res = runner.invoke(app, ["prm", "train", str(example), "--dry-run"], terminal_width=400)
    assert res.exit_code == 0, res.output
    expected = load_config(example)
    assert yaml.safe_load(res.stdout) == expected.model_dump(mode="json", serialize_as_any=True)
    comments = [" ".join(line.split()) for line in res.stdout.splitlines() if line.startswith("#")]
    assert comments == [
        f"# {example}: a valid PRMTrainConfig for `proctor prm train`, every field resolved", "# reads:",
        "# model.backbone runs/tiny: not found here (read as a hub name when training starts)",
        "# data.train runs/pairs/targets.parquet: not found here", "# data.trajectories[0] runs/cand: found",
        "# writes: runs/prm", "# nothing was run (--dry-run)"]
    Path("resolved.yaml").write_text(res.stdout)
    assert load_config("resolved.yaml") == expected and not Path("runs/prm").exists()
    Path("bad.yaml").write_text(example.read_text().replace("loss: bradley_terry", "loss: ce"))
    line = one_line(["prm", "train", "bad.yaml", "--dry-run"])
    assert line.startswith("error: bad.yaml: ") and "loss 'ce' trains a classification" in line

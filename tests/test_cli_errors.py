"""A user's mistakes with `prm train`, `prm score`, `prm eval` and `targets`: one error line naming the file,
row or field, exit code 2, before any model loads; `proctor --debug` shows the traceback instead."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from proctor.cli import app
from proctor.prm.data import StepwiseExample, write_stepwise
from test_prm_train import summary, toy

runner = CliRunner()


def one_line(args: list[str], *expected: str) -> str:
    res = runner.invoke(app, args, terminal_width=400)
    assert res.exit_code == 2, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), res.output
    for text in expected:
        assert text in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def fake_backbone(tmp_path):
    """A folder that passes the path check but cannot load: a row error must come before loading it."""
    path = tmp_path / "fake_model"
    path.mkdir()
    (path / "config.json").write_text("{}")
    return path


def write_config(tmp_path, backbone, **overrides) -> str:
    write_stepwise(toy(8, 0), tmp_path / "train.jsonl")
    cfg = {"model": {"backbone": str(backbone)}, "data": {"train": str(tmp_path / "train.jsonl")},
           "output_dir": str(tmp_path / "out"), "steps": 2, "batch_size": 4}
    for key, value in overrides.items():
        section, _, field = key.partition("__")
        if field:
            cfg.setdefault(section, {})[field] = value
        else:
            cfg[section] = value
    path = tmp_path / "prm.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


def test_prm_train_config_mistakes(tmp_path, fake_backbone):
    one_line(["prm", "train", str(tmp_path / "missing.yaml")], "missing.yaml: no such config file")
    cfg = write_config(tmp_path, fake_backbone, data__formt="stepwise")
    one_line(["prm", "train", cfg], "prm.yaml", "data.formt", "Extra inputs are not permitted")
    cfg = write_config(tmp_path, fake_backbone, loss="bce_typo")
    one_line(["prm", "train", cfg], "prm.yaml", "loss")
    cfg = write_config(tmp_path, fake_backbone, training_args__learning_rat=0.1)
    one_line(["prm", "train", cfg], "training_args.learning_rat: not a transformers.TrainingArguments field (did "
             "you mean 'learning_rate'?)")


def test_prm_train_missing_paths_are_reported_at_once(tmp_path, fake_backbone, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    for offline in ("", "1"):
        monkeypatch.setenv("HF_HUB_OFFLINE", offline)
        t0 = time.monotonic()
        line = one_line(["prm", "train", write_config(tmp_path, "runs/tiny")], "runs/tiny", "the path does not exist")
        assert time.monotonic() - t0 < 5 and ("offline" in line) == bool(offline)
    cfg = write_config(tmp_path, fake_backbone, data__train=str(tmp_path / "nope.jsonl"))
    one_line(["prm", "train", cfg], "nope.jsonl: no such data file")


def test_prm_train_bad_row_is_named_before_the_model_loads(tmp_path, fake_backbone):
    cfg = write_config(tmp_path, fake_backbone)
    rows = (tmp_path / "train.jsonl").read_text().splitlines()
    rows[2] = json.dumps({"prompt": "p", "completions": ["a", "b"], "labels": [True]})
    (tmp_path / "train.jsonl").write_text("\n".join(rows) + "\n")
    one_line(["prm", "train", cfg], "train.jsonl:3", "2 completions but 1 labels")


def test_debug_shows_the_traceback(tmp_path, fake_backbone, monkeypatch):
    monkeypatch.setenv("PROCTOR_DEBUG", "")  # restored (unset) after the test: --debug sets it to 1
    cfg = write_config(tmp_path, fake_backbone, data__train=str(tmp_path / "nope.jsonl"))
    res = runner.invoke(app, ["--debug", "prm", "train", cfg])
    assert res.exit_code == 1 and "no such data file" in str(res.exception)
    res = runner.invoke(app, ["--debug", "targets", "--method", "mc-q", "--in", str(tmp_path / "x"),
                              "--out", str(tmp_path / "t")])
    assert res.exit_code == 1 and isinstance(res.exception, FileNotFoundError)


def _long_prompt_example() -> StepwiseExample:
    return StepwiseExample(prompt="Task: escape the room. " * 40, completions=["open the door"], labels=[True],
                           id="long")


def test_rows_left_without_labels_by_truncation(tmp_path, tiny_model_dir):
    """TRL-mode truncation keeps the prompt and cuts the one labelled step of row 9: an error naming the row,
    or (data.unlabelled_rows) TRL's behaviour, keep it unsupervised, or skip it, with a count."""
    def cfg(policy: str | None) -> str:
        path = write_config(tmp_path, tiny_model_dir, tokenization={"mode": "trl", "max_length": 64})
        write_stepwise([*toy(8, 0), _long_prompt_example()], tmp_path / "train.jsonl")
        raw = yaml.safe_load(Path(path).read_text())
        if policy:
            raw["data"]["unlabelled_rows"] = policy
        Path(path).write_text(yaml.safe_dump(raw))
        return path

    one_line(["prm", "train", cfg(None)], "train.jsonl:9 (id 'long')", "no labelled step is left",
             "unlabelled_rows: keep")
    for policy, key in (("skip", "skipped"), ("keep", "kept_unlabelled")):
        res = runner.invoke(app, ["prm", "train", cfg(policy), "--overwrite"])  # the same output_dir again
        assert res.exit_code == 0, res.output
        assert summary(res.output)[key] == 1


def test_prm_eval_and_targets_one_line(tmp_path):
    one_line(["prm", "eval", "--model", str(tmp_path / "no_prm"), "--processbench", "x.json"], "no such PRM folder")
    prm = tmp_path / "prm"
    prm.mkdir()
    (prm / "prm_config.json").write_text("{}")
    one_line(["prm", "eval", "--model", str(prm), "--processbench", str(tmp_path / "gsm.json")],
             "gsm.json: no such ProcessBench file")
    one_line(["prm", "eval", "--model", str(prm), "--trajectories", str(tmp_path)], "not a trajectory store")
    one_line(["targets", "--method", "mc-q", "--in", str(tmp_path / "r"), "--out", str(tmp_path / "t")],
             "no such trajectory store")


def test_rollout_openai_wrong_port_stops_early_with_the_reason(tmp_path):
    """Nothing listens on the port: the first error is printed and the circuit breaker stops the run after a
    few failed agent calls (not one agent_error per task), keeping what was done."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again when the block ends: connections are refused
    out = tmp_path / "o"
    res = runner.invoke(app, ["rollout", "--env", "household", "--agent", "openai", "--model", "m",
                              "--base-url", f"http://127.0.0.1:{port}/v1", "--agent-arg", "max_retries=0",
                              "--tasks", "40", "--batch", "2", "--out", str(out)], terminal_width=400)
    assert res.exit_code == 2, res.output
    assert "Connection" in res.output and "failed on all of its first" in res.output
    from proctor.store import TrajectoryStore

    done = TrajectoryStore.open(out).load() if (out / "manifest.json").is_file() else []
    assert len(done) < 40 and all(t.termination == "agent_error" for t in done)


def test_rollout_unknown_expert_kind_is_rejected_up_front(tmp_path):
    one_line(["rollout", "--env", "household", "--agent", "expert", "--expert-kind", "xyz", "--tasks", "2",
              "--out", str(tmp_path / "x")], "unknown expert 'xyz'")
    assert not (tmp_path / "x" / "manifest.json").exists()

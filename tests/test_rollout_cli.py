"""`proctor rollout`: the summary it prints and writes, bad input, kill -9 then resume, and a config file with the
options that override it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from proctor.store import TrajectoryStore

TESTS_DIR = Path(__file__).resolve().parent
#: the installed console script (`pip install -e .`), next to this interpreter
PROCTOR = shutil.which("proctor", path=str(Path(sys.executable).parent)) or "proctor"


def proctor_rollout(out: Path, *args: str) -> list[str]:
    return [PROCTOR, "rollout", "--env", "guess", "--env-module", "test_rollout_envs",
            "--out", str(out), "--no-progress", *args]


def cli_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS_DIR), os.environ.get("PYTHONPATH", "")])}


def stored_lines(out: Path) -> int:
    return sum(p.read_bytes().count(b"\n") for p in (out / "shards").glob("*.jsonl")) if out.exists() else 0


def test_cli_prints_the_table_and_writes_the_summary(tmp_path):
    out, summary = tmp_path / "run", tmp_path / "summary.json"
    proc = subprocess.run(
        proctor_rollout(out, "--agent", "expert", "--expert-kind", "quitter", "--tasks", "3", "--samples", "2",
                        "--batch", "2", "--summary-json", str(summary)),
        env=cli_env(), check=False, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "success rate" in proc.stdout and "termination: failure" in proc.stdout
    data = json.loads(summary.read_text())
    assert data["episodes"] == 6 and data["terminations"]["failure"] == 6 and data["success_rate"] == 0.0
    assert data["success_ci95"][0] == 0.0 and 0.39 < data["success_ci95"][1] < 0.40  # Wilson upper for 0/6


def test_cli_rejects_an_unknown_env_with_a_clear_message(tmp_path):
    proc = subprocess.run(proctor_rollout(tmp_path / "x", "--agent", "expert") + ["--env", "nope"],
                          env=cli_env(), check=False, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "unknown environment 'nope'" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1  # one line, no traceback


def test_kill_9_mid_run_then_rerun_completes_every_pair_exactly_once(tmp_path):
    out = tmp_path / "run"
    cmd = proctor_rollout(out, "--agent", "expert", "--tasks", "30", "--samples", "2", "--batch", "4",
                          "--env-arg", "step_delay=0.05", "--env-arg", "n_tasks=30")
    proc = subprocess.Popen(cmd, env=cli_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while stored_lines(out) < 8 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()
    partial = TrajectoryStore.open(out).done_keys()
    assert 8 <= len(partial) < 60

    rerun = subprocess.run(cmd, env=cli_env(), check=False, capture_output=True, text=True, timeout=120)
    assert rerun.returncode == 0, rerun.stderr
    keys = Counter(t.key for t in TrajectoryStore.open(out))
    assert set(keys) == {(f"test-{i}", k) for i in range(30) for k in range(2)}
    assert set(keys.values()) == {1}
    assert all(t.success for t in TrajectoryStore.open(out))


def test_cli_rejects_bad_options_before_any_episode(tmp_path):
    for args, message in ((["--step-timeout", "-1"], "step_timeout"), (["--agent", "expert", "--expert-kind", "xyz"],
                                                                        "unknown expert 'xyz'")):
        proc = subprocess.run([PROCTOR, "rollout", "--env", "household", "--tasks", "2", "--out", str(tmp_path / "o"),
                               *args], check=False, capture_output=True, text=True)
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and not (tmp_path / "o").exists()


def test_from_completes_another_store_with_the_configs_start(tmp_path, monkeypatch):
    """`--config` with a `start` (candidate actions, states per source) and `--from STORE`: the config's start,
    from STORE's trajectories (`--prefixes` and `--completions` override it only when given)."""
    import yaml
    from typer.testing import CliRunner

    from proctor.cli import app

    monkeypatch.chdir(tmp_path)
    household = ["--env", "household", "--env-arg", "preset=small", "--env-arg", "expert_hints=true"]
    res = CliRunner().invoke(app, ["rollout", *household, "--agent", "expert", "--tasks", "2", "--out", "src",
                                   "--no-progress"])
    assert res.exit_code == 0, res.output
    Path("candidates.yaml").write_text(yaml.safe_dump({
        "env": "household", "env_kwargs": {"preset": "small", "expert_hints": True}, "agent": {"kind": "expert"},
        "start": {"source": "elsewhere", "prefix_lengths": "states", "per_source": 1, "completions": 1,
                  "candidates": {"expert": True, "random": 1}}, "out": "cand"}))
    res = CliRunner().invoke(app, ["rollout", "--config", "candidates.yaml", "--from", "src", "--no-progress"])
    assert res.exit_code == 0, res.output
    sources = {t.id for t in TrajectoryStore.open(Path("src")).load()}
    done = TrajectoryStore.open(Path("cand")).load()
    assert len(done) == 2 * 2  # 2 sources x 1 state x (the expert's action and 1 random one) x 1 completion
    assert {t.meta["prefix_of"] for t in done} == sources and all("candidate" in t.meta for t in done)


def rollout_with_config(tmp_path: Path, out: str, *args: str) -> TrajectoryStore:
    """`proctor rollout --config` of an expert on 2 `guess` tasks of split `valid`, 2 samples each, seed 3."""
    import yaml
    from typer.testing import CliRunner

    from proctor.cli import app

    config = tmp_path / "rollout.yaml"
    config.write_text(yaml.safe_dump({"env": "guess", "env_module": "test_rollout_envs", "split": "valid", "tasks": 2,
                                      "samples": 2, "seed": 3, "agent": {"kind": "expert"}, "progress": False}))
    res = CliRunner().invoke(app, ["rollout", "--config", str(config), "--out", str(tmp_path / out), *args])
    assert res.exit_code == 0, res.output
    return TrajectoryStore.open(tmp_path / out)


def test_a_configs_fields_hold_unless_an_option_is_given(tmp_path):
    """`--config`: the file's split, samples and seed are the run's; an option given overrides its field."""
    store = rollout_with_config(tmp_path, "file")
    assert sorted(t.key for t in store.load()) == [("valid-0", 0), ("valid-0", 1), ("valid-1", 0), ("valid-1", 1)]
    assert (store.meta["rollout"]["split"], store.meta["rollout"]["seed"]) == ("valid", 3)
    assert all(t.success for t in store.load())
    store = rollout_with_config(tmp_path, "given", "--split", "train", "--samples", "1")
    assert sorted(t.key for t in store.load()) == [("train-0", 0), ("train-1", 0)]
    assert (store.meta["rollout"]["split"], store.meta["rollout"]["seed"]) == ("train", 3)


def test_an_agent_option_changes_the_configs_agent(tmp_path):
    """`--expert-kind` (like `--model`, `--temperature`, `--agent-arg`) without `--agent` changes the file's agent:
    never ignored, and never a random agent in its place."""
    trajs = rollout_with_config(tmp_path, "quitter", "--expert-kind", "quitter").load()
    assert len(trajs) == 4 and all(t.actions == ["give up"] and not t.success for t in trajs)

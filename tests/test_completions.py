"""Completions from stored prefixes through the rollout engine, and Math-Shepherd labels made end to end
from the CLI on `arithmetic`, checked against the env's ground-truth step labels."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from proctor.rollout import RolloutConfig, run_rollout
from proctor.store import TrajectoryStore

CLI = [sys.executable, "-c", "from proctor.cli import main; main()"]


def test_completions_replay_the_prefix_then_continue(tmp_path):
    src = run_rollout(RolloutConfig(env="household", out=tmp_path / "src", tasks=2, samples=1, progress=False,
                                    agent={"kind": "epsilon", "epsilon": 0.5, "seed": 1},
                                    env_kwargs={"max_steps": 8}))
    sources = {t.id: t for t in src.store}
    res = run_rollout(RolloutConfig(env="household", out=tmp_path / "c", progress=False, env_kwargs={"max_steps": 8},
                                    agent={"kind": "random", "seed": 2},
                                    start={"source": tmp_path / "src", "prefix_lengths": "states", "completions": 2}))
    comps = res.store.load()
    assert len(comps) == 2 * sum(len(t.steps) for t in sources.values())
    for c in comps:
        s, k = sources[c.meta["prefix_of"]], c.meta["prefix_len"]
        assert c.steps[:k] == s.steps[:k] and c.seed == s.seed and c.task_id == s.task_id
        assert len(c.steps) > k or c.termination != "max_steps"
        if c.termination == "max_steps":
            assert c.steps[-1].truncated and not c.steps[-1].terminated
    # the two completions of one prefix are distinct samples: resume skips both, nothing is redone
    again = run_rollout(RolloutConfig(env="household", out=tmp_path / "c", progress=False, env_kwargs={"max_steps": 8},
                                      agent={"kind": "random", "seed": 2},
                                      start={"source": tmp_path / "src", "prefix_lengths": "states", "completions": 2}))
    assert len(again.store.load()) == len(comps)


def test_math_shepherd_end_to_end_from_the_cli(tmp_path):
    def run(*args: str) -> None:
        proc = subprocess.run([*CLI, *args], check=False, capture_output=True, text=True, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr[-3000:]

    run("rollout", "--env", "arithmetic", "--agent", "expert", "--expert-kind", "noisy", "--split", "train",
        "--tasks", "12", "--out", "src", "--no-progress")
    run("rollout", "--env", "arithmetic", "--agent", "expert", "--expert-kind", "noisy", "--from", "src",
        "--completions", "4", "--out", "comp", "--no-progress")
    run("targets", "--method", "math-shepherd", "--in", "src", "--completions", "comp", "--out", "ms",
        "--split", "keep")
    summary = json.loads(Path(tmp_path / "ms" / "summary.json").read_text())
    truth = summary["ground_truth"]
    n_steps = sum(len(t.steps) for t in TrajectoryStore.open(tmp_path / "src"))
    assert truth["key"] == "step_correct" and truth["n"] == n_steps
    assert truth["auroc"] > 0.75  # Math-Shepherd's soft labels rank correct steps above wrong ones

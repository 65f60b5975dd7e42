"""`proctor prm score` reads what the README documents: a trajectory store (scores written back onto the steps
with --write-back), stepwise records without labels, and ProcessBench files with every step kept."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from proctor.cli import app
from proctor.prm.model import ProcessRewardModel
from proctor.prm.scoring import PRMScorer
from proctor.rollout import RolloutConfig, run_rollout
from proctor.store import TrajectoryStore

runner = CliRunner()


@pytest.fixture(scope="module")
def prm_dir(tiny_model_dir, tmp_path_factory):
    prm = ProcessRewardModel.build(tiny_model_dir, "scalar", dtype="float32")
    return prm.save_pretrained(tmp_path_factory.mktemp("prm") / "prm")


def _lines(output: str) -> list[dict]:
    return [json.loads(line) for line in output.splitlines() if line.startswith('{"id"')]


def test_scores_a_trajectory_store_and_writes_them_back(prm_dir, tmp_path):
    store = tmp_path / "r"
    run_rollout(RolloutConfig(env="household", out=store, tasks=2, samples=2, seed=0, progress=False,
                              agent={"kind": "epsilon", "epsilon": 0.5}, env_kwargs={"max_steps": 6}))
    back = tmp_path / "scored"
    res = runner.invoke(app, ["prm", "score", str(prm_dir), str(store), "--write-back", str(back),
                              "--name", "tiny"])
    assert res.exit_code == 0, res.output
    printed = {row["id"]: row["scores"] for row in _lines(res.stdout)}
    trajs = TrajectoryStore.open(store).load()
    assert set(printed) == {t.id for t in trajs}
    expected = PRMScorer(ProcessRewardModel.from_pretrained(prm_dir)).score_trajectories(trajs)
    for t, want in zip(trajs, expected, strict=True):
        assert printed[t.id] == pytest.approx(want, abs=1e-5) and len(want) == len(t.steps)
    scored = {t.id: t for t in TrajectoryStore.open(back).load()}
    for t in trajs:
        got = [s.scores["tiny"] for s in scored[t.id].steps]
        assert got == pytest.approx(printed[t.id])
        assert [s.action for s in scored[t.id].steps] == [s.action for s in t.steps]


def test_stepwise_records_need_no_labels(prm_dir, tmp_path):
    data = tmp_path / "steps.jsonl"
    data.write_text(json.dumps({"prompt": "Task: add 2 and 3.", "completions": ["2 + 3 = 5", "Answer: 5"]}) + "\n"
                    + json.dumps({"id": "b", "prompt": "Task", "completions": ["x"], "labels": [True]}) + "\n")
    res = runner.invoke(app, ["prm", "score", str(prm_dir), str(data)])
    assert res.exit_code == 0, res.output
    rows = _lines(res.stdout)
    assert [r["id"] for r in rows] == [f"{data}:1", "b"] and [len(r["scores"]) for r in rows] == [2, 1]


def test_processbench_format_scores_every_step(prm_dir, tmp_path):
    """The first wrong step is step 0 of 3: all 3 steps are scored (the training importer keeps only 1)."""
    data = tmp_path / "pb.json"
    data.write_text(json.dumps([
        {"id": "e", "problem": "1 + 1?", "steps": ["1 + 1 = 3", "so 3", "Answer: 3"], "label": 0},
        {"id": "c", "problem": "2 + 2?", "steps": ["2 + 2 = 4", "Answer: 4"], "label": -1},
    ]))
    res = runner.invoke(app, ["prm", "score", str(prm_dir), str(data), "--format", "processbench"])
    assert res.exit_code == 0, res.output
    assert [(r["id"], len(r["scores"])) for r in _lines(res.stdout)] == [("e", 3), ("c", 2)]


@pytest.mark.data
def test_processbench_gsm8k_every_solution_gets_a_score_per_step(prm_dir, shared_data, tmp_path):
    """Before: 191 of gsm8k's 400 solutions came back with fewer scores than steps."""
    path = shared_data / "processbench" / "gsm8k.json"
    rows = json.loads(path.read_text())[190:210]  # erroneous and correct solutions
    small = tmp_path / "gsm8k20.json"
    small.write_text(json.dumps(rows))
    res = runner.invoke(app, ["prm", "score", str(prm_dir), str(small), "--format", "processbench"])
    assert res.exit_code == 0, res.output
    assert [len(r["scores"]) for r in _lines(res.stdout)] == [len(r["steps"]) for r in rows]
    assert any(r["label"] not in (-1, len(r["steps"]) - 1) for r in rows)


def test_score_errors_are_one_line_before_the_model_loads(prm_dir, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "p", "completions": ["a"]}\n{"prompt": "p"}\n')
    broken = tmp_path / "broken_prm"  # looks like a PRM folder, but loading it would fail differently
    broken.mkdir()
    (broken / "prm_config.json").write_text("{}")
    for args, message in (
        ([str(broken), str(bad)], f"{bad}:2: field 'completions': Field required"),
        ([str(tmp_path / "none"), str(bad)], "no such PRM folder"),
        ([str(prm_dir), str(tmp_path / "none.jsonl")], "no such data file"),
        ([str(prm_dir), str(bad), "--write-back", str(tmp_path / "o")], "DATA must be a trajectory store"),
    ):
        res = runner.invoke(app, ["prm", "score", *args], terminal_width=300)
        assert res.exit_code == 2, res.output
        assert message in res.output and len(res.output.strip().splitlines()) == 1, res.output

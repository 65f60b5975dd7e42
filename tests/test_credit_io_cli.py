"""Adapters (store / Parquet in, Parquet out, write-back onto Step.targets) and `proctor targets`."""

from __future__ import annotations

import json

import datasets
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from credit_fixtures import toy_rollouts, traj
from proctor.cli import app
from proctor.credit import Sources, run_method
from proctor.credit.io import load_trajectories, records_to_dataset, write_back
from proctor.credit.summary import summarize
from proctor.store import TrajectoryStore
from proctor.trajectory_export import trajectories_to_dataset

runner = CliRunner()


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "store"
    with TrajectoryStore(path) as s:
        s.extend(toy_rollouts())
    return path


def test_write_back_round_trip(tmp_path):
    recs = run_method("mc-q", Sources(toy_rollouts()), {"gamma": 0.5}).records
    filled = write_back(toy_rollouts(), recs)
    with TrajectoryStore(tmp_path / "out") as s:
        s.extend(filled)
    back = {t.id: t for t in TrajectoryStore.open(tmp_path / "out").load()}
    assert back["tau1"].steps[1].targets == {"mc-q": 1.0, "mc-q:q": 1.0, "mc-q:return": 1.0}
    assert back["tau2"].steps[0].targets["mc-q"] == pytest.approx(0.5)
    assert toy_rollouts()[0].steps[0].targets == {}


def test_load_from_parquet_and_saved_dataset(tmp_path):
    ds = trajectories_to_dataset(toy_rollouts())
    ds.to_parquet(str(tmp_path / "t.parquet"))
    ds.save_to_disk(str(tmp_path / "saved"))
    assert [t.id for t in load_trajectories(tmp_path / "t.parquet")] == ["tau1", "tau2", "tau3"]
    assert len(load_trajectories(tmp_path / "saved")) == 3
    with pytest.raises(FileNotFoundError, match="not a trajectory store"):
        load_trajectories(tmp_path)


def test_records_table_and_summary():
    recs = run_method("mc-q", Sources(toy_rollouts()), {"gamma": 0.5}).records
    ds = records_to_dataset(recs)
    assert ds.num_rows == 5 and {"trajectory_id", "step", "state_key", "target", "visits", "params"} <= set(
        ds.column_names)
    s = summarize(recs)
    assert (s["states"], s["units"]) == (2, 4)  # s0, s1; (s0,x), (s0,w), (s1,y), (s1,z)
    assert s["visit_histogram"] == {"1": 3, "2": 1}
    assert sum(b["count"] for b in s["label_histogram"]) == 5


def test_cli_mc_q(store, tmp_path):
    out, back = tmp_path / "targets", tmp_path / "back"
    res = runner.invoke(app, ["targets", "--method", "mc-q", "--in", str(store), "--out", str(out),
                              "-p", "gamma=0.5", "--split", "keep", "--write-back", str(back)])
    assert res.exit_code == 0, res.output
    assert "visit histogram" in res.output and "label histogram" in res.output
    rows = datasets.Dataset.from_parquet(str(out / "targets.parquet")).to_list()
    got = {(r["trajectory_id"], r["step"]): r["target"] for r in rows}
    assert got == pytest.approx({("tau1", 0): 0.5, ("tau1", 1): 1.0, ("tau2", 0): 0.5, ("tau2", 1): 0.0,
                                 ("tau3", 0): 0.0})
    assert json.loads(rows[0]["params"])["gamma"] == 0.5
    summary = json.loads((out / "summary.json").read_text())
    assert summary["method"] == "mc-q" and summary["states"] == 2
    assert TrajectoryStore.open(back).load()[0].steps[0].targets["mc-q"] == pytest.approx(0.5)


def test_cli_task_split_and_math_shepherd(tmp_path):
    src = tmp_path / "src"
    with TrajectoryStore(src) as s:
        s.extend(toy_rollouts()[:1])
    comps = tmp_path / "comps"
    with TrajectoryStore(comps) as s:
        s.extend(traj(f"c{i}", [("o0", "x"), ("o1", "y")], ok, sample=10 + i,
                      meta={"prefix_of": "tau1", "prefix_len": 1}) for i, ok in enumerate([True, False]))
    out = tmp_path / "ms"
    res = runner.invoke(app, ["targets", "--method", "math-shepherd", "--in", str(src), "--out", str(out),
                              "--completions", str(comps)])
    assert res.exit_code == 0, res.output
    rows = datasets.Dataset.from_parquet(str(out / "targets.parquet")).to_list()
    assert [r["target"] for r in rows] == [0.5, 1.0]


def test_cli_errors_are_clear(store, tmp_path):
    res = runner.invoke(app, ["targets", "--method", "mc-q", "--in", str(store), "--out", str(tmp_path / "o"),
                              "-p", "gamma=7"])
    assert res.exit_code == 2 and "gamma" in res.output
    res = runner.invoke(app, ["targets", "--method", "nope", "--in", str(store), "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "unknown credit method" in res.output
    res = runner.invoke(app, ["targets", "--method", "math-shepherd", "--in", str(store),
                              "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "completions" in res.output


def test_cli_zero_preference_pairs_is_a_result(tmp_path):
    """One action per state: no pair, so empty outputs (with the pair columns) and a line saying so."""
    src = tmp_path / "same"
    with TrajectoryStore(src) as s:
        s.extend([traj("a", [("o0", "x")], True, sample=0), traj("b", [("o0", "x")], False, sample=1)])
    out = tmp_path / "pairs"
    res = runner.invoke(app, ["targets", "--method", "preference", "--in", str(src), "--out", str(out),
                              "--split", "keep"], terminal_width=250)
    assert res.exit_code == 0, res.output
    assert "made 0 records" in res.output and "wrote 0 records" in res.output
    table = pq.read_table(out / "targets.parquet")
    assert table.num_rows == 0 and {"chosen", "rejected", "q_chosen", "kind"} <= set(table.column_names)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["records"] == 0 and "no state" in summary["warning"]


def test_cli_warns_when_every_outcome_is_the_same(store, tmp_path):
    src = tmp_path / "all_won"
    with TrajectoryStore(src) as s:
        s.extend([traj(f"w{i}", [("o0", "x"), ("o1", "y")], True, sample=i) for i in range(3)])
    res = runner.invoke(app, ["targets", "--method", "mc-q", "--in", str(src), "--out", str(tmp_path / "t")],
                        terminal_width=250)
    assert res.exit_code == 0, res.output
    assert "every one of the 3 trajectories succeeded" in res.output and "--agent epsilon" in res.output
    mixed = runner.invoke(app, ["targets", "--method", "mc-q", "--in", str(store), "--out", str(tmp_path / "m")],
                          terminal_width=250)
    assert mixed.exit_code == 0 and "every one of" not in mixed.output


def test_cli_missing_input_is_one_line(tmp_path):
    res = runner.invoke(app, ["targets", "--method", "mc-q", "--in", str(tmp_path / "nope"),
                              "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "no such trajectory store" in res.output
    assert len(res.output.strip().splitlines()) == 1


def test_targets_help_states_gigpo_step_reward():
    res = runner.invoke(app, ["targets", "--help"], terminal_width=250)
    assert "gigpo's step reward is the env's Step.reward" in " ".join(res.output.split())

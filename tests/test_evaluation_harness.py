"""`run_eval`, `compare` and the `proctor eval` / `proctor compare` commands on real household and `guess`
runs (a crashing env, a tiny PRM's scores, an N sweep)."""

from __future__ import annotations

import csv
import io
import json

import pytest
from typer.testing import CliRunner

from proctor.cli import app
from proctor.evaluation import EvalConfig, run_eval
from proctor.evaluation.compare import compare
from proctor.evaluation.loading import load_run
from proctor.rollout import EnvFailures
from proctor.store import TrajectoryStore
from test_report import report_root  # noqa: F401  (the shared session fixture: real evaluations)

HOUSEHOLD = {"env": "household", "split": "test", "tasks": 4, "progress": False}


def test_expert_evaluation_writes_summary_and_csv_and_resumes(tmp_path):
    cfg = EvalConfig(**HOUSEHOLD, agent={"kind": "expert", "expert": "search"}, out=tmp_path / "e")
    s = run_eval(cfg).summary
    assert (s["episodes"], s["successes"], s["success_ci95"][1]) == (4, 4, 1.0)
    assert s["success_ci95"][0] == pytest.approx(0.5101, abs=1e-4)  # Wilson, 4 of 4
    assert s["budget"]["env_steps"] == s["steps"] > 0 and s["prm"] is None
    assert s["policy"] == "e" and s["agent"] == {"kind": "expert", "expert": "search"}  # named by its folder
    assert json.loads((tmp_path / "e" / "summary.json").read_text())["successes"] == 4
    rows = list(csv.DictReader(io.StringIO((tmp_path / "e" / "summary.csv").read_text())))
    assert rows[0]["group"] == "all" and sum(int(r["episodes"]) for r in rows[1:]) == 4
    again = run_eval(cfg).summary  # a re-run resumes: nothing new is rolled out
    assert len(TrajectoryStore.open(tmp_path / "e" / "trajectories").load()) == 4
    assert {k: again[k] for k in ("episodes", "successes", "steps")} == {k: s[k] for k in ("episodes", "successes",
                                                                                           "steps")}


def test_crashed_episodes_fail_the_evaluation_and_are_listed_in_its_summary(tmp_path):
    cfg = EvalConfig(env="guess", env_module="test_rollout_envs", env_kwargs={"crash_on": ["test-1"]},
                     agent={"kind": "expert"}, out=tmp_path / "g", tasks=4, samples=2, progress=False)
    with pytest.raises(EnvFailures, match=r"^2 of 8 episodes ended in env_error \(the first, task 'test-1' sample 0: "
                                          r"RuntimeError: boom on test-1\)"):
        run_eval(cfg)
    s = json.loads((tmp_path / "g" / "summary.json").read_text())
    assert (s["episodes"], s["successes"]) == (8, 6)
    assert s["terminations"]["env_error"] == 2
    assert [(c["task_id"], c["sample"]) for c in s["crashed"]] == [("test-1", 0), ("test-1", 1)]
    assert all("boom on test-1" in c["error"] for c in s["crashed"])


def test_prm_scores_are_written_onto_every_step(report_root):  # noqa: F811
    run = load_run(report_root / "epsilon")
    prm = run.summary["prm"]
    assert run.summary["store"] == "scored" and run.summary["unscored"] == []
    assert prm["scored_steps"] == run.summary["steps"] == sum(len(t.steps) for t in run.trajectories)
    assert all(0 < s.scores["prm"] < 1 for t in run.trajectories for s in t.steps)
    assert 0 < prm["mean_step_score"] < 1
    # the rollout store itself is untouched
    raw = TrajectoryStore.open(report_root / "epsilon" / "trajectories").load()
    assert all(not s.scores for t in raw for s in t.steps)


def test_sweep_writes_one_folder_per_n_and_a_plot(report_root):  # noqa: F811
    sweep = json.loads((report_root / "choice" / "sweep.json").read_text())
    assert [r["n"] for r in sweep["rows"]] == [1, 3] and sweep["policy"] == "best-of-n"
    for n in (1, 3):
        s = json.loads((report_root / "choice" / f"n{n}" / "summary.json").read_text())
        assert s["n"] == n and s["agent"]["n"] == n and s["agent"]["agent"]["kind"] == "epsilon"
    assert (report_root / "choice" / "success_vs_n.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (report_root / "choice" / "sweep.csv").read_text().splitlines()[0].startswith("n,policy,")


def test_a_sweep_needs_an_agent_with_n(tmp_path):
    with pytest.raises(ValueError, match="agent kind 'random' has no field 'n'"):
        EvalConfig(**HOUSEHOLD, agent={"kind": "random"}, out=tmp_path, ns=[1, 2])
    with pytest.raises(ValueError, match="distinct values >= 1"):
        EvalConfig(**HOUSEHOLD, agent={"kind": "random"}, out=tmp_path, ns=[0, 2])


def test_compare_pairs_the_same_task_sample_keys(report_root):  # noqa: F811
    result = compare([report_root / "random", report_root / "expert", report_root / "choice"], resamples=2000)
    base, expert, n1, n3 = result.rows
    assert base["pairs"] is None and base["policy"] == "random"
    # random lost all 4, the expert won all 4: 4 discordant pairs, all for B → p = 2 · 2⁻⁴
    assert (expert["pairs"], expert["b01"], expert["b10"]) == (4, 4, 0)
    assert expert["p_value"] == pytest.approx(0.125) and expert["diff"] == 1.0 and expert["diff_ci95"] == [1.0, 1.0]
    assert n1["policy"] == "best-of-n N=1" and n1["pairs"] == 3  # the sweep ran the first 3 tasks
    assert n3["pairs"] == 3 and n3["b10"] == 0
    with pytest.raises(ValueError, match="not a `proctor eval` output folder"):
        compare([report_root / "random", report_root / "prm-train"])


def test_a_runs_results_are_paired_with_its_first_row(report_root):  # noqa: F811
    """`proctor run`'s summary rows (here: three evaluations of the fixture) each carry their pairing with the
    first row, and the paired table prints it."""
    from proctor.pipeline.run import paired_with_first
    from proctor.pipeline.table import paired_table

    results = [{"iteration": 0, "policy": "random", "dir": "random"},
               {"iteration": 0, "policy": "expert", "dir": "expert"},
               {"iteration": 1, "policy": "random again", "dir": "random"}]
    paired_with_first(results, report_root)
    assert "vs_first" not in results[0]
    # random lost all 4, the expert won all 4: 4 pairs won, none lost, p = 2 · 2⁻⁴
    expert = results[1]["vs_first"]
    assert (expert["policy"], expert["pairs"], expert["b01"], expert["b10"], expert["diff"]) == ("random", 4, 4, 0,
                                                                                                 1.0)
    assert expert["p_value"] == pytest.approx(0.125)
    assert (results[2]["vs_first"]["b01"], results[2]["vs_first"]["b10"], results[2]["vs_first"]["diff"]) == (0, 0,
                                                                                                               0.0)
    table = paired_table({"results": results})
    assert table is not None and table.row_count == 2
    cells = [list(column.cells) for column in table.columns]
    assert [c[0] for c in cells] == ["0", "expert", "4", "+100.0 [+100.0, +100.0]", "4 / 0", "0.12"]
    assert paired_table({"results": results[:1]}) is None


def test_eval_and_compare_commands(tmp_path):
    runner = CliRunner()
    a = runner.invoke(app, ["eval", "--env", "household", "--agent", "expert", "--agent-arg", "expert=search",
                            "--tasks", "2", "--out", str(tmp_path / "a"), "--no-progress"])
    assert a.exit_code == 0, a.output
    assert "100.0%" in a.output and "by task type" in a.output
    b = runner.invoke(app, ["eval", "--env", "household", "--agent", "random", "--tasks", "2", "--max-steps", "5",
                            "--out", str(tmp_path / "b"), "--name", "rand", "--no-progress"])
    assert b.exit_code == 0, b.output
    assert json.loads((tmp_path / "b" / "summary.json").read_text())["policy"] == "rand"
    c = runner.invoke(app, ["compare", str(tmp_path / "b"), str(tmp_path / "a"), "--json", str(tmp_path / "c.json")])
    assert c.exit_code == 0, c.output
    assert "McNemar" in c.output
    rows = json.loads((tmp_path / "c.json").read_text())["rows"]
    assert rows[1]["p_value"] == pytest.approx(0.5)  # 2 discordant pairs: 2 · 2⁻²
    assert [r["label"] for r in rows] == ["rand", "a"] and "won / lost" in c.output
    assert (rows[1]["b01"], rows[1]["b10"]) == (2, 0)  # the expert won both pairs the random agent lost
    twice = runner.invoke(app, ["compare", str(tmp_path / "b"), str(tmp_path / "b"), "--json", str(tmp_path / "d.json")])
    assert twice.exit_code == 0, twice.output
    assert [r["label"] for r in json.loads((tmp_path / "d.json").read_text())["rows"]] == ["rand (.)", "rand (.)"]
    bad = runner.invoke(app, ["eval", "--env", "household", "--agent", "random", "--n", "1,2", "--tasks", "1",
                              "--out", str(tmp_path / "x"), "--no-progress"])
    assert bad.exit_code == 2 and "no field 'n'" in bad.output
    worse = runner.invoke(app, ["eval", "--env", "household", "--agent", "random", "--n", "1,x",
                                "--out", str(tmp_path / "x")])
    assert worse.exit_code == 2 and "comma-separated integers" in worse.output


def test_eval_command_reads_a_config_file_and_options_override_it(tmp_path):
    cfg = tmp_path / "eval.yaml"
    cfg.write_text("env: household\nsplit: valid\ntasks: 3\nagent: {kind: epsilon, epsilon: 0.2}\n"
                   "env_kwargs: {max_steps: 6}\n")
    r = CliRunner().invoke(app, ["eval", "--config", str(cfg), "--tasks", "2", "--out", str(tmp_path / "o"),
                                 "--no-progress"])
    assert r.exit_code == 0, r.output
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert (s["split"], s["tasks"], s["agent"]["epsilon"], s["env_kwargs"]) == ("valid", 2, 0.2, {"max_steps": 6})
    assert s["agent"]["seed"] == 0 and s["policy"] == "o"
    r = CliRunner().invoke(app, ["eval", "--config", str(cfg), "--tasks", "2", "--agent-arg", "epsilon=0.4",
                                 "--out", str(tmp_path / "a"), "--no-progress"])
    assert r.exit_code == 0, r.output  # an agent option changes the file's agent (not a random one in its place)
    assert json.loads((tmp_path / "a" / "summary.json").read_text())["agent"] == {**s["agent"], "epsilon": 0.4}
    bad = tmp_path / "bad.yaml"
    bad.write_text("env: household\nagent: {kind: random}\nsamples: 0\n")
    r = CliRunner().invoke(app, ["eval", "--config", str(bad), "--out", str(tmp_path / "b")])
    assert r.exit_code == 2 and "samples" in r.output and str(bad) in r.output


def test_eval_command_sweeps_n_of_a_search_agent(report_root, tmp_path):  # noqa: F811
    prm = report_root.parent / f"{report_root.name}-prm"
    r = CliRunner().invoke(app, ["eval", "--env", "household", "--agent", "best-of-n", "--agent-arg", f"prm={prm}",
                                 "--agent-arg", 'agent={"kind": "epsilon", "epsilon": 0.5}', "--n", "2,1",
                                 "--tasks", "1", "--max-steps", "4", "--out", str(tmp_path / "s"), "--no-progress"])
    assert r.exit_code == 0, r.output
    assert "success vs N" in r.output and (tmp_path / "s" / "success_vs_n.png").is_file()
    sweep = json.loads((tmp_path / "s" / "sweep.json").read_text())
    assert [row["n"] for row in sweep["rows"]] == [1, 2] and all(row["episodes"] == 1 for row in sweep["rows"])


def test_eval_command_runs_a_search_method_with_the_agent_as_its_policy(report_root, tmp_path):  # noqa: F811
    prm = report_root.parent / f"{report_root.name}-prm"
    common = ["--env", "household", "--tasks", "2", "--max-steps", "4", "--no-progress"]
    r = CliRunner().invoke(app, ["eval", *common, "--agent", "epsilon", "--agent-arg", "epsilon=0.5",
                                 "--search", "beam", "--search-arg", f"prm={prm}", "--search-arg", "beams=2",
                                 "--search-arg", "expansions=2", "--out", str(tmp_path / "beam")])
    assert r.exit_code == 0, r.output
    s = json.loads((tmp_path / "beam" / "summary.json").read_text())
    assert s["episodes"] == 2 and "agent" not in s
    assert s["search"]["method"] == "beam" and s["search"]["agent"]["kind"] == "epsilon"
    assert s["budget"]["env_steps"] > s["steps"]  # every expansion stepped its own env copy
    # a sweep of a search method's `n`, and an agent run compared with it on the same tasks
    r = CliRunner().invoke(app, ["eval", *common, "--agent", "epsilon", "--agent-arg", "epsilon=0.5",
                                 "--search", "trajectory-best-of-n", "--search-arg", f"prm={prm}", "--n", "1,2",
                                 "--out", str(tmp_path / "tbon")])
    assert r.exit_code == 0, r.output
    sweep = json.loads((tmp_path / "tbon" / "sweep.json").read_text())
    assert [row["n"] for row in sweep["rows"]] == [1, 2] and sweep["search"]["method"] == "trajectory-best-of-n"
    assert sweep["rows"][1]["budget"]["env_steps"] > sweep["rows"][0]["budget"]["env_steps"]


def test_eval_config_takes_exactly_one_of_agent_and_search(tmp_path):
    with pytest.raises(ValueError, match="exactly one of agent and search"):
        EvalConfig(**HOUSEHOLD, out=tmp_path / "x")
    with pytest.raises(ValueError, match="no field 'n' to sweep"):
        EvalConfig(**HOUSEHOLD, out=tmp_path / "x", ns=[1, 2],
                   search={"method": "beam", "agent": {"kind": "random"}, "prm": str(tmp_path)})

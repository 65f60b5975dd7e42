"""The report from real small runs: household evaluations (search expert, random, ε-expert, and per-step
best-of-N of the ε-expert with a tiny PRM, swept over N), the PRM's scores written onto every step, and MC-Q
labels of one evaluation's episodes in a labelled store beside it.

`make_report_folder` is shared with the real-browser test (`test_report_browser.py`)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from proctor.evaluation import EvalConfig, run_eval
from proctor.evaluation.report import build_report, embed_json
from proctor.evaluation.report_data import collect
from proctor.search import agents as _search_agents  # noqa: F401  (registers the agent kind best-of-n)


def make_prm(folder: Path, backbone: Path) -> Path:
    """An untrained scalar PRM on the tiny backbone (seeded head), saved as a PRM folder."""
    from proctor.prm.model import ProcessRewardModel

    if not (folder / "prm_config.json").exists():
        import torch

        torch.manual_seed(0)  # the new head's weights, so that runs repeat
        ProcessRewardModel.build(str(backbone), "scalar", dtype="float32").save_pretrained(folder)
    return folder


def make_report_folder(root: Path, backbone: Path) -> Path:
    """Real evaluations of household test tasks under `root` (see module docstring); returns `root`."""
    from proctor.credit import Sources, run_method
    from proctor.credit.io import write_back
    from proctor.store import TrajectoryStore

    prm = make_prm(root.parent / f"{root.name}-prm", backbone)
    common = {"env": "household", "split": "test", "tasks": 4, "progress": False, "batch": 4}
    run_eval(EvalConfig(**common, agent={"kind": "expert", "expert": "search"}, out=root / "expert", prm=prm))
    run_eval(EvalConfig(**common, agent={"kind": "random"}, out=root / "random", env_kwargs={"max_steps": 8}))
    eps = run_eval(EvalConfig(**common, agent={"kind": "epsilon", "epsilon": 0.5}, out=root / "epsilon", samples=2,
                              env_kwargs={"max_steps": 12}, prm=prm))
    run_eval(EvalConfig(**{**common, "tasks": 3}, name="best-of-n", ns=[1, 3], out=root / "choice",
                        env_kwargs={"max_steps": 10},
                        agent={"kind": "best-of-n", "prm": str(prm), "agent": {"kind": "epsilon", "epsilon": 0.5}}))
    labelled = root / "epsilon-labelled"
    if not labelled.exists():  # MC-Q targets of the ε-expert's episodes (2 samples per task)
        trajs = TrajectoryStore.open(root / "epsilon" / eps.summary["store"]).load()
        records = run_method("mc-q", Sources(trajectories=trajs), {"gamma": 0.95}).records
        store = TrajectoryStore(labelled)
        for t in write_back(trajs, records):
            store.append(t)
        store.close()
    (root / "prm-train").mkdir(exist_ok=True)
    (root / "prm-train" / "trainer_state.json").write_text(json.dumps({"global_step": 3, "log_history": [
        {"step": 1, "loss": 0.71}, {"step": 2, "loss": 0.52}, {"step": 3, "loss": 0.44, "eval_loss": 0.5}]}))
    return root


@pytest.fixture(scope="session")
def report_root(tmp_path_factory, tiny_model_dir) -> Path:
    return make_report_folder(tmp_path_factory.mktemp("report") / "evals", tiny_model_dir)


def test_collect_finds_every_evaluation_and_sweep(report_root):
    data = collect(report_root)
    names = [p["name"] for p in data["policies"]]  # by name (the folder's, unless given), in the order made
    assert names == ["expert", "random", "epsilon", "best-of-n N=1", "best-of-n N=3"]
    assert all(p["source"] == "eval" for p in data["policies"])  # the labelled copy is not a policy of its own
    assert [r["n"] for r in data["sweeps"][0]["rows"]] == [1, 3]
    by = {p["name"]: p for p in data["policies"]}
    assert by["expert"]["summary"]["success_rate"] == 1.0
    assert by["random"]["summary"]["terminations"]["max_steps"] == 4
    assert data["training"][0]["series"]["loss"] == [[1.0, 0.71], [2.0, 0.52], [3.0, 0.44]]
    assert data["training"][0]["series"]["eval_loss"] == [[3.0, 0.5]]


def test_viewer_data_carries_scores_candidates_and_mc_q(report_root):
    data = collect(report_root)
    pid = {p["name"]: p["id"] for p in data["policies"]}
    eps = data["trajectories"][pid["epsilon"]]
    assert len(eps) == 8
    # the tiny PRM's score of every step, and the MC-Q target merged in from the labelled store
    assert all(isinstance(s["s"], float) and 0 <= s["s"] <= 1 for t in eps for s in t["steps"])
    assert all(s["q"] is not None for t in eps for s in t["steps"])
    finished = [t for t in eps if t["success"]]
    assert finished and all(t["steps"][-1]["q"] == 1.0 for t in finished)  # MC-Q of a winning last step
    choice = data["trajectories"][pid["best-of-n N=3"]]
    steps = [s for t in choice for s in t["steps"]]
    assert all(1 <= len(s["c"]) <= 3 and sum(c["count"] for c in s["c"]) == 3 for s in steps)
    for s in steps:  # the chosen action is the best-scored candidate, and its score is the step's score
        chosen = [c for c in s["c"] if c["chosen"]]
        assert len(chosen) == 1 and chosen[0]["action"] == s["a"]
        assert chosen[0]["score"] == s["s"] == max(c["score"] for c in s["c"])
    failed = [t for t in eps + choice if not t["success"]]
    for t in failed:
        scores = [s["s"] for s in t["steps"]]
        below = next((i for i, x in enumerate(scores) if x < 0.5), None)
        assert t["wrong"]["first_below"] == below


def test_report_is_one_self_contained_file(report_root):
    path = build_report(report_root)
    assert path == report_root / "report.html"
    page = path.read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)  # nothing fetched from a network
    assert "<link" not in page and "@import" not in page
    blob = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page, re.DOTALL).group(1)
    data = json.loads(blob)
    assert len(data["policies"]) == 5 and data["generated"]


def test_embedded_json_cannot_close_the_script_element():
    text = embed_json({"o": "</script><script>alert(1)</script> & <b>"})
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == {"o": "</script><script>alert(1)</script> & <b>"}
    assert json.loads(embed_json({"s": [float("nan"), 0.5, float("inf")]})) == {"s": [None, 0.5, None]}


def test_a_plain_rollout_folder_gets_a_report(tmp_path):
    """A folder with only trajectory stores (a `proctor rollout` or quickstart output) is summarised too."""
    from proctor.rollout import RolloutConfig, run_rollout

    run_rollout(RolloutConfig(env="household", agent={"kind": "random"}, out=tmp_path / "rollouts" / "test",
                              tasks=2, env_kwargs={"max_steps": 5}, progress=False)).store.close()
    data = collect(tmp_path)
    assert [(p["name"], p["source"], p["summary"]["episodes"]) for p in data["policies"]] == [
        ("rollouts/test", "store", 2)]
    assert build_report(tmp_path).is_file()


def test_a_runs_paired_rows_are_shown(tmp_path):
    """A `proctor run` folder's summary.json rows paired with its first row go into the report's data; a plain
    folder has none."""
    from proctor.rollout import RolloutConfig, run_rollout

    run_rollout(RolloutConfig(env="household", agent={"kind": "random"}, out=tmp_path / "rollouts", tasks=2,
                              env_kwargs={"max_steps": 3}, progress=False)).store.close()
    assert collect(tmp_path)["paired"] == []
    vs = {"policy": "policy", "iteration": 0, "pairs": 200, "b01": 43, "b10": 21, "diff": 0.11,
          "diff_ci95": [0.035, 0.19], "p_value": 0.008}
    (tmp_path / "summary.json").write_text(json.dumps({"env": "household", "results": [
        {"iteration": 0, "policy": "policy", "dir": "x"},
        {"iteration": 0, "policy": "best-of-8", "dir": "y", "vs_first": vs},
        {"iteration": 1, "policy": "cut short", "vs_first": {"diff": 0.1}}]}))  # incomplete: left out
    assert collect(tmp_path)["paired"] == [{"iteration": 0, "policy": "best-of-8", "vs_first": vs}]
    html = build_report(tmp_path).read_text()
    assert 'id="paired-table"' in html and "renderPaired()" in html


def test_report_cli(report_root, tmp_path):
    from typer.testing import CliRunner

    from proctor.cli import app

    out = tmp_path / "r.html"
    result = CliRunner().invoke(app, ["report", str(report_root), "--out", str(out), "--max-trajectories", "2"])
    assert result.exit_code == 0, result.output
    data = json.loads(re.search(r'id="report-data">(.*?)</script>', out.read_text(), re.DOTALL).group(1))
    assert all(len(v) <= 2 for v in data["trajectories"].values())
    assert {p["shown"] for p in data["policies"]} == {2} and max(p["total"] for p in data["policies"]) == 8
    bad = CliRunner().invoke(app, ["report", str(tmp_path / "nowhere")])
    assert bad.exit_code == 2 and "no such folder" in bad.output


def test_report_of_a_folder_with_nothing_to_report_is_one_line(tmp_path):
    from typer.testing import CliRunner

    from proctor.cli import app

    (tmp_path / "empty").mkdir()
    result = CliRunner().invoke(app, ["report", str(tmp_path / "empty")])
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
    assert "no evaluation (summary.json, sweep.json) or trajectory store under it" in result.output
    assert not (tmp_path / "empty" / "report.html").exists()


def test_report_out_elsewhere_follows_the_one_rule(report_root, tmp_path):
    """An --out file is rebuilt when it is a report of the same folder, refused when it is anything else, and
    replaced with --overwrite."""
    from typer.testing import CliRunner

    from proctor.cli import app

    out = tmp_path / "r.html"
    out.write_text("my notes")
    report = ["report", str(report_root), "--out", str(out), "--max-trajectories", "1"]
    refused = CliRunner().invoke(app, report)
    assert refused.exit_code == 2 and "holds outputs that record no run of this command" in refused.output
    assert out.read_text() == "my notes"
    assert CliRunner().invoke(app, [*report, "--overwrite"]).exit_code == 0 and "report-data" in out.read_text()
    assert CliRunner().invoke(app, report).exit_code == 0  # a report of the same folder: rebuilt
    other = CliRunner().invoke(app, ["report", str(report_root / "expert"), "--out", str(out)])
    assert other.exit_code == 2 and "holds the report of another run (field 'source' is" in other.output


def test_training_log_layouts():
    from proctor.evaluation.report_data import _series

    assert _series({"losses": [0.9, 0.5]}) == {"loss": [[1, 0.9], [2, 0.5]]}  # PRM / SFT logs
    hf = {"global_step": 2, "log_history": [{"step": 10, "loss": 1.5}, {"step": 20, "loss": 1.0, "eval_loss": 1.2}]}
    assert _series(hf) == {"loss": [[10.0, 1.5], [20.0, 1.0]], "eval_loss": [[20.0, 1.2]]}
    dpo = {"iteration": 1, "train": {"steps": 2, "log": [{"loss": 0.69, "margin": 0.0}, {"loss": 0.6, "margin": 0.3}]}}
    assert _series(dpo) == {"loss": [[1.0, 0.69], [2.0, 0.6]]}  # one level down, losses only
    assert _series({"episodes": 4, "success_rate": 0.5, "terminations": {"success": 2}}) == {}


def test_policies_with_one_name_in_several_iterations_are_told_apart(tmp_path):
    from proctor.rollout import RolloutConfig, run_rollout

    for it in ("iter-0", "iter-1"):
        run_eval(EvalConfig(env="household", agent={"kind": "random"}, out=tmp_path / it / "eval" / "policy",
                            name="policy", tasks=1, env_kwargs={"max_steps": 3}, progress=False))
    run_rollout(RolloutConfig(env="household", agent={"kind": "random"}, out=tmp_path / "iter-0" / "rollouts",
                              split="train", tasks=1, env_kwargs={"max_steps": 3}, progress=False))
    names = [(p["name"], p["source"]) for p in collect(tmp_path)["policies"]]
    assert names == [("policy · iter-0", "eval"), ("policy · iter-1", "eval"), ("iter-0/rollouts", "store")]

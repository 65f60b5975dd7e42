"""`prm_serving: {engine: server}`: the loop serves Q_k with `proctor prm serve` and its evaluations score through
it, with the scores of the PRM loaded in-process."""

from __future__ import annotations

import json

import pytest

from proctor.pipeline import PipelineConfig, run_pipeline
from proctor.pipeline.prm_server import with_prm_server
from proctor.store import TrajectoryStore
from test_pipeline import toy_config


def test_with_prm_server_reaches_every_part_that_ranks_with_the_prm():
    ref = {"base_url": "http://127.0.0.1:9"}
    search = {"method": "beam", "prm": "q", "agent": {"kind": "best-of-n", "prm": "q", "base": {"kind": "choice"}}}
    served = with_prm_server(search, "q", ref)
    assert served["prm_server"] == ref and served["agent"]["prm_server"] == ref
    assert "prm_server" not in served["agent"]["base"]
    assert with_prm_server({"kind": "best-of-n", "prm": "other"}, "q", ref) == {"kind": "best-of-n", "prm": "other"}


def test_a_served_likelihood_prm_is_refused_in_one_line(tmp_path):
    cfg = {**toy_config(tmp_path), "prm_serving": {"engine": "server"}, "prm": {"kind": "likelihood", "steps": 2}}
    with pytest.raises(ValueError, match="prm_serving.engine: server serves a PRM head"):
        PipelineConfig.model_validate(cfg)


def _scores(store) -> dict[tuple[str, int, int], float]:
    return {(t.task_id, t.sample, i): s.scores["prm"] for t in TrajectoryStore.open(store).load()
            for i, s in enumerate(t.steps)}


@pytest.mark.slow
def test_evaluations_scored_by_the_served_prm_equal_in_process_scoring(tmp_path):
    """~60 s: the toy loop's iteration 0 twice, Q_k loaded by each evaluation and served by the loop: the policy's
    episodes get the same step scores (to 1e-4) and best-of-2 picks the same actions."""
    runs = {}
    for engine in ("local", "server"):
        cfg = {**toy_config(tmp_path / engine), "iterations": 0, "prm_serving": {"engine": engine}}
        cfg["evaluate"]["entries"] = cfg["evaluate"]["entries"][:2]
        cfg.pop("monitor")
        runs[engine] = run_pipeline(PipelineConfig.model_validate(cfg))
    local, served = (_scores(tmp_path / e / "iter-0" / "eval" / "policy" / "scored") for e in ("local", "server"))
    assert local.keys() == served.keys() and local
    for key, value in local.items():
        assert served[key] == pytest.approx(value, abs=1e-4), key
    actions = {e: sorted((t.task_id, tuple(t.actions)) for t in TrajectoryStore.open(
        tmp_path / e / "iter-0" / "eval" / "best-of-2" / "trajectories").load()) for e in ("local", "server")}
    assert actions["local"] == actions["server"]
    stages = json.loads((tmp_path / "server" / "manifest.json").read_text())["stages"]
    port = json.loads((tmp_path / "server" / "prm-server.json").read_text())["port"]
    assert stages["iter-0/eval/best-of-2"]["config"]["agent"]["prm_server"]["base_url"] == f"http://127.0.0.1:{port}"
    assert stages["iter-0/eval/policy"]["config"]["prm_server"]["base_url"] == f"http://127.0.0.1:{port}"
    assert "prm serve" in (tmp_path / "server" / "prm-server.log").read_text()

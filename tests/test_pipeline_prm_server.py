"""`prm_serving: {engine: server}`: the loop serves Q_k with `proctor prm serve` and its evaluations score through
it, with the scores of the PRM loaded in-process."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from proctor.pipeline import PipelineConfig, run_pipeline
from proctor.pipeline.prm_server import with_prm_server
from proctor.serving.process import ServerExited
from proctor.store import TrajectoryStore
from test_pipeline import toy_config


def test_with_prm_server_reaches_every_part_that_ranks_with_the_prm():
    ref = {"base_url": "http://127.0.0.1:9"}
    search = {"method": "beam", "prm": "q", "agent": {"kind": "best-of-n", "prm": "q", "base": {"kind": "choice"}}}
    served = with_prm_server(search, "q", ref)
    assert served["prm_server"] == ref and served["agent"]["prm_server"] == ref
    assert "prm_server" not in served["agent"]["base"]
    assert with_prm_server({"kind": "best-of-n", "prm": "other"}, "q", ref) == {"kind": "best-of-n", "prm": "other"}


def test_a_served_likelihood_prm_needs_a_vllm_environment_before_any_stage(tmp_path, monkeypatch):
    """A likelihood PRM is served by vLLM (its LM, `prompt_logprobs`): without vLLM's environment the run stops when
    it opens, in one line, before any stage."""
    from proctor.serving.vllm_server import PYTHON_ENV, VLLMServerError

    monkeypatch.delenv(PYTHON_ENV, raising=False)
    cfg = {**toy_config(tmp_path), "prm_serving": {"engine": "server"}, "prm": {"kind": "likelihood", "steps": 2}}
    with pytest.raises(VLLMServerError, match=f"^no vLLM environment: set {PYTHON_ENV}"):
        run_pipeline(PipelineConfig.model_validate(cfg))
    assert not json.loads((tmp_path / "manifest.json").read_text())["stages"]


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


def _kill_when_scoring(run: Path, stop: threading.Event, requests: int = 3) -> None:
    """Kill the `proctor prm serve` process of `run` once its log shows `requests` scoring requests: mid-stage, in
    the evaluation that ranks π0's actions with Q_k (one request a step; the policy's own evaluation sends one)."""
    log = run / "prm-server.log"
    while not stop.is_set():
        if log.is_file() and log.read_text(errors="replace").count('"POST /') >= requests:
            for proc in Path("/proc").iterdir():
                try:
                    cmd = (proc / "cmdline").read_bytes().split(b"\0")
                except OSError:
                    continue
                if b"serve" in cmd and any(str(run).encode() in part for part in cmd):
                    os.kill(int(proc.name), signal.SIGKILL)
                    return
        time.sleep(0.02)


@pytest.mark.slow
def test_a_prm_server_killed_mid_stage_is_one_line_and_the_same_command_resumes(tmp_path):
    """~30 s: the loop's PRM server SIGKILLed while the evaluation that ranks π0's actions with Q0 scores through it:
    that stage fails with one line naming it, the server and its log, and is not recorded; the same run again
    restarts the server and finishes, no episode left failed."""
    cfg = {**toy_config(tmp_path / "run"), "iterations": 0, "prm_serving": {"engine": "server"}}
    cfg["evaluate"]["entries"] = cfg["evaluate"]["entries"][:2]
    cfg.pop("monitor")
    stop = threading.Event()
    killer = threading.Thread(target=_kill_when_scoring, args=(tmp_path / "run", stop), daemon=True)
    killer.start()
    try:
        with pytest.raises(ServerExited, match=r"^stage iter-0/eval/best-of-2: the PRM server exited with code -9 "
                                               r"during it \(its log: .*prm-server.log\); .*same command restarts"):
            run_pipeline(PipelineConfig.model_validate(cfg))
    finally:
        stop.set()
        killer.join()
    stages = json.loads((tmp_path / "run" / "manifest.json").read_text())["stages"]
    assert "iter-0/eval/policy" in stages and "iter-0/eval/best-of-2" not in stages  # the failed stage is not recorded
    summary = run_pipeline(PipelineConfig.model_validate(cfg))
    assert [r["policy"] for r in summary["results"]] == ["policy", "best-of-2"]
    for name in ("policy", "best-of-2"):
        trajs = TrajectoryStore.open(tmp_path / "run" / "iter-0" / "eval" / name / "trajectories").load()
        assert trajs and all(t.termination != "agent_error" for t in trajs), name
    assert _scores(tmp_path / "run" / "iter-0" / "eval" / "policy" / "scored")

"""`proctor prm serve` (real uvicorn on 127.0.0.1, a tiny PRM): bearer key, body/items/tokens bounds, the
best-of-N endpoint `/score_actions`, and 500s that name only a request id; `prm serve --api-key-env` and
`--limit` from the command line."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import httpx
import pytest

from proctor.prm.model import ProcessRewardModel
from proctor.prm.scoring import PRMScorer
from proctor.prm.server import make_app
from proctor.prompts.turns import Prefix
from proctor.serving.background import BackgroundServer
from proctor.serving.guards import ServerLimits
from proctor.trajectory import Step

KEY = "prm-test-key-51c2"
AUTH = {"Authorization": f"Bearer {KEY}"}
EXAMPLE = {"prompt": "Task: find the key. ", "steps": ["go north", "take key"]}


@pytest.fixture(scope="module")
def scorer(tiny_model_dir) -> PRMScorer:
    return PRMScorer(ProcessRewardModel.build(tiny_model_dir, "scalar", dtype="float32"), batch_size=4)


@pytest.fixture(scope="module")
def server(scorer):
    limits = ServerLimits(max_body_bytes=32 * 1024, max_rows=6, max_request_tokens=400)
    with BackgroundServer(make_app(scorer, api_key=KEY, limits=limits)) as srv:
        yield srv


def post(server, path: str, body: dict, headers: dict | None = None) -> httpx.Response:
    return httpx.post(server.url + path, json=body, headers=AUTH if headers is None else headers, timeout=60)


def test_the_bearer_key_is_required(server):
    assert post(server, "/score", {"examples": [EXAMPLE]}, headers={}).status_code == 401
    bad = post(server, "/score", {"examples": [EXAMPLE]}, headers={"Authorization": "Bearer wrong"})
    assert bad.status_code == 401 and KEY not in bad.text
    assert post(server, "/score_actions", {"state": {"task": "t", "observation": "o"}, "actions": ["a"]},
                headers={"Authorization": KEY}).status_code == 401  # no "Bearer"
    assert httpx.get(server.url + "/health").status_code == 200  # liveness stays open
    resp = post(server, "/score", {"examples": [EXAMPLE]})
    assert resp.status_code == 200 and len(resp.json()["scores"][0]) == 2


def test_body_items_and_tokens_are_bounded(server):
    resp = post(server, "/score", {"examples": [{"prompt": "x" * 100_000, "steps": ["a"]}]})
    assert resp.status_code == 413 and resp.json()["code"] == "body_too_large"
    resp = post(server, "/score", {"examples": [EXAMPLE] * 7})
    assert resp.status_code == 400 and resp.json()["code"] == "too_many_rows" and "7 examples" in resp.text
    long = {"prompt": "go to the drawer and open it " * 40, "steps": ["look"]}
    resp = post(server, "/score", {"examples": [long] * 2})
    assert resp.status_code == 400 and resp.json()["code"] == "too_many_tokens" and "limit is 400" in resp.text
    resp = post(server, "/score_actions", {"state": {"task": "t", "observation": "o"}, "actions": ["a"] * 7})
    assert resp.status_code == 400 and resp.json()["code"] == "too_many_rows"
    assert post(server, "/score", {"examples": [EXAMPLE]}).status_code == 200  # still serving


def test_score_actions_matches_the_shared_prefix_scorer(server, scorer):
    history = [Step(observation="You are in a hall. Exits: north.", action="go north")]
    state = {"task": "find the key", "observation": "A small room. A key is on the table.",
             "history": [h.model_dump(mode="json") for h in history], "env": "household", "task_id": "k"}
    actions = ["take key", "go south", "look", "open table", "examine key"]  # more than batch_size (4)
    resp = post(server, "/score_actions", {"state": state, "actions": actions})
    assert resp.status_code == 200, resp.text
    prefix = Prefix(env="household", task_id="k", task=state["task"], observation=state["observation"],
                    history=history)
    assert resp.json()["scores"] == pytest.approx(scorer.score_actions(prefix, actions), abs=1e-5)
    resp = post(server, "/score_actions", {"state": state, "actions": []})
    assert resp.status_code == 422


def test_a_500_names_only_a_request_id(scorer, caplog):
    app = make_app(scorer)

    def broken() -> None:
        raise RuntimeError("secret internals /home/user/prm")

    app.add_api_route("/broken", broken)  # an endpoint that fails, on the real app and its handlers
    with BackgroundServer(app) as srv, caplog.at_level(logging.ERROR, logger="proctor.prm.serve"):
        resp = httpx.get(srv.url + "/broken", timeout=30)
    assert resp.status_code == 500 and "secret" not in resp.text and "RuntimeError" not in resp.text
    rid = resp.headers["x-request-id"]
    assert rid in resp.json()["detail"] and f"request {rid} to /broken failed" in caplog.text


@pytest.mark.slow
def test_prm_serve_cli_takes_the_key_from_the_environment(tiny_model_dir, tmp_path):
    prm_dir = tmp_path / "prm"
    ProcessRewardModel.build(tiny_model_dir, "scalar", dtype="float32").save_pretrained(prm_dir)
    cli = [sys.executable, "-c", "from proctor.cli import main; main()", "prm", "serve", str(prm_dir)]
    env = {k: v for k, v in os.environ.items() if k != "PROCTOR_UNSET_KEY"}
    res = subprocess.run(cli + ["--api-key-env", "PROCTOR_UNSET_KEY"], env=env, capture_output=True, text=True,
                         timeout=120, check=False)
    assert res.returncode != 0 and "PROCTOR_UNSET_KEY" in res.stderr and "unset" in res.stderr
    res = subprocess.run(cli + ["--limit", "max_queue=0"], capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode != 0 and "max_queue" in res.stderr
    from test_serve_cli import free_port, wait_ready

    port = free_port()
    proc = subprocess.Popen(cli + ["--port", str(port), "--api-key-env", "PROCTOR_PRM_KEY", "--limit", "max_rows=2"],
                            env={**os.environ, "PROCTOR_PRM_KEY": KEY, "OMP_NUM_THREADS": "1"},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(proc, url)
        assert httpx.post(url + "/score", json={"examples": [EXAMPLE]}, timeout=30).status_code == 401
        assert httpx.post(url + "/score", json={"examples": [EXAMPLE]}, headers=AUTH, timeout=30).status_code == 200
        resp = httpx.post(url + "/score", json={"examples": [EXAMPLE] * 3}, headers=AUTH, timeout=30)
        assert resp.status_code == 400 and resp.json()["code"] == "too_many_rows"
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    assert "PROCTOR_PRM_KEY" in out and KEY not in out  # the key itself is never logged

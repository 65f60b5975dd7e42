"""proctor's envs as OpenEnv environment servers (`proctor.integrations.openenv`, `proctor serve-env`), played with
OpenEnv's own clients (`GenericEnvClient`, and `ProctorEnvClient`, its `EnvClient` with proctor's types) over the
WebSocket, as OpenEnv's clients play: the household expert wins through it with the env's reward; with a PRM the
step rewards are the scores proctor's own scorer gives the same episode; refusals are one line (4xx JSON over
HTTP, one error message over the WebSocket); the API key and the size bounds hold; ALFWorld plays when its data
is present; the CLI starts it and refuses a bad env in one line."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import httpx
import pytest
from typer.testing import CliRunner

pytest.importorskip("openenv", reason="needs the openenv extra: pip install 'proctor[openenv]'")

from openenv import GenericEnvClient

from proctor.cli import app as cli_app
from proctor.envs import make
from proctor.integrations.common import finish_episode, start_episode, step_episode
from proctor.integrations.openenv import (
    ProctorAction,
    ProctorEnvClient,
    ProctorObservation,
    ProctorState,
    ServeEnvConfig,
    create_app,
    uvicorn_options,
    with_api_key,
)
from proctor.serving.background import BackgroundServer
from without_model_libraries import run_without_model_libraries

pytestmark = pytest.mark.extra
HOUSEHOLD = {"preset": "small", "max_steps": 20, "expert_hints": True}
KEY = "openenv-secret-5e1c"
CLI = [sys.executable, "-c", "from proctor.cli import main; main()"]


def household_server(api_key: str | None = None, **fields):
    """The household served as `proctor serve-env` serves it (uvicorn given `uvicorn_options`)."""
    cfg = ServeEnvConfig(env="household", env_kwargs=HOUSEHOLD, **fields)
    return BackgroundServer(create_app(cfg, api_key=api_key), **uvicorn_options(cfg))


def one_line_error(call, *expected: str) -> str:
    """The message of the error a WebSocket call raised through OpenEnv's client: one line, naming `expected`."""
    with pytest.raises(RuntimeError) as info:
        call()
    message = str(info.value)
    assert "\n" not in message and message.startswith("Server error: "), message
    for text in expected:
        assert text in message, message
    return message


def test_household_expert_wins_through_openenv_client():
    """The expert's actions (the observation's `expert_action`: the env was built with expert hints) win the
    episode; every reply is the env's own (a local env replaying the same actions says the same), and the final
    reward is the env's."""
    local = make("household", **HOUSEHOLD)
    task = local.task_ids("train")[3]
    with household_server() as server, GenericEnvClient(base_url=server.url).sync() as env:
        first = env.reset(task_id=task, seed=7)
        obs = first.observation
        assert first.reward is None and not first.done
        local_obs, local_info = local.reset(task, 7)
        assert obs["text"] == local_obs and obs["task"] == local.task and obs["task_id"] == task
        assert obs["admissible_actions"] == local_info["admissible_actions"] and obs["step"] == 0
        assert obs["expert_action"] in obs["admissible_actions"]
        result, rewards = first, []
        while not result.done:
            action = result.observation["expert_action"]
            result = env.step({"command": action})
            local_step = local.step(action)
            assert result.observation["text"] == local_step.observation and result.reward == local_step.reward
            assert result.reward == result.observation["env_reward"] and result.done == local_step.done
            assert result.observation["prm_score"] is None
            rewards.append(result.reward)
        final = result.observation
        assert final["won"] and final["termination"] == "success" and final["score"] == 1.0
        assert result.reward == rewards[-1] == 1.0 and final["step"] == len(local.actions) < 20
        assert final["admissible_actions"] is None and final["expert_action"] is None
        state = env.state()
        assert state["task_id"] == task and state["seed"] == 7 and state["step_count"] == final["step"]
        assert state["done"] and state["env"] == "household" and state["split"] == "train"

        one_line_error(lambda: env.step({"command": "look"}), "the episode is over", "the task is done")
        env.reset(task_id=task)  # a new episode in the same session; the seed defaults to the task's
        assert env.state()["seed"] != 7


def test_typed_client_and_tasks_in_order():
    """`ProctorEnvClient` (OpenEnv's `EnvClient` with proctor's types) takes the command text; resets without a
    task hand out the split's tasks in order across sessions, and `split` picks another split."""
    tasks = make("household", **HOUSEHOLD).task_ids("train")
    with (household_server() as server, ProctorEnvClient(server.url).sync() as a,
          ProctorEnvClient(server.url).sync() as b):
        got = [a.reset(), b.reset(), a.reset()]
        assert [r.observation.task_id for r in got] == tasks[:3]
        assert isinstance(got[0].observation, ProctorObservation)
        result = a.step("look")
        assert result.observation.step == 1 and not result.done and result.reward == 0.0
        state = a.state()
        assert isinstance(state, ProctorState) and state.step_count == 1 and state.task_id == tasks[2]
        valid = b.reset(split="valid")
        assert valid.observation.task_id == make("household", **HOUSEHOLD).task_ids("valid")[0]
        step = b.step(ProctorAction(command="inventory"))
        assert step.observation.text and step.observation.step == 1


def test_prm_step_rewards_are_the_scorers(scalar_prm_dir):
    """With a PRM each step's reward is its score in the episode, what proctor's scorer gives the same
    trajectory (built and scored afresh); the env's reward stays in `env_reward`."""
    from proctor.prm.ref import PRMRef

    cfg = {"env": "household", "env_kwargs": {"preset": "small", "max_steps": 3}, "prm": str(scalar_prm_dir),
           "prm_device": "cpu"}
    local = make("household", preset="small", max_steps=3)
    task = local.task_ids("train")[0]
    with BackgroundServer(create_app(cfg)) as server, ProctorEnvClient(server.url).sync() as env:
        result = env.reset(task_id=task)
        actions, rewards, env_rewards = [], [], []
        while not result.done:
            actions.append(result.observation.admissible_actions[0])
            result = env.step(actions[-1])
            rewards.append(result.reward)
            env_rewards.append(result.observation.env_reward)
            assert result.observation.prm_score == result.reward
        assert result.observation.termination == "max_steps" and len(actions) == 3
    episode = start_episode(local, task)
    local_rewards = [step_episode(local, episode, a).reward for a in actions]
    traj = finish_episode(local, episode, split="train", agent="test", run_seed=0)
    q = PRMRef(prm=scalar_prm_dir, device="cpu").open().score_trajectories([traj])[0]
    assert rewards == pytest.approx(q, rel=1e-5)
    assert env_rewards == local_rewards
    assert len({round(x, 6) for x in q}) > 1  # the scores differ by step: not a constant passed through


def test_http_refusals_are_one_line_4xx():
    """Over HTTP (OpenEnv's stateless /reset and /step) every refusal is `{"detail": one line, "code"}`."""
    with household_server(max_body_bytes=4096) as server:
        http = httpx.Client(base_url=server.url, timeout=30)
        assert http.get("/health").json()["status"] == "healthy"
        reset = http.post("/reset", json={"task_id": make("household", **HOUSEHOLD).task_ids("test")[0]})
        assert reset.status_code == 200 and reset.json()["observation"]["admissible_actions"]
        assert "command" in http.get("/schema").json()["action"]["properties"]

        def refused(path, body, status, code, *text):
            r = http.post(path, content=body if isinstance(body, bytes) else json.dumps(body),
                          headers={"content-type": "application/json"})
            assert r.status_code == status, r.text
            detail = r.json()["detail"]
            assert isinstance(detail, str) and "\n" not in detail and r.json()["code"] == code, r.text
            for t in text:
                assert t in detail, detail

        refused("/step", {"action": {"command": "look"}}, 409, "no_episode", "call reset first", "/ws")
        refused("/step", {"action": {"command": "  "}}, 422, "bad_action", "'command' is empty")
        refused("/step", {"action": {"command": 3}}, 422, "bad_action", "must be a string, got int")
        refused("/step", {"action": {"cmd": "look"}}, 422, "bad_action", "unknown field(s) cmd")
        refused("/step", {"action": {"command": "x" * 1001}}, 422, "bad_action", "1001 characters", "limit is 1000")
        refused("/reset", {"task_id": "household/nope"}, 404, "unknown_task", "'household/nope'")
        refused("/reset", {"split": "dev"}, 400, "unknown_split", "it has train, valid")
        refused("/reset", {"colour": "red"}, 400, "bad_reset", "unknown reset argument(s) colour")
        refused("/reset", {"seed": -1}, 422, "invalid_request", "seed")
        refused("/reset", b"x" * 5000, 413, "body_too_large", "4096 bytes")


def test_websocket_refusals_and_bounds():
    """Over the WebSocket a refusal is one error message (OpenEnv's client raises it), and the session goes on;
    a message over the size bound is refused with MESSAGE_TOO_LARGE, then the socket closes with 1009; one over
    uvicorn's own bound (`ws_max_size`) is closed by uvicorn with 1009 and no message (docs/integrations.md)."""
    from websockets.exceptions import ConnectionClosedError

    with household_server(max_body_bytes=2048, ws_max_size=8192) as server, \
            GenericEnvClient(base_url=server.url).sync() as env:
        one_line_error(lambda: env.step({"command": "look"}), "no episode is running")
        env.reset()
        one_line_error(lambda: env.step({"command": ""}), "bad action: 'command' is empty")
        one_line_error(lambda: env.step({"command": ["look"]}), "bad action: 'command' must be a string, got list")
        one_line_error(lambda: env.step({"command": "look " * 250}), "characters; this server's limit is 1000")
        one_line_error(lambda: env.reset(task_id="household/nope"), "unknown task 'household/nope'")
        one_line_error(lambda: env.reset(seed="x"), "seed must be an integer")
        assert env.step({"command": "look"}).observation["step"] == 1  # the session survived its errors
        one_line_error(lambda: env.step({"command": "x" * 3000}), "larger than the server's limit of 2048 bytes",
                       "MESSAGE_TOO_LARGE")
        with pytest.raises(ConnectionClosedError) as closed:
            env.step({"command": "look"})  # the server closed the socket after its reply
        assert closed.value.rcvd.code == 1009
    with household_server(max_body_bytes=2048, ws_max_size=8192) as server, \
            GenericEnvClient(base_url=server.url).sync() as env:
        env.reset()
        with pytest.raises(ConnectionClosedError) as closed:
            env.step({"command": "x" * 10_000})
        assert closed.value.rcvd.code == 1009 and "message too big" in str(closed.value)
    with pytest.raises(ValueError, match="ws_max_size.*must be above max_body_bytes"):
        ServeEnvConfig(env="household", max_body_bytes=4096, ws_max_size=4096)


def test_api_key():
    """With a key, every route but /health needs it: HTTP answers 401, a WebSocket handshake without it fails,
    and `ProctorEnvClient(api_key=...)` and OpenEnv's generic client `with_api_key` play."""
    with household_server(api_key=KEY) as server:
        assert httpx.get(server.url + "/health").status_code == 200
        r = httpx.post(server.url + "/reset", json={})
        assert r.status_code == 401 and r.json()["code"] == "invalid_api_key"
        assert httpx.post(server.url + "/reset", json={}, headers={"Authorization": f"Bearer {KEY}"}).status_code \
            == 200
        with pytest.raises(ConnectionError, match="401"):
            GenericEnvClient(base_url=server.url).sync().connect()
        with pytest.raises(ConnectionError):
            ProctorEnvClient(server.url, api_key="wrong").sync().connect()
        with ProctorEnvClient(server.url, api_key=KEY).sync() as env:
            assert env.reset().observation.admissible_actions
        keyed = with_api_key(GenericEnvClient)
        assert keyed.__name__ == "GenericEnvClient" and issubclass(keyed, GenericEnvClient)
        with pytest.raises(ConnectionError, match="401"):
            keyed(base_url=server.url, api_key="wrong").sync().connect()
        with keyed(base_url=server.url, api_key=KEY).sync() as env:
            assert env.reset().observation["admissible_actions"]


def test_a_bad_env_is_refused_when_the_server_is_built():
    with pytest.raises(ValueError, match="unknown environment 'nosuch'; known: .*household"):
        create_app({"env": "nosuch"})
    with pytest.raises(ValueError, match="cannot build env 'household'.*'colour'"):
        create_app({"env": "household", "env_kwargs": {"colour": 1}})
    with pytest.raises(ValueError, match="unknown split 'dev'"):
        create_app({"env": "household", "split": "dev"})


# -- ALFWorld ----------------------------------------------------------------------------------------------
@pytest.mark.data
@pytest.mark.slow
def test_alfworld_plays_through_openenv(shared_data):
    """Two steps of ALFWorld's handcoded expert on a valid_unseen game, through the server."""
    pytest.importorskip("alfworld", reason="needs the alfworld extra: pip install 'proctor[alfworld]'")
    data_dir = shared_data / "alfworld" / "json_2.1.1"
    if not data_dir.is_dir():
        pytest.skip(f"ALFWorld games not found at {data_dir} (see docs/guides/real-envs.md: Data)")
    cfg = {"env": "alfworld", "env_kwargs": {"data_dir": str(data_dir), "max_steps": 10, "expert_hints": True},
           "split": "test"}
    with BackgroundServer(create_app(cfg)) as server, ProctorEnvClient(server.url).sync() as env:
        first = env.reset()
        obs = first.observation
        assert obs.task_id.startswith("valid_unseen/") and obs.text.startswith("You are in the middle of a room.")
        assert obs.task and obs.expert_action in obs.admissible_actions
        for _ in range(2):
            result = env.step(obs.expert_action)
            obs = result.observation
            assert obs.valid and not result.done and result.reward == 0.0 and obs.admissible_actions
        assert env.state().step_count == 2


# -- the CLI ---------------------------------------------------------------------------------------------
def test_serve_env_help_and_a_bad_env_in_one_line():
    runner = CliRunner()
    out = " ".join(runner.invoke(cli_app, ["serve-env", "--help"], terminal_width=200).output.split())
    for option in ("--env-arg", "--env-kwarg", "--host", "--port", "--prm", "--api-key-env", "--max-sessions"):
        assert option in out
    assert "127.0.0.1" in out and "OpenEnv" in out
    for args, text in [(["serve-env", "nosuch"], "unknown environment 'nosuch'"),
                       (["serve-env", "household", "--env-kwarg", "colour=1"], "cannot build env 'household'"),
                       (["serve-env", "household", "--prm", "/nonexistent/prm"], "/nonexistent/prm"),
                       (["serve-env", "household", "--api-key-env", "PROCTOR_UNSET_KEY_9"],
                        "PROCTOR_UNSET_KEY_9 is unset")]:
        res = runner.invoke(cli_app, args, terminal_width=400)
        lines = res.output.strip().splitlines()
        assert res.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error:"), res.output
        assert text in lines[0], lines[0]


def test_serve_env_cli_serves_with_a_key():
    """`proctor serve-env household` as a subprocess: the key from the environment, never in its output; both
    clients send it; a message over the size bound gets proctor's MESSAGE_TOO_LARGE."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PROCTOR_TEST_ENV_KEY": KEY, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(CLI + ["serve-env", "household", "--env-arg", "preset=small", "--port", str(port),
                                   "--api-key-env", "PROCTOR_TEST_ENV_KEY"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, proc.stdout.read()
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "serve-env did not start"
            time.sleep(0.25)
        with ProctorEnvClient(url, api_key=KEY).sync() as client:
            first = client.reset().observation
            assert first.task and first.admissible_actions and first.expert_action is None
        with with_api_key(GenericEnvClient)(base_url=url, api_key=KEY).sync() as client:  # OpenEnv's own, keyed
            assert client.reset().observation["admissible_actions"]
            # over the 64 KiB bound: proctor's reply, not uvicorn's bare close (its ws_max_size is above the bound)
            one_line_error(lambda: client.step({"command": "x" * 100_000}), "MESSAGE_TOO_LARGE", "65536 bytes")
        assert httpx.post(url + "/reset", json={}).status_code == 401
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    assert "serving household as an OpenEnv server on ws://127.0.0.1" in out and KEY not in out


def test_an_env_server_without_a_prm_needs_no_model_library():
    """An OpenEnv server over a proctor env imports neither torch nor transformers (a PRM reward loads them)."""
    proc = run_without_model_libraries("""
        from proctor.integrations.openenv import create_app
        create_app({"env": "household"})
        print("ok")
    """)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-4000:]

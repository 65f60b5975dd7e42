"""`proctor serve` as a real subprocess on 127.0.0.1: start-up, served name, API key from the environment; the
warning of every serving command bound beyond loopback without a key."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import httpx
import openai
import pytest

CLI = [sys.executable, "-c", "from proctor.cli import main; main()"]
KEY = "cli-secret-7f3a"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(proc: subprocess.Popen, url: str, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"proctor serve exited with {proc.returncode}: {proc.stdout.read()}")
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.25)
    raise AssertionError(f"proctor serve did not answer on {url} within {timeout} s")


def test_serve_cli_end_to_end(tiny_model_dir):
    port = free_port()
    env = {**os.environ, "PROCTOR_TEST_KEY": KEY, "OMP_NUM_THREADS": "1"}
    cmd = CLI + ["serve", "--model", str(tiny_model_dir), "--port", str(port), "--served-name", "tiny-cli",
                 "--api-key-env", "PROCTOR_TEST_KEY", "--device", "cpu"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(proc, url)
        with openai.OpenAI(base_url=url + "/v1", api_key=KEY, max_retries=0) as client:
            assert [m.id for m in client.models.list().data] == ["tiny-cli"]
            resp = client.chat.completions.create(
                model="tiny-cli", messages=[{"role": "user", "content": "hi"}], n=2, max_tokens=4, logprobs=True
            )
            assert len(resp.choices) == 2
            assert all(len(c.logprobs.content) >= 1 for c in resp.choices)
        assert httpx.get(url + "/v1/models", headers={"Authorization": "Bearer nope"}).status_code == 401
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    assert f"http://127.0.0.1:{port}/v1" in out and "PROCTOR_TEST_KEY" in out
    assert KEY not in out  # the key itself is never logged


def test_serve_cli_requires_the_key_variable(tiny_model_dir):
    env = {k: v for k, v in os.environ.items() if k != "PROCTOR_UNSET_KEY"}
    res = subprocess.run(CLI + ["serve", "--model", str(tiny_model_dir), "--api-key-env", "PROCTOR_UNSET_KEY"],
                         env=env, capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode != 0
    assert "PROCTOR_UNSET_KEY" in res.stderr and "unset" in res.stderr


def test_serve_cli_reports_a_missing_model():
    res = subprocess.run(CLI + ["serve", "--model", "/nonexistent/model/dir"], capture_output=True, text=True,
                         timeout=120, check=False)
    assert res.returncode != 0
    assert "no model folder" in res.stderr + res.stdout


@pytest.mark.parametrize("command", [["serve", "--model", "/nonexistent/model/dir"],
                                     ["prm", "serve", "{empty}"],
                                     ["serve-env", "nosuch"]], ids=["serve", "prm serve", "serve-env"])
def test_a_host_beyond_loopback_without_a_key_is_warned(command, tmp_path, monkeypatch):
    """Each serving command bound beyond this machine (`--host 0.0.0.0`, an interface's address) without an API key
    prints one warning line before it loads anything (here the model, PRM or env then fails to load: nothing is
    bound); on a loopback host, or with a key, it prints none."""
    from typer.testing import CliRunner

    from proctor.cli import app

    if command[0] == "serve-env":
        pytest.importorskip("openenv", reason="needs the openenv extra: pip install 'proctor[openenv]'")
    argv = [a.replace("{empty}", str(tmp_path)) for a in command]
    monkeypatch.setenv("PROCTOR_TEST_KEY", KEY)

    def stderr(*extra: str) -> str:
        res = CliRunner().invoke(app, [*argv, *extra], terminal_width=400)
        assert res.exit_code != 0  # the bad model, PRM or env: nothing was served
        return res.stderr

    warned = [line for line in stderr("--host", "0.0.0.0").splitlines() if line.startswith("warning:")]
    assert warned == [("warning: serving on 0.0.0.0 without an API key: anyone who can reach this port can use the "
                       "server; give --api-key-env VAR, or bind 127.0.0.1 (the default)")]
    assert "warning:" in stderr("--host", "192.168.7.3")
    for quiet in (["--host", "127.0.0.1"], ["--host", "localhost"], ["--host", "::1"],
                  ["--host", "0.0.0.0", "--api-key-env", "PROCTOR_TEST_KEY"]):
        assert "warning:" not in stderr(*quiet), quiet

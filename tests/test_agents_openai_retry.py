"""`OpenAIAgent` retries, errors, concurrency and API key, against small scripted HTTP servers on 127.0.0.1."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self

import pytest

from proctor.agents import AgentError, Prefix
from proctor.agents.openai_agent import OpenAIAgent

PREFIX = Prefix(env="household", task_id="t0", task="put a mug in the fridge", observation="You are in a room.")


def chat_body(content: str = "go to fridge 1", token_ids: bool = True) -> dict:
    """A chat completion as vLLM answers it (`token_ids`, `prompt_token_ids` with return_token_ids)."""
    token = {"token": "go", "logprob": -0.25, "bytes": [103, 111], "top_logprobs": []}
    choice = {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop",
              "logprobs": {"content": [token, token | {"token": " to fridge 1", "logprob": -1.5}]}}
    body = {"id": "c1", "object": "chat.completion", "created": 0, "model": "m", "choices": [choice]}
    if token_ids:
        choice["token_ids"] = [7, 8]
        body["prompt_token_ids"] = [1, 2, 3]
    return body


class ScriptedServer:
    """An HTTP server answering POSTs with the statuses of `script` in turn (then 200 with `chat_body`)."""

    def __init__(self, script: list[int], delay: float = 0.0, headers: dict[str, str] | None = None,
                 token_ids: bool = True):
        self.script, self.delay, self.headers = list(script), delay, headers or {}
        self.requests: list[dict] = []
        self.in_flight = self.max_in_flight = 0
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with outer.lock:
                    outer.requests.append({"body": body, "auth": self.headers.get("Authorization")})
                    status = outer.script.pop(0) if outer.script else 200
                    outer.in_flight += 1
                    outer.max_in_flight = max(outer.max_in_flight, outer.in_flight)
                time.sleep(outer.delay)
                with outer.lock:
                    outer.in_flight -= 1
                payload = chat_body(token_ids=token_ids) if status == 200 else {"error": {"message": f"scripted {status}"}}
                data = json.dumps(payload).encode()
                self.send_response(status)
                for k, v in outer.headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> Self:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def make_agent(url: str, **kw) -> OpenAIAgent:
    return OpenAIAgent(url, "m", **({"backoff": 0.01, "max_backoff": 0.05, "max_retries": 3} | kw))


def test_retries_503_then_succeeds():
    with ScriptedServer([503, 503]) as srv:
        out = make_agent(srv.url).act([PREFIX])
    assert len(srv.requests) == 3
    c = out[0][0]
    assert (c.action, c.raw_output, c.logprobs, c.finished) == ("go to fridge 1", "go to fridge 1", [-0.25, -1.5], True)


def test_429_retry_after_header_replaces_the_backoff():
    # back-off alone would sleep 20 s; the server's Retry-After: 0 makes the retry immediate
    start = time.monotonic()
    with ScriptedServer([429], headers={"Retry-After": "0"}) as srv:
        assert make_agent(srv.url, backoff=20.0, max_backoff=40.0).act([PREFIX])[0][0].action == "go to fridge 1"
    assert len(srv.requests) == 2 and time.monotonic() - start < 10


def test_always_500_gives_agent_error_after_the_retries():
    with ScriptedServer([500] * 10) as srv, pytest.raises(AgentError) as e:
        make_agent(srv.url, max_retries=2).act([PREFIX])
    assert len(srv.requests) == 3
    msg = str(e.value)
    assert srv.url + "/chat/completions" in msg and "HTTP 500" in msg and "attempt 3 of 3" in msg


def test_client_errors_are_not_retried():
    match = r"HTTP 400 \(attempt 1 of 4\).*scripted 400"
    with ScriptedServer([400]) as srv, pytest.raises(AgentError, match=match):
        make_agent(srv.url).act([PREFIX])
    assert len(srv.requests) == 1


def test_dead_port_gives_a_clear_agent_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    with pytest.raises(AgentError, match=rf"could not reach {url}/chat/completions after 2 attempt\(s\)"):
        make_agent(url, max_retries=1).act([PREFIX])


def test_timeouts_are_retried_then_reported():
    with ScriptedServer([], delay=1.0) as srv, pytest.raises(AgentError, match="APITimeoutError"):
        make_agent(srv.url, timeout=0.2, max_retries=1).act([PREFIX])
    assert len(srv.requests) == 2


def test_requests_run_concurrently_up_to_the_limit():
    prefixes = [Prefix(env="e", task_id=f"t{i}", task="x", observation="o") for i in range(6)]
    with ScriptedServer([], delay=0.3) as srv:
        out = make_agent(srv.url, concurrency=2).act(prefixes)
    assert len(out) == 6 and srv.max_in_flight == 2


def test_request_fields_and_api_key(monkeypatch):
    monkeypatch.setenv("PROCTOR_TEST_OPENAI_KEY", "sk-test-123")
    with ScriptedServer([]) as srv:
        make_agent(srv.url, api_key_env="PROCTOR_TEST_OPENAI_KEY", temperature=0.7, top_p=0.9, max_tokens=32,
                   stop=["\n"], seed=5).act([PREFIX])
        monkeypatch.delenv("PROCTOR_TEST_OPENAI_KEY")
        make_agent(srv.url, api_key_env="PROCTOR_TEST_OPENAI_KEY", logprobs=False).act([PREFIX])
    first, second = srv.requests
    assert first["auth"] == "Bearer sk-test-123" and second["auth"] == "Bearer EMPTY"
    body = first["body"]
    assert (body["model"], body["n"], body["temperature"], body["top_p"], body["max_tokens"], body["stop"]) == (
        "m", 1, 0.7, 0.9, 32, ["\n"])
    assert body["logprobs"] is True and isinstance(body["seed"], int)
    assert body["messages"][0]["role"] == "system" and "put a mug in the fridge" in body["messages"][1]["content"]
    assert "logprobs" not in second["body"] and "seed" not in second["body"]


def test_wrong_number_of_choices_is_an_agent_error():
    with ScriptedServer([]) as srv, pytest.raises(AgentError, match="returned 1 choices for n=2"):
        make_agent(srv.url).act([PREFIX], n=2)


def test_token_ids_and_prompt_length_are_kept():
    with ScriptedServer([]) as srv:
        cand = make_agent(srv.url).act([PREFIX])[0][0]
        assert srv.requests[0]["body"]["return_token_ids"] is True
    assert cand.token_ids == [7, 8] and cand.logprobs == [-0.25, -1.5] and cand.meta["prompt_tokens"] == 3


def test_a_server_without_token_ids_is_one_clear_error_unless_turned_off():
    with ScriptedServer([], token_ids=False) as srv:
        with pytest.raises(AgentError, match="no token_ids.*return_token_ids=false"):
            make_agent(srv.url).act([PREFIX])
        cand = make_agent(srv.url, return_token_ids=False).act([PREFIX])[0][0]
        assert "return_token_ids" not in srv.requests[-1]["body"]
    assert cand.action == "go to fridge 1" and cand.token_ids is None


def test_greedy_asks_once_and_repeats_the_completion():
    with ScriptedServer([]) as srv:
        cands = make_agent(srv.url, temperature=0.0).act([PREFIX], n=3)[0]
        assert [r["body"]["n"] for r in srv.requests] == [1]
    assert [c.action for c in cands] == ["go to fridge 1"] * 3 and cands[0].meta is not cands[1].meta

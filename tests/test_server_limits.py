"""`proctor serve` under abuse (real uvicorn on 127.0.0.1, the tiny model): body size, rows, tokens, queue,
a client that disconnects mid-generation, out-of-range seeds, and 500s that reveal nothing but a request id."""

from __future__ import annotations

import logging
import threading
import time

import httpx
import pytest

from proctor.serving import Generator, create_app
from proctor.serving.background import BackgroundServer
from proctor.serving.guards import ServerLimits

NAME = "tiny"


@pytest.fixture(scope="module")
def generator(tiny_model_dir) -> Generator:
    return Generator.load(str(tiny_model_dir), device="cpu")


@pytest.fixture(scope="module")
def server(generator):
    limits = ServerLimits(max_body_bytes=64 * 1024, max_rows=8, max_request_tokens=2000)
    with BackgroundServer(create_app(generator, NAME, limits=limits)) as srv:
        yield srv


def error(resp: httpx.Response) -> dict:
    return resp.json()["error"]


def completion(url: str, **body) -> httpx.Response:
    return httpx.post(url + "/v1/completions", json={"model": NAME, "prompt": "go", "max_tokens": 4, **body},
                      timeout=60)


def test_an_oversized_body_gets_413_before_it_is_parsed(server):
    url = server.url + "/v1/completions"
    t0 = time.monotonic()
    resp = httpx.post(url, json={"model": NAME, "prompt": "x" * 5_000_000}, timeout=60)  # 5 MB, Content-Length
    assert resp.status_code == 413 and error(resp)["code"] == "body_too_large"
    assert "65536 bytes" in error(resp)["message"]

    def chunks():  # no Content-Length: the limit is checked as the chunks stream in
        yield b'{"model": "tiny", "prompt": "'
        for _ in range(64):
            yield b"y" * 16384
        yield b'"}'

    resp = httpx.post(url, content=chunks(), headers={"content-type": "application/json"}, timeout=60)
    assert resp.status_code == 413 and error(resp)["code"] == "body_too_large"
    assert time.monotonic() - t0 < 10
    assert completion(server.url).status_code == 200  # still serving


def test_rows_and_token_positions_are_capped(server):
    resp = completion(server.url, prompt=["a", "b", "c"], n=3)  # 9 rows > 8
    assert resp.status_code == 400 and error(resp)["code"] == "too_many_rows"
    assert "9 rows (prompts x n)" in error(resp)["message"]
    resp = completion(server.url, prompt=["a", "b"], n=2, max_tokens=600)  # 4 x (w + 600) > 2000
    assert resp.status_code == 400 and error(resp)["code"] == "too_many_tokens"
    assert "limit is 2000" in error(resp)["message"]
    assert completion(server.url, prompt=["a", "b"], n=2, max_tokens=8).status_code == 200


@pytest.mark.parametrize("seed", [2**63, 2**64 + 5, -(2**63) - 1])
def test_out_of_range_seeds_get_400(server, seed):
    resp = completion(server.url, seed=seed)
    assert resp.status_code == 400 and error(resp)["param"] == "seed"


def test_extreme_int64_seeds_are_served(server):
    assert completion(server.url, seed=2**63 - 1).status_code == 200
    assert completion(server.url, seed=-(2**63)).status_code == 200


def test_a_500_names_only_a_request_id_and_the_log_has_the_rest(generator, caplog):
    app = create_app(generator, NAME)

    def broken() -> None:
        raise RuntimeError("secret internals /home/user/model")

    app.add_api_route("/v1/broken", broken)  # an endpoint that fails, on the real app and its handlers
    with BackgroundServer(app) as srv, caplog.at_level(logging.ERROR, logger="proctor.serve"):
        resp = httpx.get(srv.url + "/v1/broken", timeout=30)
    assert resp.status_code == 500
    err = error(resp)
    rid = resp.headers["x-request-id"]
    assert err["type"] == "server_error" and f"request id {rid}" in err["message"]
    assert "secret" not in resp.text and "RuntimeError" not in resp.text
    assert f"request {rid} to /v1/broken failed" in caplog.text and "secret internals" in caplog.text


def test_queue_limit_429_and_vanished_clients_release_the_model(generator):
    """A long generation (128 rows x 4000 tokens: minutes on a CPU) whose client leaves after 5 s stops at
    once; a request queued behind it whose client leaves after 1 s leaves the queue; while both are admitted
    a third is refused with 429 (queue of 2); afterwards the server answers at once."""
    limits = ServerLimits(max_queue=2, max_rows=128, max_request_tokens=10**7)
    app = create_app(generator, NAME, limits=limits)
    admission = app.state.admission

    def wait_for(admitted: int, within: float) -> float:
        t0 = time.monotonic()
        while admission.admitted != admitted and time.monotonic() - t0 < within:
            time.sleep(0.01)
        return time.monotonic() - t0

    with BackgroundServer(app) as srv:
        outcome = {}

        def request(name: str, timeout: float, **body) -> None:
            try:
                httpx.post(srv.url + "/v1/completions", timeout=timeout,
                           json={"model": NAME, "prompt": "go", "temperature": 1.0, **body})
                outcome[name] = "answered"
            except httpx.TimeoutException:
                outcome[name] = "gave up"

        long = threading.Thread(target=request, args=("long", 5.0), kwargs={"n": 128, "max_tokens": 4000})
        long.start()
        assert wait_for(1, 5.0) < 5.0
        queued = threading.Thread(target=request, args=("queued", 1.0), kwargs={"max_tokens": 4})
        queued.start()
        assert wait_for(2, 5.0) < 5.0
        t0 = time.monotonic()
        busy = completion(srv.url)
        assert busy.status_code == 429 and error(busy)["code"] == "queue_full"
        assert time.monotonic() - t0 < 2.0
        queued.join()
        assert outcome["queued"] == "gave up"
        assert wait_for(1, 2.0) < 1.0, "a request whose client left still waits in the queue"
        assert long.is_alive()  # the long generation goes on for its client
        long.join()
        assert outcome["long"] == "gave up"
        released = wait_for(0, 10.0)
        assert released < 2.0, f"the model was held {released:.1f} s for a generation nobody will read"
        assert admission.cancelled == 2
        assert completion(srv.url).status_code == 200

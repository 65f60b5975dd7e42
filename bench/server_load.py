"""Load and abuse test of both HTTP servers (`proctor serve`, `proctor prm serve`) with a tiny model.

    python bench/server_load.py [--requests 96] [--seconds 20] [--clients 1,8,32]

Each server runs as its own `proctor ...` process on 127.0.0.1 (a free port; nothing else is contacted).
Load: at 1, 8 and 32 concurrent clients, a bounded number of requests (`--requests`, at most `--seconds` per
level): requests/s and p50/p99 latency of the answered ones, and the status codes. `proctor serve`:
/v1/completions (one prompt, 16 greedy tokens); `proctor prm serve`: /score (one 3-step example) and
/score_actions (8 candidate actions at one state). Abuse, then: a 50 MB body, too many rows, too many
tokens, a 2^64 seed (serve), more concurrent requests than the queue admits, a client that leaves in the
middle of a long generation; then the server must still answer. Memory: the server process's resident set
(VmRSS) before the load, after it and after the abuse, and its peak (VmHWM). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

HOST = "127.0.0.1"
KEY = "bench-key"
QUEUE = 32  # the servers admit the 32 clients of the largest level; the abuse sends more


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def memory_mb(pid: int) -> dict[str, float]:
    """Resident set now and at its peak (Linux /proc), in MB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = round(int(value.split()[0]) / 1024, 1)
    return {"rss_mb": fields.get("VmRSS", float("nan")), "peak_mb": fields.get("VmHWM", float("nan"))}


def start(args: list[str], url: str) -> subprocess.Popen:
    env = {**os.environ, "BENCH_KEY": KEY, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.Popen([sys.executable, "-c", "from proctor.cli import main; main()", *args], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{args[:2]} exited with {proc.returncode}")
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return proc
        except httpx.TransportError:
            pass
        time.sleep(0.25)
    proc.kill()
    raise RuntimeError(f"{args[:2]} did not start within 180 s")


async def load(url: str, path: str, body: dict[str, Any], clients: int, n_requests: int, seconds: float
               ) -> dict[str, Any]:
    """`clients` concurrent clients send `body` until `n_requests` are sent or `seconds` have passed."""
    latencies: list[float] = []
    statuses: dict[str, int] = {}
    sent = 0
    deadline = time.monotonic() + seconds
    headers = {"Authorization": f"Bearer {KEY}"}

    async def client(http: httpx.AsyncClient) -> None:
        nonlocal sent
        while sent < n_requests and time.monotonic() < deadline:
            sent += 1
            t0 = time.perf_counter()
            resp = await http.post(url + path, json=body, headers=headers)
            statuses[str(resp.status_code)] = statuses.get(str(resp.status_code), 0) + 1
            if resp.status_code == 200:
                latencies.append(time.perf_counter() - t0)

    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(timeout=120, limits=limits) as http:
        await http.post(url + path, json=body, headers=headers)  # warm-up, not counted
        t0 = time.perf_counter()
        await asyncio.gather(*(client(http) for _ in range(clients)))
    wall = time.perf_counter() - t0
    lat = sorted(latencies)

    def pct(q: float) -> float:
        return round(1000 * lat[min(len(lat) - 1, int(q * len(lat)))], 1) if lat else float("nan")

    return {"clients": clients, "requests": sent, "statuses": statuses, "requests_per_s": round(len(lat) / wall, 2),
            "p50_ms": pct(0.50), "p99_ms": pct(0.99),
            "mean_ms": round(1000 * statistics.fmean(lat), 1) if lat else float("nan")}


def post(url: str, path: str, timeout: float = 120, **kw: Any) -> tuple[int, float]:
    t0 = time.perf_counter()
    resp = httpx.post(url + path, headers={"Authorization": f"Bearer {KEY}", **kw.pop("headers", {})},
                      timeout=timeout, **kw)
    return resp.status_code, round(time.perf_counter() - t0, 3)


def oversized_body(url: str, path: str) -> dict[str, Any]:
    status, s = post(url, path, content=b'{"x": "' + b"a" * (50 * 2**20) + b'"}',
                     headers={"content-type": "application/json"})
    return {"status": status, "seconds": s}


async def flood(url: str, path: str, body: dict[str, Any], n: int) -> dict[str, int]:
    """`n` requests at once (more than the queue admits): how many were admitted, how many got 429."""
    async with httpx.AsyncClient(timeout=300, limits=httpx.Limits(max_connections=n)) as http:
        resps = await asyncio.gather(*(http.post(url + path, json=body, headers={"Authorization": f"Bearer {KEY}"})
                                       for _ in range(n)))
    out: dict[str, int] = {}
    for r in resps:
        out[str(r.status_code)] = out.get(str(r.status_code), 0) + 1
    return out


def vanished_client(url: str, path: str, body: dict[str, Any], small: dict[str, Any]) -> dict[str, Any]:
    """A client gives up 1 s into a long request; how long the next request then takes."""
    try:
        resp = httpx.post(url + path, json=body, headers={"Authorization": f"Bearer {KEY}"}, timeout=1.0)
        long_status = resp.status_code  # answered within 1 s: not a long request, the check is void
    except httpx.TimeoutException:
        long_status = "abandoned by the client"
    status, s = post(url, path, json=small)
    return {"long_request": long_status, "next_request_status": status, "next_request_seconds": s}


def bench_serve(model_dir: Path, args: argparse.Namespace) -> dict[str, Any]:
    port = free_port()
    url = f"http://{HOST}:{port}"
    proc = start(["serve", "--model", str(model_dir), "--served-name", "tiny", "--port", str(port), "--device",
                  "cpu", "--api-key-env", "BENCH_KEY", "--limit", f"max_queue={QUEUE}"], url)
    path = "/v1/completions"
    body = {"model": "tiny", "prompt": "go to the fridge and open it", "max_tokens": 16, "temperature": 0}
    try:
        out: dict[str, Any] = {"memory_before": memory_mb(proc.pid)}
        out["load"] = [asyncio.run(load(url, path, body, c, args.requests, args.seconds)) for c in args.clients]
        out["memory_after_load"] = memory_mb(proc.pid)
        long_body = {**body, "n": 16, "max_tokens": 2000, "temperature": 1.0}  # ~30 s on a CPU
        out["abuse"] = {
            "body_50MB": oversized_body(url, path),
            "rows_400x_n": post(url, path, json={**body, "prompt": ["go"] * 400})[0],
            "tokens_n128_x_8000": post(url, path, json={**body, "n": 128, "max_tokens": 8000})[0],
            "seed_2_pow_64": post(url, path, json={**body, "seed": 2**64})[0],
            "flood_48_at_once": asyncio.run(flood(url, path, body, QUEUE + 16)),
            "client_leaves_mid_generation": vanished_client(url, path, long_body, body),
        }
        status, s = post(url, path, json=body)
        out["after_abuse"] = {"status": status, "seconds": s, **memory_mb(proc.pid)}
        return out
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def bench_prm(model_dir: Path, args: argparse.Namespace) -> dict[str, Any]:
    from proctor.prm.model import ProcessRewardModel

    prm_dir = model_dir.parent / "prm"
    ProcessRewardModel.build(model_dir, "scalar", dtype="float32").save_pretrained(prm_dir)
    port = free_port()
    url = f"http://{HOST}:{port}"
    proc = start(["prm", "serve", str(prm_dir), "--port", str(port), "--api-key-env", "BENCH_KEY",
                  "--limit", f"max_queue={QUEUE}"], url)
    example = {"prompt": "Task: put a clean mug in the cabinet. ",
               "steps": ["go to countertop 1", "take mug 1 from countertop 1", "go to sinkbasin 1"]}
    state = {"task": "put a clean mug in the cabinet", "observation": "On the countertop 1, you see a mug 1.",
             "history": [{"observation": "You are in the middle of a room.", "action": "go to countertop 1"}]}
    actions = ["take mug 1 from countertop 1", "go to cabinet 1", "look", "open cabinet 1", "go to sinkbasin 1",
               "examine mug 1", "inventory", "go to fridge 1"]
    try:
        out: dict[str, Any] = {"memory_before": memory_mb(proc.pid)}
        out["load_score"] = [asyncio.run(load(url, "/score", {"examples": [example]}, c, args.requests,
                                              args.seconds)) for c in args.clients]
        out["load_score_actions"] = [asyncio.run(load(url, "/score_actions", {"state": state, "actions": actions},
                                                      c, args.requests, args.seconds)) for c in args.clients]
        out["memory_after_load"] = memory_mb(proc.pid)
        long_examples = {"examples": [{"prompt": "go to the drawer and open it " * 60, "steps": ["look"] * 8}] * 256}
        out["abuse"] = {
            "body_50MB": oversized_body(url, "/score"),
            "items_400": post(url, "/score", json={"examples": [example] * 400})[0],
            "tokens_256_long_examples": post(url, "/score", json=long_examples)[0],
            "no_key": httpx.post(url + "/score", json={"examples": [example]}, timeout=30).status_code,
            "flood_48_at_once": asyncio.run(flood(url, "/score", {"examples": [example] * 64}, QUEUE + 16)),
        }
        status, s = post(url, "/score", json={"examples": [example]})
        out["after_abuse"] = {"status": status, "seconds": s, **memory_mb(proc.pid)}
        return out
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=96, help="requests per concurrency level (bound)")
    ap.add_argument("--seconds", type=float, default=20.0, help="time per concurrency level (bound)")
    ap.add_argument("--clients", default="1,8,32", help="concurrency levels")
    ap.add_argument("--model", default=None, help="backbone folder (default: a tiny Llama built here)")
    args = ap.parse_args()
    args.clients = [int(c) for c in args.clients.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        if args.model is None:
            from proctor.models import build_tiny

            model_dir = build_tiny(Path(tmp) / "tiny", hidden_size=64, layers=2, heads=4, vocab_size=2000)
        else:
            model_dir = Path(args.model)
        result = {"host": HOST, "cpus": os.cpu_count(), "requests_per_level": args.requests,
                  "serve": bench_serve(model_dir, args), "prm_serve": bench_prm(model_dir, args)}
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()

"""Async vs lockstep rollout against one OpenAI-compatible server: generated tokens/s, and how close each
engine gets to N independent clients.

    python bench/rollout_async.py [--base-url http://host:8000/v1 --model NAME] [--clients 8]
                                  [--max-tokens 64] [--seconds 15] [--episodes 8N] [--max-steps 6]
                                  [--stub-ms-per-token 4] [--stub-min-tokens 8]

Three arms, one after another, against the SAME server, with the same request options (chat endpoint,
n=1, `--max-tokens`, temperature 1, logprobs on):

- clients: N plain threads, each with its own `openai.OpenAI` client, looping `chat.completions.create`
  for `--seconds` on the first-state prompts of household test tasks (cycled);
- async: `rollout(engine="async", concurrency=N)` with an `OpenAIAgent(concurrency=N)` on `household`;
- lockstep: `rollout(engine="lockstep", batch_size=N)` with the same agent settings.

Generated tokens are counted the same way in every arm: one per sampled-token log-prob the server returned
(clients: in the response; rollouts: `Step.logprobs` of every stored step); tokens/s = tokens / the arm's
wall time (a rollout's includes its env steps and store writes: what a user gets). The ratios
async/clients and lockstep/clients say how much of the server's throughput each engine uses (goal: async
>= 0.8). Whatever the model answers is sent to the env as an action (invalid ones included).

Without `--base-url`, a stub server is started in this process (FastAPI + uvicorn on 127.0.0.1): a request
generates k tokens, k drawn uniformly from [`--stub-min-tokens`, `--max-tokens`] by a hash of the request
(so lengths vary as real ones do), and takes k * `--stub-ms-per-token` ms whatever else is running, i.e.
a server with a fixed per-request throughput and room for every request; its answer is one of the
admissible actions listed in the prompt (with vLLM's `return_token_ids` when asked). For the stub the JSON also gives the mean and peak number of
requests in flight at the server during each arm. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import random
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Self

import openai

from proctor.agents.openai_agent import OpenAIAgent
from proctor.envs.registry import EnvSpec
from proctor.episode import Episode, WorkItem, episode_seed
from proctor.prompts.render import ADMISSIBLE_HEADER, render_messages
from proctor.rollout import rollout

ENV = "household"


# -- the stub server ----------------------------------------------------------------------------------------
class Load:
    """Requests in flight at the stub: the current number, the peak, and its time integral."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = self.peak = 0
        self.area = 0.0
        self.since = time.monotonic()

    def _tick(self) -> None:
        t = time.monotonic()
        self.area += self.now * (t - self.since)
        self.since = t

    def enter(self) -> None:
        with self.lock:
            self._tick()
            self.now += 1
            self.peak = max(self.peak, self.now)

    def leave(self) -> None:
        with self.lock:
            self._tick()
            self.now -= 1

    def window(self) -> tuple[float, int]:
        """(area, peak) so far; resets the peak."""
        with self.lock:
            self._tick()
            area, peak = self.area, self.peak
            self.peak = self.now
            return area, peak


def stub_app(ms_per_token: float, min_tokens: int, load: Load) -> Any:
    from fastapi import FastAPI, HTTPException

    app = FastAPI()

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": "stub", "object": "model", "owned_by": "bench"}]}

    @app.post("/v1/chat/completions")
    async def chat(body: dict[str, Any]) -> dict[str, Any]:
        if body.get("n", 1) != 1:
            raise HTTPException(400, "the stub answers n=1 only")
        messages = body.get("messages") or []
        max_tokens = int(body.get("max_tokens") or 16)
        digest = hashlib.sha256(json.dumps([messages, body.get("seed")], sort_keys=True).encode()).digest()
        rng = random.Random(int.from_bytes(digest[:8], "big"))
        k = rng.randint(min(min_tokens, max_tokens), max_tokens)
        last = messages[-1]["content"] if messages else ""
        listed = last.split(ADMISSIBLE_HEADER, 1)[1] if ADMISSIBLE_HEADER in last else ""
        actions = [line[2:].strip() for line in listed.splitlines() if line.startswith("- ")]
        content = rng.choice(actions) if actions else "look"
        load.enter()
        try:
            await asyncio.sleep(k * ms_per_token / 1000)
        finally:
            load.leave()
        choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": content},
                                  "finish_reason": "stop"}
        if body.get("logprobs"):
            choice["logprobs"] = {"content": [{"token": "t", "logprob": -1.0, "bytes": None, "top_logprobs": []}
                                              for _ in range(k)]}
        prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in messages)
        out = {"id": f"stub-{digest.hex()[:12]}", "object": "chat.completion", "created": int(time.time()),
               "model": body.get("model", "stub"), "choices": [choice],
               "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": k, "total_tokens": prompt_tokens + k}}
        if body.get("return_token_ids"):  # vLLM's extra parameter (the openai agent asks for it by default)
            choice["token_ids"] = [rng.randrange(1000) for _ in range(k)]
            out["prompt_token_ids"] = list(range(prompt_tokens))
        return out

    return app


class StubServer:
    """The stub on a free port of 127.0.0.1, served by uvicorn in a background thread."""

    def __init__(self, ms_per_token: float, min_tokens: int):
        import uvicorn

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.load = Load()
        config = uvicorn.Config(stub_app(ms_per_token, min_tokens, self.load), host="127.0.0.1", port=port,
                                log_level="warning", access_log=False, backlog=2048, limit_concurrency=None)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="stub-server", daemon=True)
        self.base_url = f"http://127.0.0.1:{port}/v1"

    def __enter__(self) -> Self:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the stub server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


# -- the arms ---------------------------------------------------------------------------------------------------
def first_prompts(tasks: list[str], seed: int) -> list[list[dict[str, str]]]:
    """The chat messages an agent sees at the first state of each task (what the clients send)."""
    env = EnvSpec(ENV).make()
    try:
        out = []
        for task in tasks:
            item = WorkItem(task, 0, episode_seed(seed, task, 0))
            obs, info = env.reset(task, item.seed)
            out.append(render_messages(Episode.begin(ENV, item, obs, info).prefix()))
        return out
    finally:
        env.close()


def clients_arm(base_url: str, model: str, n: int, seconds: float, max_tokens: int,
                prompts: list[list[dict[str, str]]], api_key: str) -> dict[str, Any]:
    counts = [[0, 0, 0, 0] for _ in range(n)]  # requests, logprob tokens, usage tokens, errors
    start = time.perf_counter()
    deadline = start + seconds

    def loop(i: int) -> None:
        client = openai.OpenAI(base_url=base_url, api_key=api_key, timeout=120.0, max_retries=2)
        j = i
        try:
            while time.perf_counter() < deadline:
                try:
                    resp = client.chat.completions.create(model=model, messages=prompts[j % len(prompts)], n=1,
                                                          max_tokens=max_tokens, temperature=1.0, logprobs=True)
                except openai.APIError:
                    counts[i][3] += 1
                    continue
                j += n
                c = resp.choices[0]
                counts[i][0] += 1
                counts[i][1] += len(c.logprobs.content) if c.logprobs and c.logprobs.content else 0
                counts[i][2] += resp.usage.completion_tokens if resp.usage else 0
        finally:
            client.close()

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    requests, tokens, usage, errors = (sum(c[k] for c in counts) for k in range(4))
    return {"requests": requests, "tokens": tokens, "usage_completion_tokens": usage, "errors": errors,
            "wall_s": round(wall, 3), "tokens_per_s": round(tokens / wall, 2),
            "tokens_per_request": round(tokens / max(1, requests), 2)}


def rollout_arm(base_url: str, model: str, engine: str, n: int, max_tokens: int, tasks: list[str], samples: int,
                max_steps: int, seed: int, out: Path, api_key_env: str) -> dict[str, Any]:
    agent = OpenAIAgent(base_url, model, api_key_env=api_key_env, max_tokens=max_tokens, temperature=1.0,
                        concurrency=n, seed=seed, timeout=120.0)
    spec = EnvSpec(ENV, {"max_steps": max_steps})
    try:
        start = time.perf_counter()
        store = rollout(spec, agent, tasks, out, samples_per_task=samples, seed=seed, progress=False,
                        engine=engine, concurrency=n, batch_size=n)
        wall = time.perf_counter() - start
    finally:
        agent.close()
    trajs = store.load()
    steps = [s for t in trajs for s in t.steps]
    tokens = sum(len(s.logprobs or []) for s in steps)
    return {"episodes": len(trajs), "steps": len(steps), "tokens": tokens, "wall_s": round(wall, 3),
            "tokens_per_s": round(tokens / wall, 2), "tokens_per_request": round(tokens / max(1, len(steps)), 2),
            "steps_per_s": round(len(steps) / wall, 2), "success_rate": round(sum(t.success for t in trajs) /
                                                                              max(1, len(trajs)), 3),
            "agent_errors": sum(t.termination == "agent_error" for t in trajs)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base-url", default=None, help="a running OpenAI-compatible server (default: the stub)")
    ap.add_argument("--model", default="stub", help="model name to request (a real server's served name)")
    ap.add_argument("--api-key-env", default="OPENAI_API_KEY")
    ap.add_argument("--clients", type=int, default=8, help="N: clients, async concurrency and lockstep batch")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=15.0, help="how long the clients arm runs")
    ap.add_argument("--episodes", type=int, default=None,
                    help="episodes per rollout arm (default 8 N: fewer leave slots idle at the end, the tail)")
    ap.add_argument("--max-steps", type=int, default=6, help="household step limit per episode")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--stub-ms-per-token", type=float, default=4.0)
    ap.add_argument("--stub-min-tokens", type=int, default=8)
    args = ap.parse_args()
    import os

    n = args.clients
    episodes = args.episodes or 8 * n
    env = EnvSpec(ENV).make()
    all_tasks = env.task_ids("test")
    env.close()
    n_tasks = min(len(all_tasks), episodes)
    tasks, samples = all_tasks[:n_tasks], math.ceil(episodes / n_tasks)
    prompts = first_prompts(tasks, args.seed)
    api_key = os.environ.get(args.api_key_env) or "EMPTY"

    def run_all(base_url: str, load: Load | None) -> dict[str, Any]:
        arms: dict[str, Any] = {}
        with tempfile.TemporaryDirectory() as tmp:
            for name in ("clients", "async", "lockstep"):
                if load is not None:
                    area0, _ = load.window()
                t0 = time.monotonic()
                if name == "clients":
                    arms[name] = clients_arm(base_url, args.model, n, args.seconds, args.max_tokens, prompts,
                                             api_key)
                else:
                    arms[name] = rollout_arm(base_url, args.model, name, n, args.max_tokens, tasks, samples,
                                             args.max_steps, args.seed, Path(tmp) / name, args.api_key_env)
                if load is not None:
                    area1, peak = load.window()
                    arms[name]["server_requests_in_flight"] = {
                        "mean": round((area1 - area0) / (time.monotonic() - t0), 2), "peak": peak}
        return arms

    if args.base_url:
        server = {"kind": "external", "base_url": args.base_url, "model": args.model}
        arms = run_all(args.base_url, None)
    else:
        with StubServer(args.stub_ms_per_token, args.stub_min_tokens) as stub:
            server = {"kind": "stub (in-process)", "ms_per_token": args.stub_ms_per_token,
                      "tokens_per_request": [min(args.stub_min_tokens, args.max_tokens), args.max_tokens],
                      "per_request_tokens_per_s": round(1000 / args.stub_ms_per_token, 1)}
            arms = run_all(stub.base_url, stub.load)
    clients = arms["clients"]["tokens_per_s"]
    result = {
        "bench": "rollout_async", "server": server, "env": ENV, "n": n, "max_tokens": args.max_tokens,
        "episodes_per_rollout_arm": len(tasks) * samples, "max_steps": args.max_steps,
        "clients_seconds": args.seconds, "arms": arms,
        "ratio_async_vs_clients": round(arms["async"]["tokens_per_s"] / clients, 3) if clients else None,
        "ratio_lockstep_vs_clients": round(arms["lockstep"]["tokens_per_s"] / clients, 3) if clients else None,
        "ratio_async_vs_lockstep": round(arms["async"]["tokens_per_s"] / arms["lockstep"]["tokens_per_s"], 3)
        if arms["lockstep"]["tokens_per_s"] else None,
    }
    result["goal_async_at_least_0.8_of_clients"] = (result["ratio_async_vs_clients"] or 0) >= 0.8
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

"""Throughput of the env adapters under the rollout engine: expert steps/s with 1 and 2 worker processes.

    python bench/env_adapters_throughput.py [--alfworld-games 8] [--shop-tasks 200]

`shop` runs in-process in each worker; `webshop` is the HTTP client (random agent: the client has no oracle) against the `shop` server on
127.0.0.1; `alfworld` (if installed and ../shared/data holds the games) plays valid_unseen games with
ALFWorld's handcoded expert (50 steps). Prints one JSON object (success rates, steps/s, 2-vs-1 ratios).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import socket
import tempfile
import threading
import time
from pathlib import Path

from proctor.agents.experts import ExpertAgent
from proctor.agents.simple import RandomAgent
from proctor.envs import EnvSpec
from proctor.rollout import rollout

ALFWORLD_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "alfworld" / "json_2.1.1"


def measure(spec: EnvSpec, tasks: list[str], workers: int, agent) -> dict:
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        store = rollout(spec, agent, tasks, out, batch_size=4, workers=workers, progress=False)
        wall = time.perf_counter() - start
        trajs = list(store)
    steps = sum(len(t.steps) for t in trajs)
    return {"workers": workers, "episodes": len(trajs), "success": sum(t.success for t in trajs) / len(trajs),
            "steps": steps, "wall_s": round(wall, 2), "steps_per_s": round(steps / wall, 1),
            "mean_reset_s": round(sum(t.timings["reset_s"] for t in trajs) / len(trajs), 3)}


def both(spec: EnvSpec, tasks: list[str], agent=None) -> dict:
    agent = agent or ExpertAgent("oracle")
    one, two = measure(spec, tasks, 1, agent), measure(spec, tasks, 2, agent)
    return {"workers_1": one, "workers_2": two, "speedup_2_vs_1": round(two["steps_per_s"] / one["steps_per_s"], 2)}


def serve_shop() -> tuple[str, object]:
    import uvicorn

    from proctor.envs.shop.server import create_app

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    server = uvicorn.Server(uvicorn.Config(create_app(0), host="127.0.0.1", port=port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    return f"http://127.0.0.1:{port}", server


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shop-tasks", type=int, default=200)
    ap.add_argument("--alfworld-games", type=int, default=8)
    args = ap.parse_args()
    shop_tasks = [f"fixed_{i}" for i in range(args.shop_tasks)]
    result = {"shop": both(EnvSpec("shop", {"num_tasks": {"test": args.shop_tasks}}), shop_tasks)}
    url, server = serve_shop()
    result["webshop_http"] = both(EnvSpec("webshop", {"base_url": url}), shop_tasks, RandomAgent(seed=0))
    server.should_exit = True
    if importlib.util.find_spec("alfworld") and ALFWORLD_DATA.is_dir():
        spec = EnvSpec("alfworld", {"data_dir": str(ALFWORLD_DATA), "max_steps": 50})
        start = time.perf_counter()
        tasks = spec.make().task_ids("test")[::6][: args.alfworld_games]
        result["alfworld"] = {"list_tasks_s": round(time.perf_counter() - start, 2), **both(spec, tasks)}
    else:
        result["alfworld"] = "skipped: alfworld not installed or games not at " + str(ALFWORLD_DATA)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()

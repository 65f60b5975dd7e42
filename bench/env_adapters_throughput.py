"""Throughput of the env adapters under the rollout engine: expert steps/s with 1 and 2 worker processes.

    python bench/env_adapters_throughput.py [--alfworld-games 8] [--shop-tasks 200] [--textworld-games 8]
        [--scienceworld-tasks 4] [--detective-episodes 4]

`shop` runs in-process in each worker; `webshop` is the HTTP client (random agent: the client has no oracle) against the `shop` server on
127.0.0.1; `alfworld` (if installed and ../shared/data holds the games) plays valid_unseen games with
ALFWorld's handcoded expert (50 steps); `textworld` (if installed) generates games (3 rooms, 6 objects,
quests of 3) into a temporary folder, then plays them with the walkthrough expert and with a random agent
(50 steps); `scienceworld` (if installed) plays the first test variation of short tasks with the gold-path
expert, valid-action lists on (one JVM per env); `detective` (jericho installed, game in ../shared/data) plays
the walkthrough (50 steps) several times: Jericho's valid actions are cached per process by world state, so
episodes after a worker's first are cheaper. Prints one JSON object (success rates, steps/s, 2-vs-1 ratios).
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
DETECTIVE_GAME = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "archer" / "detective.z5"
#: ScienceWorld tasks whose gold paths are short (3-9 moves), easy to time
SCIENCEWORLD_TASKS = ("lifespan-longest-lived", "find-non-living-thing", "chemistry-mix-paint-secondary-color",
                      "power-component", "test-conductivity", "use-thermometer", "find-plant",
                      "find-animal")


def measure(spec: EnvSpec, tasks: list[str], workers: int, agent, samples: int = 1) -> dict:
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        store = rollout(spec, agent, tasks, out, samples_per_task=samples, batch_size=4, workers=workers,
                        progress=False)
        wall = time.perf_counter() - start
        trajs = list(store)
    steps = sum(len(t.steps) for t in trajs)
    return {"workers": workers, "episodes": len(trajs), "success": sum(t.success for t in trajs) / len(trajs),
            "steps": steps, "wall_s": round(wall, 2), "steps_per_s": round(steps / wall, 1),
            "mean_reset_s": round(sum(t.timings["reset_s"] for t in trajs) / len(trajs), 3)}


def both(spec: EnvSpec, tasks: list[str], agent=None, samples: int = 1) -> dict:
    agent = agent or ExpertAgent("oracle")
    one, two = measure(spec, tasks, 1, agent, samples), measure(spec, tasks, 2, agent, samples)
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


def textworld_entry(n_games: int) -> dict:
    """Generation time per game, then the walkthrough expert and a random agent (50 steps) on the games."""
    with tempfile.TemporaryDirectory() as games:
        kwargs = {"games_dir": games, "n_games": {"test": n_games}, "max_steps": 50}
        spec = EnvSpec("textworld", kwargs)
        env = spec.make()
        start = time.perf_counter()
        env.generate(["test"], progress=False)
        generate_s = time.perf_counter() - start
        tasks = env.task_ids("test")
        return {"generate_s_per_game": round(generate_s / n_games, 2), "expert": both(spec, tasks),
                "random_50_steps": both(spec, tasks, RandomAgent(seed=0)),
                "random_50_steps_in_process": measure(spec, tasks, 0, RandomAgent(seed=0))}


def scienceworld_entry(n_tasks: int) -> dict:
    """Time to list the tasks' variations, then the gold-path expert on one test variation of each task."""
    spec = EnvSpec("scienceworld", {"tasks": list(SCIENCEWORLD_TASKS[:n_tasks])})
    env = spec.make()
    start = time.perf_counter()
    tasks = [next(t for t in env.task_ids("test") if t.startswith(name + "/")) for name in env.tasks]
    list_s = time.perf_counter() - start
    env.close()
    return {"start_jvm_and_list_variations_s": round(list_s, 2), "tasks": tasks, **both(spec, tasks)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shop-tasks", type=int, default=200)
    ap.add_argument("--alfworld-games", type=int, default=8)
    ap.add_argument("--textworld-games", type=int, default=8)
    ap.add_argument("--scienceworld-tasks", type=int, default=4)
    ap.add_argument("--detective-episodes", type=int, default=4)
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
    if importlib.util.find_spec("textworld"):
        result["textworld"] = textworld_entry(args.textworld_games)
    else:
        result["textworld"] = "skipped: textworld not installed (pip install 'proctor[textworld]')"
    if importlib.util.find_spec("scienceworld"):
        result["scienceworld"] = scienceworld_entry(args.scienceworld_tasks)
    else:
        result["scienceworld"] = "skipped: scienceworld not installed (pip install 'proctor[scienceworld]')"
    if importlib.util.find_spec("jericho") and DETECTIVE_GAME.is_file():
        spec = EnvSpec("detective", {"game_path": str(DETECTIVE_GAME)})
        result["detective"] = both(spec, ["detective"], samples=args.detective_episodes)
    else:
        result["detective"] = "skipped: jericho not installed or game not at " + str(DETECTIVE_GAME)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()

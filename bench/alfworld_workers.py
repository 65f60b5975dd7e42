"""ALFWorld env steps/s under the rollout engine with 0, 1 and 2 env worker processes, on the same games.

    python bench/alfworld_workers.py [--games 8] [--max-steps 20] [--agent random|expert] [--workers 0,1,2]
        [--panel examples/alfworld/panels/train-fit.txt] [--batch 4]

Each setting rolls the same agent out on the same games (the first `--games` of the panel: train games spread
over the six task types) into a fresh store, `--batch` envs at a time, and counts env steps per second of wall
time. That time is what a `proctor run` stage pays: game loading at each reset, TextWorld's steps, and, with
`--agent expert`, ALFWorld's handcoded expert planning inside each step. The `random` agent (the default) is
seeded per (task, sample, step), so every setting takes the same actions and the same number of steps.
Workers > 0 include starting the processes (each imports alfworld); every game is loaded once, untimed, before
the first setting, so none pays for a cold file cache. Prints one JSON object: per setting the
episodes, steps, wall seconds, steps/s and mean reset seconds, and each setting's steps/s over 0 workers'.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from proctor.agents.experts import ExpertAgent
from proctor.agents.simple import RandomAgent
from proctor.envs import EnvSpec
from proctor.envs.versions import env_versions
from proctor.rollout import rollout

ROOT = Path(__file__).resolve().parents[1]
ALFWORLD_DATA = ROOT.parent / "shared" / "data" / "alfworld" / "json_2.1.1"


def read_panel(path: Path) -> list[str]:
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return [line for line in lines if line]


def measure(spec: EnvSpec, games: list[str], workers: int, agent, batch: int) -> dict:
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        store = rollout(spec, agent, games, out, split="train", batch_size=batch, workers=workers, progress=False)
        wall = time.perf_counter() - start
        trajs = list(store)
    steps = sum(len(t.steps) for t in trajs)
    return {"episodes": len(trajs), "successes": sum(t.success for t in trajs), "steps": steps,
            "env_errors": sum(t.termination == "env_error" for t in trajs), "wall_s": round(wall, 2),
            "steps_per_s": round(steps / wall, 2),
            "mean_reset_s": round(sum(t.timings.get("reset_s", 0.0) for t in trajs) / len(trajs), 3)}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", type=Path, default=ALFWORLD_DATA)
    ap.add_argument("--panel", type=Path, default=ROOT / "examples" / "alfworld" / "panels" / "train-fit.txt")
    ap.add_argument("--games", type=int, default=8)
    ap.add_argument("--max-steps", type=int, default=20)
    ap.add_argument("--agent", choices=("random", "expert"), default="random")
    ap.add_argument("--workers", default="0,1,2", help="comma-separated worker counts")
    ap.add_argument("--batch", type=int, default=4, help="envs stepped together")
    args = ap.parse_args(argv)
    spec = EnvSpec("alfworld", {"data_dir": str(args.data_dir), "max_steps": args.max_steps})
    games = read_panel(args.panel)[:args.games]
    agent = RandomAgent(seed=0) if args.agent == "random" else ExpertAgent("oracle")
    warm = spec.make()  # untimed: imports, the package grammar, the games' files into the OS cache
    for game in games:
        warm.reset(game)
    warm.close()
    runs = {}
    for n in (int(w) for w in args.workers.split(",")):
        runs[str(n)] = measure(spec, games, n, agent, args.batch)
    base = runs.get("0", next(iter(runs.values())))["steps_per_s"]
    result = {"bench": "alfworld_workers", "agent": args.agent, "games": len(games), "max_steps": args.max_steps,
              "batch": args.batch, "cpus": os.cpu_count(), "load_avg_1min": round(os.getloadavg()[0], 2),
              "versions": env_versions("alfworld"), "runs": runs,
              "steps_per_s_vs_0_workers": {n: round(r["steps_per_s"] / base, 2) for n, r in runs.items()}}
    print(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()

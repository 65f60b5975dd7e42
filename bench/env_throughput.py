"""Environment throughput: steps/s of any registered env under random and expert action streams.

    python bench/env_throughput.py household [--steps 20000] [--split test] [--kwargs '{"max_steps": 30}']

Drives `env.step` directly on one core, cycling through the split's tasks. Streams:
- `random`: a uniformly random admissible action each step (skipped when the env lists none);
- `oracle`: the env's privileged expert (`expert_hints=True`; the timing includes its planning, since the
  env computes the hint inside `step`), skipped when the env has no oracle;
- one stream per registered expert kind (e.g. `search`), whose policy time is reported apart from env time.
Prints one JSON object: per stream the steps, episodes, successes and env steps/s, plus ratios to `random`.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Callable
from typing import Any

from proctor.agents.experts import ExpertAgent
from proctor.envs import make
from proctor.envs.base import TextEnv
from proctor.envs.experts import expert_kinds
from proctor.prompts.turns import Prefix
from proctor.trajectory import Step

Chooser = Callable[[Prefix], str | None]


def run_stream(
    env: TextEnv, task_ids: list[str], steps: int, choose: Chooser, keep_history: bool
) -> dict[str, Any]:
    """Run episodes until `steps` env steps are taken; time env.reset/step apart from the chooser."""
    env_s = policy_s = 0.0
    done_steps = episodes = wins = 0
    while done_steps < steps:
        task_id = task_ids[episodes % len(task_ids)]
        t0 = time.perf_counter()
        obs, info = env.reset(task_id, seed=episodes)
        env_s += time.perf_counter() - t0
        history: list[Step] = []
        done = False
        while not done and done_steps < steps:
            t0 = time.perf_counter()
            action = choose(Prefix(env.name, task_id, env.task, obs, history, info))
            policy_s += time.perf_counter() - t0
            if action is None:
                return {"skipped": "no action available for this stream"}
            t0 = time.perf_counter()
            result = env.step(action)
            env_s += time.perf_counter() - t0
            if keep_history:
                history.append(Step(observation=obs, action=action, info=info))
            obs, info, done = result.observation, result.as_info(), result.done
            done_steps += 1
        episodes += 1
        wins += int(done and bool(info.get("won")))
    return {
        "steps": done_steps,
        "episodes": episodes,
        "wins": wins,
        "env_seconds": round(env_s, 4),
        "policy_seconds": round(policy_s, 4),
        "steps_per_s": round(done_steps / env_s, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("env", help="registered env name, e.g. household")
    parser.add_argument("--steps", type=int, default=20000, help="env steps per stream")
    parser.add_argument("--split", default="test")
    parser.add_argument("--kwargs", default="{}", help="JSON constructor kwargs for the env")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random stream")
    args = parser.parse_args()
    kwargs = json.loads(args.kwargs)
    rng = random.Random(args.seed)

    def random_action(prefix: Prefix) -> str | None:
        actions = prefix.admissible_actions
        return rng.choice(actions) if actions else None

    def oracle_action(prefix: Prefix) -> str | None:
        return prefix.info.get("expert_action")

    plain = make(args.env, **kwargs)
    task_ids = plain.task_ids(args.split)
    streams: dict[str, Any] = {"random": run_stream(plain, task_ids, args.steps, random_action, False)}
    hinted = make(args.env, **{**kwargs, "expert_hints": True})
    streams["oracle"] = run_stream(hinted, task_ids, args.steps, oracle_action, False)
    for kind in expert_kinds(args.env)[1:]:
        streams[kind] = run_stream(
            make(args.env, **kwargs), task_ids, args.steps, ExpertAgent(kind).policy_for(args.env), True
        )
    base = streams["random"].get("steps_per_s")
    if base:
        for s in streams.values():
            if "steps_per_s" in s:
                s["ratio_to_random"] = round(s["steps_per_s"] / base, 3)
    print(
        json.dumps(
            {"bench": "env_throughput", "env": args.env, "split": args.split, "streams": streams}, indent=2
        )
    )


if __name__ == "__main__":
    main()

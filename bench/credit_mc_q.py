"""Benchmark: Monte-Carlo Q targets (proctor.credit mc-q) over 10^5 and 10^6 steps.

Trajectories come from the `household` env: K rollouts per task of an ε-greedy expert (ε = 0.6: the
expert's action, else a uniformly random admissible one), so rollouts of a task share prefixes and
both succeed and fail. Rolling out the env costs far more than the estimator, so the 10^6-step set is the
10^5-step set replicated under distinct task ids (`<task>#r<i>`: new states, same per-task statistics).
Prints one JSON object: seconds and steps/s at each size, and the ratio t(10^6)/t(10^5) (10 = linear).

    python bench/credit_mc_q.py [--steps 100000] [--scale 10] [--k 8]
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import time

from tqdm import tqdm

from proctor.credit.montecarlo import MCConfig, mc_q
from proctor.credit.outcome import scored
from proctor.envs import make
from proctor.trajectory import Step, Trajectory


def household_rollouts(n_steps: int, k: int, eps: float, seed: int) -> list[Trajectory]:
    """Rollouts of an ε-greedy expert in household until `n_steps` steps, K per task."""
    env = make("household", expert_hints=True)
    rng = random.Random(seed)
    trajs, total = [], 0
    with tqdm(total=n_steps, desc="household rollouts", unit="step") as bar:
        for task_id in env.task_ids("train"):
            for sample in range(k):
                obs, info = env.reset(task_id, sample)
                steps, result = [], None
                expert, admissible = info.get("expert_action"), info["admissible_actions"]
                while result is None or not result.done:
                    action = expert if expert and rng.random() > eps else rng.choice(admissible)
                    result = env.step(action)
                    steps.append(Step(observation=obs, action=action, reward=result.reward, done=result.done,
                                      info={"valid": result.valid}))
                    obs, admissible = result.observation, result.admissible_actions
                    expert = result.info.get("expert_action")
                trajs.append(Trajectory(
                    id=f"{task_id}/{sample}", env="household", task_id=task_id, sample=sample, task=env.task,
                    split="train", seed=sample, agent=f"eps-expert-{eps}", steps=steps, final_observation=obs,
                    success=result.won, score=float(result.info["score"]),
                    termination="success" if result.won else ("max_steps" if result.truncated else "failure")))
                total += len(steps)
                bar.update(len(steps))
                if total >= n_steps:
                    return trajs
    raise RuntimeError(f"household train split has fewer than {n_steps} steps at K={k}")


def replicate(trajs: list[Trajectory], copies: int) -> list[Trajectory]:
    """`copies` copies of `trajs` under distinct task ids (the Step objects are shared, not copied)."""
    return [t.model_copy(update={"id": f"{t.id}#r{i}", "task_id": f"{t.task_id}#r{i}"})
            for i in range(copies) for t in trajs]


def time_mc_q(trajs: list[Trajectory], cfg: MCConfig) -> dict[str, float]:
    t0 = time.perf_counter()
    items, _ = scored(trajs, cfg)
    records = mc_q(items, cfg)
    seconds = time.perf_counter() - t0
    steps = sum(len(t.steps) for t in trajs)
    assert len(records) == steps
    return {"steps": steps, "trajectories": len(trajs), "states_action_pairs": len({(r.state_key, r.action)
            for r in records}), "seconds": round(seconds, 3), "steps_per_s": round(steps / seconds)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--scale", type=int, default=10)
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--eps", type=float, default=0.6)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    base = household_rollouts(args.steps, args.k, args.eps, args.seed)
    cfg = MCConfig()
    small = time_mc_q(base, cfg)
    large = time_mc_q(replicate(base, args.scale), cfg)
    print(json.dumps({
        "bench": "credit_mc_q", "env": "household", "k": args.k, "eps": args.eps,
        "success_rate": round(sum(t.success for t in base) / len(base), 3),
        "small": small, "large": large,
        "time_ratio": round(large["seconds"] / small["seconds"], 2), "size_ratio": large["steps"] / small["steps"],
        "python": platform.python_version(), "machine": platform.machine(),
    }, indent=2))


if __name__ == "__main__":
    main()

"""How much could per-step best-of-N add to a policy on `household`, with a perfect judge of its candidates?

    python experiments/bon_ceiling.py --policy runs/sft-exp/sft [--n 8] [--tasks 200] [--judge search]

Runs `BestOfNAgent` (the library's per-step best-of-N, N samples of the policy's `choice` agent at T = 1 per
state, identical actions merged) with a scorer that gives 1 to the action a reference expert would take and 0
to the others: `search`, the searching expert (a function of the task and the observed history, so a learned
PRM could in principle match it), or `oracle`, the env's expert hint (it knows where every object is). When the
judge's action is not among the samples, the most-drawn sample wins, as with a PRM tie. Prints the success of
the policy alone and of best-of-N with the judge, on the same test tasks and seed, as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from proctor.agents.base import Prefix
from proctor.agents.choice import ChoiceAgent
from proctor.envs.household.expert import search_policy
from proctor.rollout import RolloutConfig, run_rollout
from proctor.search.best_of_n import BestOfNAgent


class ExpertJudge:
    """Scores 1.0 for the judge's action at each state, 0.0 for any other (the scorer interface of search)."""

    batch_size = 16

    def __init__(self, judge: str):
        self.judge = judge

    def choice(self, prefix: Prefix) -> str | None:
        return search_policy(prefix) if self.judge == "search" else prefix.info.get("expert_action")

    def score_action_groups(self, prefixes: Sequence[Prefix], actions: Sequence[Sequence[str]], cfg: Any = None,
                            states_per_pass: int | None = None) -> list[list[float]]:
        return [[float(a == self.choice(p)) for a in acts] for p, acts in zip(prefixes, actions, strict=True)]


def success(agent: Any, out: Path, args: argparse.Namespace) -> float:
    env_kwargs = {"preset": "small", "max_steps": 20, "expert_hints": args.judge == "oracle"}
    trajs = run_rollout(RolloutConfig(env="household", env_kwargs=env_kwargs, out=out, split="test",
                                      tasks=args.tasks, samples=1, batch=50, seed=args.seed, progress=False),
                        agent=agent).store.load()
    return sum(t.success for t in trajs) / len(trajs)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--policy", type=Path, required=True, help="an SFT checkpoint (its sft.json names its prompt)")
    p.add_argument("--n", type=int, default=8)
    p.add_argument("--tasks", type=int, default=200)
    p.add_argument("--judge", choices=("search", "oracle"), default="search")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--work", type=Path, required=True, help="a new folder for the two evaluations' trajectories")
    args = p.parse_args(argv)
    prompt = json.loads((args.policy / "sft.json").read_text())["config"]["prompt"]
    policy = ChoiceAgent(args.policy, prompt=prompt, temperature=1.0, seed=args.seed)
    alone = success(policy, args.work / "policy", args)
    judged = success(BestOfNAgent(policy, ExpertJudge(args.judge), args.n), args.work / f"bo{args.n}", args)
    result = {"policy": str(args.policy), "tasks": args.tasks, "n": args.n, "judge": args.judge,
              "policy_success": alone, "best_of_n_success": judged}
    json.dump(result, sys.stdout, indent=2)
    print()
    return result


if __name__ == "__main__":
    main()

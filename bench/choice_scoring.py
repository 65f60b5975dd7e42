"""The choice agent's scoring of every admissible action at B states, by its three paths: each prompt and all its
replies in one row under a tree mask (`proctor.models.shared_prefix`, the default), the prompts' pass then the
replies on their copied KV cache (the first call; attention without custom masks), and prompt + reply rows (caches
that cannot be shared).

    python bench/choice_scoring.py [--states 50] [--hidden 128 --layers 4] [--model DIR] [--repeats 5]

States are household (`small` preset) test states at depths 0, 1, 2, ... reached by a random policy, so prompts
grow with the history as in an episode. Each timing is `ChoiceAgent.score` end to end (rendering and tokenizing
included), the fastest of `--repeats`. Prints one JSON object: times, the ratios measured in this run, and the
largest difference between the paths' log-probs.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from unittest import mock

import torch

from proctor.agents.choice import ChoiceAgent
from proctor.agents.simple import RandomAgent
from proctor.envs import make
from proctor.episode import Episode, WorkItem


def household_states(b: int) -> list:
    env, agent, states = make("household", preset="small"), RandomAgent(seed=0), []
    for k, tid in enumerate(env.task_ids("test")[:b]):
        obs, info = env.reset(tid, k)
        ep = Episode.begin("household", WorkItem(tid, 0, k), obs, info)
        while len(ep.steps) < k % 12 and not env.done:
            [[c]] = agent.act([ep.prefix()], 1)
            ep.record(c, env.step(c.action))
        states.append(ep.prefix())
    return states


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--states", type=int, default=50)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--model", default=None, help="a model folder (default: a tiny Llama built here)")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    if args.model is None:
        from proctor.models import build_tiny

        args.model = str(build_tiny(tempfile.mkdtemp() + "/tiny", hidden_size=args.hidden, layers=args.layers,
                                    heads=4))
    torch.manual_seed(0)
    agent = ChoiceAgent(args.model, prompt={"history": 2, "memory": True, "show_admissible": False, "system": ""})
    states = household_states(args.states)

    def timed(path: str) -> tuple[float, list]:
        times, scored = [], []
        for _ in range(args.repeats):
            agent._reuse_kv = {"tree": True, "kv copy": None, "full rows": False}[path]
            with mock.patch("proctor.agents.choice.takes_tree_mask", lambda m: path == "tree"):
                start = time.perf_counter()
                scored = agent.score(states)
                times.append(time.perf_counter() - start)
        return min(times), [c.logprobs for row in scored for c in row]

    results = {path: timed(path) for path in ("tree", "kv copy", "full rows")}
    tree = results["tree"][1]
    diff = max(abs(a - b) for path in ("kv copy", "full rows") for x, y in zip(tree, results[path][1], strict=True)
               for a, b in zip(x, y, strict=True))
    print(json.dumps({
        "states": len(states), "replies": len(tree), "model": args.model, "torch_threads": torch.get_num_threads(),
        "seconds": {path: round(t, 4) for path, (t, _) in results.items()},
        "tree_speedup_vs_kv_copy": round(results["kv copy"][0] / results["tree"][0], 2),
        "tree_speedup_vs_full_rows": round(results["full rows"][0] / results["tree"][0], 2),
        "max_abs_logprob_diff": diff,
    }, indent=2))


if __name__ == "__main__":
    main()

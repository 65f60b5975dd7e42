"""Search costs: (1) one per-step best-of-N step for B states, scored with the shared-prefix scorer batched
across states vs each candidate scored alone; (2) forking a live env for beam search, in-process clone vs
replay of the action prefix, per built-in env kind.

    python bench/search_best_of_n.py [--states 16] [--n 8] [--model DIR] [--hidden 256 --layers 4]

States are household test states at depths 0..B-1 reached by a random policy; the N candidates per state are
N draws of the random agent, identical ones merged (what `BestOfNAgent` scores). Every timing is end to end
from (state, actions) to scores (rendering and tokenizing included) and the fastest of `--repeats` runs. Prints
one JSON object; the ratios are measured in the same run on the same model.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

import torch

from proctor.agents.simple import RandomAgent
from proctor.envs import EnvSpec, make
from proctor.episode import Episode, WorkItem
from proctor.prm.model import ProcessRewardModel
from proctor.prm.scoring import PRMScorer
from proctor.rollout.pools import InProcessEnvPool
from proctor.search.best_of_n import merge_candidates

BUILTIN_ENVS = ("household", "twenty_questions", "arithmetic", "shop")


def best_time(fn, repeats: int) -> tuple[float, object]:
    """The fastest of `repeats` runs, and the last run's result."""
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result


def household_states(b: int, seed: int = 0) -> list:
    env, agent, states = make("household"), RandomAgent(seed=seed), []
    for k, tid in enumerate(env.task_ids("test")[:b]):
        obs, info = env.reset(tid, k)
        ep = Episode.begin("household", WorkItem(tid, 0, k), obs, info)
        while len(ep.steps) < k and not env.done:
            [[c]] = agent.act([ep.prefix()], 1)
            ep.record(c, env.step(c.action))
        states.append(ep.prefix())
    return states


def scoring_bench(args) -> dict:
    if args.model is None:
        from proctor.models import build_tiny

        args.model = str(build_tiny(tempfile.mkdtemp() + "/tiny", hidden_size=args.hidden, layers=args.layers,
                                    heads=4))
    torch.manual_seed(0)
    prm = ProcessRewardModel.build(args.model, "scalar", dtype="float32").eval()
    scorer = PRMScorer(prm, batch_size=args.states)
    states = household_states(args.states)
    draws = RandomAgent(seed=1).act(states, args.n)
    actions = [[m.action for m in merge_candidates(d)] for d in draws]
    marker = prm.tokenizer.convert_tokens_to_ids(scorer.marker)

    def features() -> list[dict]:
        out = []
        for p, a in zip(states, actions, strict=True):
            prefix, suffixes = scorer.encode_candidates(p, a)
            out += [{"input_ids": prefix + s, "step_mask": [0] * len(prefix) + [int(t == marker) for t in s],
                     "labels": [-100] * (len(prefix) + len(s))} for s in suffixes]
        return out

    one_scorer = PRMScorer(prm, batch_size=1)

    def batched():
        return [x for row in scorer.score_action_groups(states, actions) for x in row]

    def per_state():
        return [x for p, a in zip(states, actions, strict=True) for x in scorer.score_actions(p, a)]

    def alone():
        return [one_scorer.score_features([f])[0][-1] for f in features()]

    def full_padded():
        return [row[-1] for row in scorer.score_features(features())]

    with torch.no_grad():
        scorer.score_action_groups(states[:2], actions[:2])  # warm-up
        runs = {name: best_time(fn, args.repeats) for name, fn in (("batched", batched), ("per_state", per_state),
                                                                     ("alone", alone), ("full_padded", full_padded))}
    t = {name: r[0] for name, r in runs.items()}
    ref = runs["alone"][1]
    prefix_tokens = [len(scorer.encode_candidates(p, [])[0]) for p in states]
    return {
        "model": {"path": args.model, "params_m": round(sum(p.numel() for p in prm.parameters()) / 1e6, 2)},
        "states": len(states), "n": args.n, "distinct_candidates": sum(len(a) for a in actions),
        "prefix_tokens_mean": round(sum(prefix_tokens) / len(prefix_tokens), 1),
        "prefix_tokens_max": max(prefix_tokens),
        "seconds": {"batched_shared_prefix": round(t["batched"], 4), "per_state_shared_prefix": round(t["per_state"], 4),
                    "each_candidate_alone": round(t["alone"], 4), "full_sequences_padded": round(t["full_padded"], 4)},
        "speedup_vs_each_candidate_alone": round(t["alone"] / t["batched"], 2),
        "speedup_vs_per_state_shared_prefix": round(t["per_state"] / t["batched"], 2),
        "speedup_vs_full_sequences_padded": round(t["full_padded"] / t["batched"], 2),
        "goal_speedup_vs_alone": 4.0,
        "max_abs_diff_vs_alone": max(abs(a - b) for name in ("batched", "per_state", "full_padded")
                                     for a, b in zip(runs[name][1], ref, strict=True)),
    }


def expert_actions(name: str) -> tuple[str, int, list[str]]:
    """A task, a seed, and the oracle's actions up to its last state before the end (the state to fork)."""
    env = make(name, expert_hints=True)
    tid = env.task_ids("test")[0]
    _, info = env.reset(tid, 0)
    actions = []
    while not env.done:
        actions.append(info["expert_action"])
        info = env.step(actions[-1]).info
    return tid, 0, actions[:-1]


def fork_bench(name: str, repeats: int) -> dict:
    tid, seed, actions = expert_actions(name)
    spec = EnvSpec(name, {"expert_hints": True})
    with InProcessEnvPool(spec, 2) as pool:
        pool.start(0, tid, seed, actions)
        assert pool.collect()[0].ok

        def clone():
            pool.fork(0, 1)
            assert pool.collect()[1].ok

        def replay():
            pool.start(1, tid, seed, actions)
            assert pool.collect()[1].ok

        c = best_time(lambda: [clone() for _ in range(repeats)], 3)[0] / repeats
        r = best_time(lambda: [replay() for _ in range(repeats)], 3)[0] / repeats
    return {"depth": len(actions), "clone_us": round(c * 1e6, 1), "replay_us": round(r * 1e6, 1),
            "replay_over_clone": round(r / c, 2)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--states", type=int, default=16)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--model", default=None, help="backbone folder (default: a tiny Llama built here)")
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--fork-repeats", type=int, default=200)
    args = ap.parse_args()
    out = {"device": "cpu", "threads": torch.get_num_threads(), "best_of_n_step": scoring_bench(args),
           "env_fork": {name: fork_bench(name, args.fork_repeats) for name in BUILTIN_ENVS}}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

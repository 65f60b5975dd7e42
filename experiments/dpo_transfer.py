"""Does a policy put its mass where the PRM does, at states it was not trained on? (a diagnosis of online DPO and
best-of-N distillation)

    python experiments/dpo_transfer.py --states runs/ev/pi0-valid/trajectories --prm runs/qs/iter-0/prm \
        --policy runs/qs/iter-0/policy --policy runs/qs/iter-1/policy [--states-n 300] [--n 8] [--seed 0]

At `--states-n` states drawn from a trajectory store (e.g. π0's evaluation on the valid tasks: states no DPO pair
came from), each `choice` policy's distribution p over the admissible actions (T = 1) is set beside the PRM's
scores Q of the same actions. Per policy, means over the states with a 95% normal interval, and each later
policy's paired difference with the first (`minus_first`, the same states):

- `expected_q`: Σ_a p(a) Q(a), the PRM score of the policy's next action on average;
- `p_best`: p(argmax_a Q), the mass on the PRM's favourite action;
- `mode_is_best`: whether the policy's most likely action is the PRM's favourite;
- `entropy`: −Σ_a p(a) log p(a), in nats (sharpening lowers it);
- `kl_to_best_of_n`: KL(π_N ‖ p), where π_N is the action law of best-of-`--n`(first policy, PRM)
  (`proctor.stats.best_of_n_probabilities`), the target of best-of-N distillation;
- `mode_is_best_of_n_mode`: whether the policy's most likely action is π_N's.

Online DPO against the PRM should raise the first three at held-out states; a policy that only lowers its entropy
has been sharpened, not taught the PRM's ranking. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import math
import random
from collections.abc import Sequence

from proctor.agents.choice import ChoiceAgent, choice_probabilities
from proctor.prm.ref import PRMRef
from proctor.prompts import Prefix, PromptConfig, prefix_at
from proctor.stats import best_of_n_probabilities
from proctor.store import TrajectoryStore

_PROMPT = {"history": 2, "memory": True, "show_admissible": False, "system": ""}
_BATCH = 20


def held_out_states(store: str, n: int, seed: int) -> list[Prefix]:
    """n step prefixes drawn uniformly from the store's episodes (every step of every non-empty episode)."""
    trajs = [t for t in TrajectoryStore.open(store).load() if t.steps]
    where = [(t, i) for t in trajs for i in range(len(t.steps))]
    random.Random(seed).shuffle(where)
    return [prefix_at(t, i) for t, i in where[:n]]


def state_stats(probs: Sequence[float], scores: Sequence[float], target: Sequence[float]) -> dict[str, float]:
    """The per-state numbers of the module docstring for one policy's p, the PRM's Q and best-of-N's law π_N."""
    best = max(range(len(scores)), key=scores.__getitem__)
    mode = max(range(len(probs)), key=probs.__getitem__)
    target_mode = max(range(len(target)), key=target.__getitem__)
    kl = sum(t * (math.log(t) - math.log(max(p, 1e-300))) for t, p in zip(target, probs, strict=True) if t > 0)
    return {"expected_q": sum(p * q for p, q in zip(probs, scores, strict=True)), "p_best": probs[best],
            "mode_is_best": float(mode == best), "entropy": -sum(p * math.log(p) for p in probs if p > 0),
            "kl_to_best_of_n": kl, "mode_is_best_of_n_mode": float(mode == target_mode)}


def mean_ci(xs: Sequence[float]) -> dict[str, float]:
    m = sum(xs) / len(xs)
    se = math.sqrt(sum((x - m) ** 2 for x in xs) / max(1, len(xs) - 1) / len(xs))
    return {"mean": round(m, 4), "ci95": [round(m - 1.96 * se, 4), round(m + 1.96 * se, 4)]}


def main(argv: Sequence[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--states", required=True, help="trajectory store whose steps are the held-out states")
    ap.add_argument("--prm", required=True, help="the PRM folder the policies were trained against")
    ap.add_argument("--policy", action="append", required=True, help="a policy folder (repeat to compare)")
    ap.add_argument("--states-n", type=int, default=300)
    ap.add_argument("--n", type=int, default=8, help="N of best-of-N(first policy, PRM) for the π_N columns")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.states_n < 1 or args.n < 1:
        ap.error(f"--states-n and --n must be >= 1, got {args.states_n} and {args.n}")
    prefixes = [p for p in held_out_states(args.states, args.states_n, args.seed) if p.admissible_actions]
    if not prefixes:
        ap.error(f"--states {args.states}: no step with a list of admissible actions (the `choice` policies rank "
                 "those; evaluate them on an env that lists its actions)")
    scorer = PRMRef(prm=args.prm).open()
    agents = [ChoiceAgent(p, prompt=PromptConfig(**_PROMPT)) for p in args.policy]
    rows: list[list[dict[str, float]]] = [[] for _ in agents]
    for start in range(0, len(prefixes), _BATCH):
        chunk = prefixes[start:start + _BATCH]
        scored = [agent.score(chunk) for agent in agents]
        for j, prefix in enumerate(chunk):
            actions = [c.action for c in scored[0][j]]
            q = scorer.score_actions(prefix, actions)
            probs = []
            for per_agent in scored:
                loglik = {c.action: c.meta["choice_logprob"] for c in per_agent[j]}
                probs.append(choice_probabilities([loglik[a] for a in actions], 1.0))
            target = best_of_n_probabilities(probs[0], q, args.n)
            for k, p in enumerate(probs):
                rows[k].append(state_stats(p, q, target))
    keys = list(rows[0][0])
    out = {"states": len(prefixes), "store": args.states, "prm": args.prm,
           "policies": {p: {key: mean_ci([r[key] for r in rs]) for key in keys}
                        for p, rs in zip(args.policy, rows, strict=True)},
           "minus_first": {p: {key: mean_ci([r[key] - f[key] for r, f in zip(rs, rows[0], strict=True)])
                               for key in keys} for p, rs in zip(args.policy[1:], rows[1:], strict=True)}}
    print(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main()

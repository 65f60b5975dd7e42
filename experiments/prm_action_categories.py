"""How a PRM ranks every admissible action at a policy's `household` states, by kind of action.

    python experiments/prm_action_categories.py --prm runs/quickstart/iter-0/prm \
        --trajectories runs/quickstart/iter-0/eval/policy/trajectories [--limit 100]
    python experiments/prm_action_categories.py --policy runs/quickstart/iter-0/policy --trajectories ...

With `--policy` the scores are a policy's log-likelihood of each action instead (the `choice` agent's ranking,
with the quickstart's prompt): what the policy itself prefers, for comparison.

For each step of the stored trajectories, every admissible action is scored by the PRM at that state (the
shared-prefix scorer, batched across states) and put in a category: `take-right` / `take-wrong` (the object
the task names, or another), `heat|cool|clean-needed` / `-unneeded` (the transformation the task asks for, or
another), else the verb (`go`, `open`, `move`, ...). Prints one JSON object: the mean score per category, how
often each category is the PRM's argmax, at states offering both, the probability that a random "bad"
action (a wrong take or an unneeded transformation, which π0's rollouts almost never recover from) scores
below a random other action (0.5: no preference; 1: always below), and at states offering both a right and a
wrong take, the probability that the right one scores higher (the object matching the task's).
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import Counter, defaultdict

from proctor.agents.choice import ChoiceAgent
from proctor.envs.household.tasks import TaskSpec, parse_task
from proctor.prm.ref import PRMRef
from proctor.prompts.render import prefix_at
from proctor.store import TrajectoryStore

BAD = ("take-wrong", "heat-unneeded", "cool-unneeded", "clean-unneeded")
#: the quickstart policy's prompt (`proctor.quickstart`)
POLICY_PROMPT = {"history": 2, "memory": True, "show_admissible": False, "system": ""}


def category(action: str, spec: TaskSpec) -> str:
    """The kind of an admissible action relative to the task (see module docstring)."""
    if action.startswith("take "):
        return "take-right" if action.split()[1] == spec.obj else "take-wrong"
    for verb in ("heat", "cool", "clean"):
        if action.startswith(verb + " "):
            return verb + ("-needed" if spec.kind == verb else "-unneeded")
    return action.split()[0]


def bad_below_other(scores: list[float], cats: list[str]) -> float | None:
    """P(score of a random bad action < score of a random other action) at one state (ties count half)."""
    bad = [s for s, c in zip(scores, cats, strict=True) if c in BAD]
    good = [s for s, c in zip(scores, cats, strict=True) if c not in BAD]
    if not bad or not good:
        return None
    return sum((g > b) + 0.5 * (g == b) for g in good for b in bad) / (len(good) * len(bad))


def right_over_wrong_take(scores: list[float], cats: list[str]) -> float | None:
    """P(score of a random right take > score of a random wrong take) at one state (ties count half)."""
    right = [s for s, c in zip(scores, cats, strict=True) if c == "take-right"]
    wrong = [s for s, c in zip(scores, cats, strict=True) if c == "take-wrong"]
    if not right or not wrong:
        return None
    return sum((r > w) + 0.5 * (r == w) for r in right for w in wrong) / (len(right) * len(wrong))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    which = ap.add_mutually_exclusive_group(required=True)
    which.add_argument("--prm", help="a PRM folder: its scores")
    which.add_argument("--policy", help="a policy folder: its log-likelihood of each action (choice agent)")
    ap.add_argument("--trajectories", required=True, help="a household trajectory store (e.g. an evaluation's)")
    ap.add_argument("--limit", type=int, default=None, help="first N trajectories")
    args = ap.parse_args()

    trajs = TrajectoryStore.open(args.trajectories).load()[: args.limit]
    prefixes, actions, cats = [], [], []
    for t in trajs:
        spec = parse_task(t.task)
        for i, step in enumerate(t.steps):
            admissible = step.info.get("admissible_actions")
            if admissible:
                prefixes.append(prefix_at(t, i))
                actions.append(list(admissible))
                cats.append([category(a, spec) for a in admissible])
    if not prefixes:
        raise SystemExit(f"{args.trajectories}: no step with admissible actions")
    if args.prm:
        scores = PRMRef(prm=args.prm).open().score_action_groups(prefixes, actions)
    else:
        agent = ChoiceAgent(args.policy, prompt=POLICY_PROMPT)
        scores = [[c.meta["choice_logprob"] for c in options] for i in range(0, len(prefixes), 32)
                  for options in agent.score(prefixes[i:i + 32])]
    by_cat: dict[str, list[float]] = defaultdict(list)
    argmax: Counter[str] = Counter()
    below, takes = [], []
    for sc, cs in zip(scores, cats, strict=True):
        for s, c in zip(sc, cs, strict=True):
            by_cat[c].append(s)
        argmax[cs[max(range(len(sc)), key=sc.__getitem__)]] += 1
        p = bad_below_other(sc, cs)
        if p is not None:
            below.append(p)
        r = right_over_wrong_take(sc, cs)
        if r is not None:
            takes.append(r)
    print(json.dumps({
        "scorer": args.prm or f"log-likelihood of {args.policy}", "trajectories": len(trajs), "states": len(prefixes),
        "mean_score": {c: {"n": len(v), "mean": round(statistics.mean(v), 4)} for c, v in sorted(by_cat.items())},
        "argmax": dict(argmax.most_common()),
        "bad_below_other": {"states": len(below), "mean": round(statistics.mean(below), 4) if below else None},
        "right_over_wrong_take": {"states": len(takes), "mean": round(statistics.mean(takes), 4) if takes else None},
    }, indent=2))


if __name__ == "__main__":
    main()

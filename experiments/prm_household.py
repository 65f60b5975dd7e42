"""PRM quality on `household`: does a PRM trained on MC-Q targets rank the better of two actions higher?

    python experiments/prm_household.py [--train-tasks 300] [--samples 4] [--epsilon 0.5] [--max-steps 600]

1. Roll out an SFT-free mixed policy on the train split: at every step the oracle expert with probability
   1 − ε, a uniformly random admissible action with probability ε (`MixtureAgent`), episodes capped at
   `--env-steps` steps so detours can cost the task.
2. MC-Q targets (docs/methods.md §1.1, AgentPRM): Q̃(s,a) = (mean γ^{T−1−t}·R̃ + 1)/2 over occurrences of the
   same (state, action) (`proctor.credit` method `mc-q`, γ = 0.95); train a PRM (tiny Llama built here,
   BCE on Q̃) with proctor's trainer.
3. Held-out test-split states: the states of the same policy's test rollouts. At each, the candidates are
   the expert's action and `--candidates − 1` random admissible ones; each candidate's MC-Q is estimated
   from `--completions` rollouts of the policy after taking it (fresh envs replaying the history), on the
   same [0, 1] scale. Every pair of candidates whose MC-Q differ by ≥ `--margin` is a test pair; the PRM
   ranks it right when it scores the better action strictly higher (`PRMScorer.score_actions`, the shared
   history run once).

Prints one JSON object.
"""

from __future__ import annotations

import argparse
import itertools
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from quality_common import Start, add_training_args, complete, run_in_workdir, train_on_examples

from proctor.agents.composite import MixtureAgent
from proctor.agents.experts import ExpertAgent
from proctor.prompts.render import PromptConfig, prefix_at
from proctor.agents.simple import RandomAgent
from proctor.credit.montecarlo import MCConfig, discounted_returns
from proctor.credit.outcome import scored, signed
from proctor.credit.registry import Sources, run_method
from proctor.envs.registry import EnvSpec
from proctor.models import build_tiny, load_tokenizer
from proctor.prm.data import from_trajectories
from proctor.prm.scoring import PRMScorer
from proctor.rollout import rollout
from proctor.trajectory import Trajectory

#: the PRM reads the task, the observations and the actions: no system turn, no admissible-action lists
PROMPT = PromptConfig(system="", show_admissible=False)
TARGET = "mc_q"


def policy(epsilon: float, seed: int) -> MixtureAgent:
    """Oracle expert with probability 1 − ε, a random admissible action with probability ε, per step."""
    return MixtureAgent([(ExpertAgent("oracle"), 1 - epsilon), (RandomAgent(seed=seed), epsilon)], seed=seed)


def mc_q_of_completions(comps: Sequence[Trajectory], gamma: float) -> dict[tuple[str, int], dict[str, float]]:
    """Per state (source trajectory id, step t) and candidate action (`meta["tag"]`), Q̃ = (mean_j γ^{T_j−1−t}·R̃_j + 1)/2 where t = prefix_len − 1 is
    the candidate's step and T_j the completion's length: the `mc-q` definition on fresh rollouts."""
    cfg = MCConfig(gamma=gamma)
    items, dropped = scored(comps, cfg)
    if dropped:
        raise RuntimeError(f"{dropped} completions ended with an env or agent error")
    sums: dict[tuple[str, int, str], list[float]] = {}
    for it in items:
        t = it.traj.meta["prefix_len"] - 1
        g = discounted_returns(signed(it.r), len(it.traj.steps), gamma, cfg.discount)[t]
        sums.setdefault((it.traj.meta["prefix_of"], t, it.traj.meta["tag"]), []).append(g)
    out: dict[tuple[str, int], dict[str, float]] = {}
    for (src, t, action), g in sums.items():
        out.setdefault((src, t), {})[action] = (sum(g) / len(g) + 1) / 2
    return out


def candidate_starts(test: Sequence[Trajectory], k: int, seed: int) -> list[Start]:
    """At every state of every test trajectory: the expert's action and k − 1 other admissible actions
    drawn at random (fewer when the state has fewer)."""
    rng = random.Random(seed)
    starts = []
    for traj in test:
        for t, step in enumerate(traj.steps):
            expert = step.info.get("expert_action")
            admissible = step.info.get("admissible_actions") or []
            if expert is None:
                raise KeyError(f"trajectory {traj.id} step {t}: no info['expert_action'] (need expert hints)")
            others = sorted(a for a in set(admissible) if a != expert)
            for a in [expert, *rng.sample(others, min(k - 1, len(others)))]:
                starts.append(Start(traj, (*traj.actions[:t], a), tag=a))
    return starts


def ranking(prm: Any, test: Sequence[Trajectory], q: dict[tuple[str, int], dict[str, float]],
            margin: float) -> dict[str, Any]:
    """Pairs of candidates at the same state with |ΔQ̃| ≥ margin; how often the PRM scores the better higher."""
    scorer = PRMScorer(prm, batch_size=16)
    right = ties = total = expert_better = 0
    states = 0
    for traj in test:
        for t in range(len(traj.steps)):
            cands = q.get((traj.id, t), {})
            pairs = [(a, b) if q_a > q_b else (b, a)
                     for (a, q_a), (b, q_b) in itertools.combinations(sorted(cands.items()), 2)
                     if abs(q_a - q_b) >= margin]
            if not pairs:
                continue
            states += 1
            actions = sorted(cands)
            score = dict(zip(actions, scorer.score_actions(prefix_at(traj, t), actions, PROMPT), strict=True))
            for better, worse in pairs:
                total += 1
                right += score[better] > score[worse]
                ties += score[better] == score[worse]
                expert_better += better == traj.steps[t].info["expert_action"]
    if not total:
        raise RuntimeError(f"no candidate pair differs by {margin} in MC-Q; use more test tasks")
    return {"pairs": total, "states": states, "accuracy": right / total, "ties": ties,
            "better_is_expert_fraction": expert_better / total}


def roll(spec: EnvSpec, agent: Any, split: str, tasks: int, samples: int, out: Path, seed: int,
         progress: bool) -> list[Trajectory]:
    ids = spec.make().task_ids(split)[:tasks]
    return rollout(spec, agent, ids, out / f"rollouts-{split}", split=split, samples_per_task=samples,
                   batch_size=64, seed=seed, progress=progress).load()


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    spec = EnvSpec("household", {"max_steps": args.env_steps, "expert_hints": True})
    base = args.backbone or build_tiny(work / f"tiny-{args.hidden}x{args.layers}", hidden_size=args.hidden,
                                       layers=args.layers, heads=4, vocab_size=3000, max_position_embeddings=2048)
    agent = policy(args.epsilon, args.seed)
    train = roll(spec, agent, "train", args.train_tasks, args.samples, work, args.seed, args.progress)
    records = run_method("mc-q", Sources(train), {"gamma": args.gamma}).records
    by_step = {(r.trajectory_id, r.step): r.target for r in records}
    for traj in train:
        for i, s in enumerate(traj.steps):
            s.targets[TARGET] = by_step[(traj.id, i)]
    test = roll(spec, policy(args.epsilon, args.seed + 1), "test", args.test_tasks, 1, work, args.seed + 1,
                args.progress)
    starts = candidate_starts(test, args.candidates, args.seed)
    comps = complete(spec, agent, starts, args.completions)
    q = mc_q_of_completions(comps, args.gamma)
    data_s = time.perf_counter() - start
    examples = from_trajectories(load_tokenizer(base), train, TARGET, PROMPT)
    prm, info = train_on_examples(examples, base, work / "prm", max_steps=args.max_steps, learning_rate=args.lr,
                                  batch_size=args.batch_size, seed=args.seed)
    targets = [s.targets[TARGET] for t in train for s in t.steps]
    return {
        "env": "household", "policy": f"oracle expert, random action with probability {args.epsilon}",
        "train": {"tasks": args.train_tasks, "trajectories": len(train), "steps": len(targets),
                  "success": sum(t.success for t in train) / len(train),
                  "mc_q_mean": sum(targets) / len(targets)},
        "test": {"tasks": args.test_tasks, "trajectories": len(test), "candidates": len(starts),
                 "completions": len(comps)},
        "margin": args.margin,
        "prm": {**ranking(prm, test, q, args.margin), **info},
        "data_seconds": round(data_s, 1),
        "seconds": round(time.perf_counter() - start, 1),
    }


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--train-tasks", type=int, default=300)
    p.add_argument("--samples", type=int, default=4, help="rollouts per train task")
    p.add_argument("--test-tasks", type=int, default=40)
    p.add_argument("--epsilon", type=float, default=0.5, help="probability of a random action per step")
    p.add_argument("--env-steps", type=int, default=16, help="episode step limit")
    p.add_argument("--gamma", type=float, default=0.95)
    p.add_argument("--candidates", type=int, default=3, help="actions compared per test state")
    p.add_argument("--completions", type=int, default=8, help="rollouts per candidate for its MC-Q")
    p.add_argument("--margin", type=float, default=0.2, help="min MC-Q difference (0..1 scale) of a test pair")
    add_training_args(p)
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    return run_in_workdir(run, parse(argv))


if __name__ == "__main__":
    main()

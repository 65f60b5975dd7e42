"""PRM quality on `household`: does a PRM trained on MC-Q targets rank the better of two actions higher?

    python experiments/prm_household.py [--train-tasks 300] [--samples 4] [--epsilon 0.5] [--max-steps 600]

1. Roll out a mixed policy on the train split (`run_rollout`, agent `epsilon`: the oracle expert, a uniformly
   random admissible action instead with probability ε), episodes capped at `--env-steps` steps so detours can
   cost the task.
2. MC-Q targets (`run_targets`, method `mc-q`, docs/methods.md §1.1): Q̃(s,a) = (mean γ^{T−1−t}·R̃ + 1)/2 over
   occurrences of the same (state, action); train a PRM with `train_prm` (BCE on Q̃) on a backbone: a tiny
   Llama built here, `--backbone`, or a causal LM first trained on the expert's demonstrations
   (`--backbone` pointing at an SFT checkpoint: the policy's, as AgentPRM initialises its PRM).
3. Held-out states: the states of the same policy's test-split rollouts. At each, the candidates are the
   expert's action and `--candidates − 1` random admissible ones; `--completions` rollouts of the policy after
   each (`run_rollout` with `start.candidates`) give its MC-Q on the same [0, 1] scale
   (`proctor.credit.candidates`). `proctor.prm.trajectory_eval` reports the PRM's pairwise ranking accuracy on
   candidate pairs whose MC-Q differ by ≥ `--margin`, with intervals, next to the "prefer the expert's action"
   baseline, plus its Brier score and step AUROC against the test rollouts' MC-Q and the spread of its scores.

Prints one JSON object. `proctor prm eval --model WORK/prm-DATA-INIT-HxL --trajectories WORK/targets-test/labelled
--target mc-q --candidates WORK/candidates` gives the same evaluation from the command line.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from quality_common import add_training_args, label, roll, run_in_workdir, train

from proctor.credit.montecarlo import MCConfig
from proctor.models import build_tiny
from proctor.prm.rendering import PRM_PROMPT
from proctor.prm.scoring import PRMScorer
from proctor.prm.trajectory_eval import evaluate_trajectories
from proctor.rl.sft import METRICS_FILE, SFTConfig, train_sft
from proctor.store import TrajectoryStore

TARGET = "mc-q"


def sft_backbone(base: str | Path, work: Path, env: dict[str, Any], args: argparse.Namespace) -> Path:
    """`base` fine-tuned as a causal LM on the oracle expert's train-split episodes (`train_sft`), rendered as
    the PRM reads them (`PRM_PROMPT`: whole history, no admissible lists), with the next-token loss on the
    observations too (`--sft-context-weight`): the PRM then starts from a model of the expert's actions."""
    out = work / "sft"
    if (out / METRICS_FILE).is_file():
        return out
    roll(work / "demos", **env, agent={"kind": "expert"}, split="train", tasks=args.sft_tasks, samples=1,
         seed=args.seed)
    with contextlib.redirect_stdout(sys.stderr):
        return train_sft(SFTConfig(model=str(base), data=work / "demos", prompt=PRM_PROMPT, examples="episodes",
                                   context_weight=args.sft_context_weight, steps=args.sft_steps,
                                   batch_size=args.batch_size, learning_rate=args.sft_lr, output_dir=out,
                                   seed=args.seed, progress=args.progress))


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    preset = {"preset": args.preset} if args.preset else {}
    env = {"env": "household", "env_kwargs": {"max_steps": args.env_steps, "expert_hints": True, **preset},
           "batch": 64, "progress": args.progress}
    policy = policy_agent(args)
    base = args.backbone or build_tiny(work / f"tiny-{args.hidden}x{args.layers}", hidden_size=args.hidden,
                                       layers=args.layers, heads=4, vocab_size=3000, max_position_embeddings=2048)
    if args.init == "sft":
        base = sft_backbone(base, work, env, args)
    train_trajs = roll(work / "rollouts-train", **env, agent=policy, split="train", tasks=args.train_tasks,
                       samples=args.samples, seed=args.seed)
    candidates = {"expert": True, "random": args.candidates - 1, "seed": args.seed}
    if args.train_data == "rollouts":
        train_data, train_summary = label("mc-q", work / "rollouts-train", work / "targets-train",
                                          params={"gamma": args.gamma})
    else:  # candidate completions from every train state: K rollouts per (state, candidate action)
        roll(work / "candidates-train", **env, agent=policy, seed=args.seed, split="train",
             start={"source": work / "rollouts-train", "prefix_lengths": "states", "per_source": args.per_source,
                    "completions": args.train_completions, "candidates": candidates})
        method = {"candidates": "mc-q"}.get(args.train_data, args.train_data)
        params = {"gamma": args.gamma, **({"margin": args.margin} if method == "candidate-pairs" else {})}
        train_data, train_summary = label(method, work / "candidates-train", work / f"targets-{args.train_data}",
                                          params=params, write_back=method == "mc-q")
    test_policy = {**policy, "seed": args.seed + 1}
    test_trajs = roll(work / "rollouts-test", **env, agent=test_policy, split="test", tasks=args.test_tasks,
                      samples=1, seed=args.seed + 1)
    test_data, _ = label("mc-q", work / "rollouts-test", work / "targets-test", params={"gamma": args.gamma})
    comps = roll(work / "candidates", **env, agent=policy, seed=args.seed,
                 start={"source": test_data, "prefix_lengths": "states", "per_source": args.per_source,
                        "completions": args.completions, "candidates": candidates})
    data_s = time.perf_counter() - start
    records = args.train_data in ("candidate-q", "candidate-pairs")
    prm, info = train(base, train_data, TARGET, work / f"prm-{args.train_data}-{args.init}-{args.hidden}x{args.layers}", args,
                      loss="bradley_terry" if args.train_data == "candidate-pairs" else "bce",
                      trajectories=work / "candidates-train" if records else None)
    report = evaluate_trajectories(PRMScorer(prm, batch_size=16), TrajectoryStore.open(test_data).load(),
                                   target=TARGET, completions=comps, margin=args.margin,
                                   mc=MCConfig(gamma=args.gamma), n_boot=args.bootstrap, seed=args.seed)
    return {
        "env": "household", "policy": str(args.policy) if args.policy else
        f"oracle expert, random admissible action with probability {args.epsilon}",
        "backbone": str(base), "init": args.init,
        "sft": sft_summary(base) if args.init == "sft" else None,
        "train": {"tasks": args.train_tasks, "rollouts": len(train_trajs), "data": args.train_data,
                  "records": train_summary.get("records"),
                  "success": sum(t.success for t in train_trajs) / len(train_trajs),
                  "mc_q": train_summary.get("label")},
        "test": {"tasks": args.test_tasks, "trajectories": len(test_trajs), "candidate_completions": len(comps)},
        "prm": info,
        "eval": report,
        "data_seconds": round(data_s, 1),
        "seconds": round(time.perf_counter() - start, 1),
    }


def policy_agent(args: argparse.Namespace) -> dict[str, Any]:
    """The rollout policy: `--policy` (an SFT checkpoint acting as a `choice` agent at temperature 1, with the
    prompt it was trained on, read from its `sft.json`), or the ε-mixed oracle expert."""
    if args.policy is None:
        return {"kind": "epsilon", "epsilon": args.epsilon, "seed": args.seed}
    trained = json.loads((args.policy / METRICS_FILE).read_text())["config"]
    return {"kind": "choice", "model": str(args.policy), "prompt": trained["prompt"], "temperature": 1.0,
            "seed": args.seed}


def sft_summary(folder: Path) -> dict[str, Any]:
    m = json.loads((Path(folder) / METRICS_FILE).read_text())
    return {k: m[k] for k in ("trajectories", "examples", "trained_tokens", "loss_first", "loss_last", "wall_s")}


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--train-tasks", type=int, default=300)
    p.add_argument("--samples", type=int, default=4, help="rollouts per train task")
    p.add_argument("--test-tasks", type=int, default=40)
    p.add_argument("--epsilon", type=float, default=0.5, help="probability of a random action per step")
    p.add_argument("--policy", type=Path, default=None, help="roll out this SFT checkpoint (a `choice` agent) "
                   "instead of the ε-mixed expert; `--backbone` the same folder initialises the PRM from it")
    p.add_argument("--preset", default=None, help="household preset (e.g. 'small', the SFT policies' env)")
    p.add_argument("--per-source", type=int, default=None,
                   help="candidate states per rollout (default: all), drawn at random")
    p.add_argument("--env-steps", type=int, default=16, help="episode step limit")
    p.add_argument("--gamma", type=float, default=0.95)
    p.add_argument("--candidates", type=int, default=3, help="actions compared per test state (expert + random)")
    p.add_argument("--completions", type=int, default=8, help="rollouts per candidate for its MC-Q")
    p.add_argument("--train-data", choices=("rollouts", "candidates", "candidate-q", "candidate-pairs"),
                   default="rollouts", help="PRM training data: mc-q on the train rollouts; or, from candidate "
                   "completions at their states, mc-q on every completion step (candidates), Q̃ of each "
                   "(state, candidate) only (candidate-q), or Bradley–Terry pairs of candidates (candidate-pairs)")
    p.add_argument("--train-completions", type=int, default=4, help="candidates data: completions per candidate")
    p.add_argument("--margin", type=float, default=0.2, help="min MC-Q difference (0..1 scale) of a test pair")
    p.add_argument("--init", choices=("scratch", "sft"), default="scratch",
                   help="PRM backbone: the tiny model as built, or first fine-tuned on expert demonstrations")
    p.add_argument("--sft-tasks", type=int, default=400, help="sft: oracle-expert episodes on train tasks")
    p.add_argument("--sft-steps", type=int, default=300)
    p.add_argument("--sft-lr", type=float, default=2e-3)
    p.add_argument("--sft-context-weight", type=float, default=0.3,
                   help="sft: next-token loss weight on observations (the agent's tokens weigh 1)")
    add_training_args(p)
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    return run_in_workdir(run, parse(argv))


if __name__ == "__main__":
    main()

"""Choose the quickstart's PRM recipe on valid tasks: retrain Q0 of a finished quickstart run with other settings
(π0, its rollouts' MC-Q labels and the anchor demonstrations kept), then evaluate per-step best-of-N(π0, Q) on the
valid split, paired with π0 there. The test tasks stay out of the choice.

    python experiments/prm_recipe_valid.py --run runs/quickstart --work runs/prm-recipe \
        --variant base \
        --variant 'anc8x750={"anchor_batch_size": 8, "steps": 750}' \
        --variant 'lr2e-3={"learning_rate": 0.002}'

`base` is the run's own Q0; `NAME=JSON` retrains it with JSON's fields over the run's PRM config (the fields of
`proctor.prm.likelihood.LikelihoodPRMConfig`). Prints one JSON object: per variant, the PRM's training seconds,
best-of-N's success on the valid tasks and its paired difference with π0 (bootstrap interval, won / lost,
McNemar p; `proctor.evaluation.compare.paired`). The work folder resumes: a finished PRM or evaluation is reused.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import torch

import proctor.search  # noqa: F401  (registers the best-of-n agent)
from proctor.evaluation import EvalConfig, run_eval
from proctor.evaluation.compare import paired
from proctor.evaluation.loading import load_run
from proctor.prm.likelihood import LIKELIHOOD_FILE, LikelihoodPRMConfig, train_likelihood_prm


def variant(spec: str) -> tuple[str, dict[str, Any] | None]:
    """`base` → ("base", None); `NAME=JSON` → (NAME, the JSON object of PRM config fields)."""
    if spec == "base":
        return spec, None
    name, sep, fields = spec.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"--variant {spec!r}: give base or NAME=JSON")
    try:
        data = json.loads(fields)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"--variant {name}: not JSON ({e})") from None
    if not isinstance(data, dict):
        raise argparse.ArgumentTypeError(f"--variant {name}: JSON must be an object of PRM config fields")
    return name, data


def prm_for(run: Path, manifest: dict[str, Any], name: str, fields: dict[str, Any] | None, work: Path
            ) -> tuple[Path, float | None]:
    """The run's Q0 (`fields` None) or Q0 retrained with `fields`, and its training seconds (None: the run's)."""
    if fields is None:
        return run / "iter-0" / "prm", None
    out = work / name / "prm"
    if (out / LIKELIHOOD_FILE).is_file():
        saved = json.loads((out / LIKELIHOOD_FILE).read_text())
        changed = sorted(k for k, v in fields.items() if saved["config"].get(k) != v)
        if changed:
            raise ValueError(f"{out}: a PRM trained with another {changed[0]} ({saved['config'].get(changed[0])!r}) "
                             f"is already there: name the variant differently or use another --work")
        return out, saved["wall_s"]
    config = {**manifest["stages"]["iter-0/prm"]["config"], **fields, "output_dir": str(out), "progress": False}
    return out, train_likelihood_prm(LikelihoodPRMConfig.model_validate(config))["wall_s"]


def evaluate(agent: dict[str, Any], name: str, out: Path, manifest: dict[str, Any], tasks: int) -> Path:
    """`run_eval` of `agent` on the first `tasks` valid tasks with the run's env and seed (reused when finished)."""
    base = manifest["stages"]["iter-0/eval/policy"]["config"]
    if (out / "summary.json").is_file():
        done = json.loads((out / "summary.json").read_text())["episodes"]
        if done != tasks:
            raise ValueError(f"{out}: holds an evaluation of {done} episodes, not {tasks} tasks: use another --work")
    else:
        run_eval(EvalConfig(env=base["env"], env_kwargs=base["env_kwargs"], agent=agent, name=name, out=out,
                            split="valid", tasks=tasks, batch=base["batch"], seed=base["seed"], progress=False))
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", type=Path, required=True, help="a finished household quickstart (or `proctor run`) folder")
    ap.add_argument("--work", type=Path, required=True, help="where the PRMs and evaluations go (resumes)")
    ap.add_argument("--variant", type=variant, action="append", required=True, help="base or NAME=JSON (repeat)")
    ap.add_argument("--tasks", type=int, default=200, help="valid tasks")
    ap.add_argument("--n", type=int, default=8, help="best-of-N's N")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = ap.parse_args(argv)
    if not (args.run / "manifest.json").is_file():
        ap.error(f"{args.run}: no manifest.json (not a quickstart or `proctor run` folder)")
    if args.threads:
        torch.set_num_threads(args.threads)
    manifest = json.loads((args.run / "manifest.json").read_text())
    missing = [k for k in ("iter-0/prm", "iter-0/eval/policy") if k not in manifest.get("stages", {})]
    if missing:
        ap.error(f"{args.run}/manifest.json: no finished stage {missing[0]} (run the quickstart to its end first)")
    if not (args.run / "iter-0" / "prm" / LIKELIHOOD_FILE).is_file():
        ap.error(f"{args.run}/iter-0/prm: not a likelihood PRM (no {LIKELIHOOD_FILE}); this retrains only those")
    policy = manifest["stages"]["iter-0/eval/policy"]["config"]["agent"]
    pi0 = load_run(evaluate(policy, "policy", args.work / "pi0-valid", manifest, args.tasks))
    result: dict[str, Any] = {"run": str(args.run), "tasks": args.tasks, "n": args.n,
                              "pi0_success": pi0.summary["success_rate"], "variants": {}}
    for name, fields in args.variant:
        prm, seconds = prm_for(args.run, manifest, name, fields, args.work)
        agent = {"kind": "best-of-n", "n": args.n, "prm": str(prm), "agent": policy}
        run = load_run(evaluate(agent, f"best-of-{args.n}", args.work / name / "bon-valid", manifest, args.tasks))
        result["variants"][name] = {"fields": fields, "prm_train_s": seconds,
                                    "success": run.summary["success_rate"], **paired(pi0, run)}
    print(json.dumps(result, indent=2, default=str))
    return result


if __name__ == "__main__":
    try:
        main()
    except ValueError as e:  # a work folder made for other settings, a bad PRM config field: one line
        sys.exit(f"prm_recipe_valid: {e}")

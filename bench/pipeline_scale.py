"""The loop at node scale, measured in one run on this machine:

- each training stage's wall time with the stage in this process vs launched in 2 processes (torchrun, gloo);
- evaluation scoring with Q_k loaded in-process vs served by the loop (`prm_serving: {engine: server}`).

    python bench/pipeline_scale.py --out runs/bench-scale [--tasks 40]

Runs the toy household loop (the tests' sizes, scaled by --tasks) three times: in-process, launched, served PRM.
Prints one JSON object: the stage seconds of each run and their ratios (launched / in-process: the launch
overhead on this machine; the same cores do the work either way).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from proctor.pipeline import PipelineConfig, run_pipeline

PROMPT = {"history": 2, "memory": True}


def config(out: Path, tasks: int, **sections: Any) -> dict[str, Any]:
    policy = {"kind": "choice", "model": "$policy", "temperature": 1.0, "prompt": PROMPT}
    return {
        "out": str(out), "seed": 0, "env": "household", "env_kwargs": {"preset": "small", "max_steps": 10},
        "model": {"tiny": {"hidden_size": 64, "layers": 2, "heads": 2, "vocab_size": 800}},
        "demos": {"agent": {"kind": "expert", "expert": "search"}, "tasks": 4 * tasks},
        "sft": {"steps": 60, "batch_size": 8, "prompt": PROMPT},
        "policy_agent": {"kind": "choice", "temperature": 1.0, "prompt": PROMPT}, "iterations": 1,
        "rollout": {"split": "train", "tasks": tasks, "samples": 2},
        "prm": {"steps": 40, "batch_size": 8},
        "improve": {"method": "bon-distill", "init": "$policy", "states_from": "$rollouts", "max_states": 4 * tasks,
                    "n": 4, "epochs": 1, "batch_size": 8},
        "evaluate": {"split": "test", "tasks": tasks, "entries": [
            {"name": "policy", "agent": policy},
            {"name": "best-of-4", "agent": {"kind": "best-of-n", "n": 4, "prm": "$prm", "agent": policy}}]},
        **sections}


def stage_seconds(run: Path) -> dict[str, float]:
    stages = json.loads((run / "manifest.json").read_text())["stages"]
    return {key: rec["seconds"] for key, rec in stages.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--tasks", type=int, default=40)
    args = ap.parse_args()
    runs = {"in_process": {}, "launched_2": {"launch": {"processes": 2}},
            "served_prm": {"prm_serving": {"engine": "server"}}}
    seconds, walls = {}, {}
    for name, sections in runs.items():
        started = time.perf_counter()
        run_pipeline(PipelineConfig.model_validate(config(args.out / name, args.tasks, **sections)))
        walls[name] = round(time.perf_counter() - started, 1)
        seconds[name] = stage_seconds(args.out / name)
    training = ["iter-0/sft", "iter-0/prm", "iter-0/improve"]
    scoring = [key for key in seconds["in_process"] if "/eval/" in key]
    ratio = {key: round(seconds["launched_2"][key] / seconds["in_process"][key], 2) for key in training}
    served = {key: round(seconds["served_prm"][key] / seconds["in_process"][key], 2) for key in scoring}
    print(json.dumps({"tasks": args.tasks, "wall_s": walls, "stage_s": seconds,
                      "launched_2_over_in_process": ratio, "served_prm_over_in_process": served}, indent=2))


if __name__ == "__main__":
    main()

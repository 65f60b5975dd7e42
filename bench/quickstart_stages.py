"""Benchmark: the quickstart's wall time by stage, against its 10-minute budget on 2 CPU cores.

Runs `proctor quickstart` (or reads a finished run directory with `--read`) and prints one JSON object: each
stage's seconds from the run's `manifest.json` and its share of the total, grouped (model + demonstrations,
SFT, rollouts + targets, PRM, evaluations, monitor, online DPO), the wall time from the manifest's creation to
its last stage, and that wall time's ratio to the 600 s budget.

    python bench/quickstart_stages.py --out runs/qs-bench [--seed 0] [--env household] [--threads 2]
    python bench/quickstart_stages.py --read runs/quickstart
"""

from __future__ import annotations

import argparse
import json
import platform
from datetime import datetime
from pathlib import Path

import torch

from proctor.quickstart import QuickstartConfig, run_quickstart

BUDGET_S = 600.0
GROUPS = (("setup", ("model", "demos")), ("sft", ("/sft",)), ("rollouts+targets", ("/rollouts", "/targets")),
          ("prm", ("/prm",)), ("evaluations", ("/eval/",)), ("monitor", ("/monitor",)), ("online dpo", ("/improve",)))


def group_of(stage: str) -> str:
    """The group a manifest stage name belongs to (`other` if none matches)."""
    for name, keys in GROUPS:
        if any(stage == k or k in stage for k in keys):
            return name
    return "other"


def stage_times(run: Path) -> dict:
    """Seconds per stage and per group, and the run's wall time, from `run/manifest.json`."""
    manifest = json.loads((run / "manifest.json").read_text())
    stages = {name: rec["seconds"] for name, rec in manifest["stages"].items()}
    total = sum(stages.values())
    groups: dict[str, float] = {}
    for name, s in stages.items():
        groups[group_of(name)] = groups.get(group_of(name), 0.0) + s
    finished = max(datetime.fromisoformat(rec["finished"]) for rec in manifest["stages"].values())
    wall = (finished - datetime.fromisoformat(manifest["created"])).total_seconds()
    return {
        "run": str(run), "stages_s": {k: round(v, 1) for k, v in sorted(stages.items())},
        "groups_s": {k: round(v, 1) for k, v in groups.items()},
        "groups_share": {k: round(v / total, 3) for k, v in groups.items()},
        "stages_total_s": round(total, 1), "wall_s": round(wall, 1), "budget_s": BUDGET_S,
        "wall_over_budget": round(wall / BUDGET_S, 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, help="run the quickstart into this (new) directory")
    ap.add_argument("--read", type=Path, help="report a finished run directory instead of running one")
    ap.add_argument("--env", default="household")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = ap.parse_args()
    if (args.out is None) == (args.read is None):
        ap.error("give exactly one of --out (run) and --read (a finished run)")
    if args.threads:
        torch.set_num_threads(args.threads)
    run = args.read
    if run is not None and not (run / "manifest.json").is_file():
        ap.error(f"{run}: no manifest.json (not a quickstart or `proctor run` directory)")
    if run is None:
        if args.out.exists() and any(args.out.iterdir()):
            ap.error(f"{args.out} is not empty: a resumed run would not time its finished stages")
        run_quickstart(QuickstartConfig(env=args.env, out=args.out, seed=args.seed))
        run = args.out
    print(json.dumps({**stage_times(run), "torch_threads": torch.get_num_threads(),
                      "machine": platform.machine(), "python": platform.python_version()}, indent=2))


if __name__ == "__main__":
    main()

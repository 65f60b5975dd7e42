"""What every online trainer writes per iteration and at the end: stage times, `iter-k/metrics.json`, and
`summary.json` (the config, the last policy, every iteration's metrics)."""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path
from typing import Any

from proctor.training.distributed import barrier, is_main_process


def stage_seconds(clock: dict[str, float]) -> dict[str, float]:
    """Seconds per stage from monotonic marks in stage order ({"start": t0, "rollout": t1, "train": t2, ...}):
    each stage's time is its mark minus the previous mark."""
    names = list(clock)
    return {b: round(clock[b] - clock[a], 3) for a, b in pairwise(names)}


def record_iteration(folder: Path, metrics: dict[str, Any], history: list[dict[str, Any]]) -> None:
    """Append the metrics to `history`, and write `folder/metrics.json` from the main process."""
    if is_main_process():
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "metrics.json").write_text(json.dumps(metrics, indent=2))
    history.append(metrics)


def write_summary(cfg: Any, policy_dir: str | Path, history: list[dict[str, Any]]) -> None:
    """Write `cfg.output_dir/summary.json` (the config, the last policy folder, every iteration's metrics) from the
    main process; every process returns once it is written."""
    if is_main_process():
        (cfg.output_dir / "summary.json").write_text(json.dumps(
            {"config": cfg.model_dump(mode="json", serialize_as_any=True), "policy_dir": str(policy_dir),
             "iterations": history}, indent=2))
    barrier()

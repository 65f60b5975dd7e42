"""Read evaluation outputs back: `summary.json` (one policy) and `sweep.json` (one policy over N), with the
trajectories each summary points to. Errors name the file and the field."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from proctor.evaluation.summary import SUMMARY_KIND
from proctor.store import TrajectoryStore
from proctor.trajectory import Trajectory

SWEEP_KIND = "proctor.eval_sweep"


@dataclass
class EvalRun:
    """One evaluated policy: its folder, its summary and its trajectories (one per (task, sample))."""

    dir: Path
    summary: dict[str, Any]
    trajectories: list[Trajectory]

    @property
    def policy(self) -> str:
        return str(self.summary.get("policy") or self.dir.name)

    def outcomes(self) -> dict[tuple[str, int], bool]:
        """Success by (task, sample); missing episodes (listed in the summary) count as failures."""
        out = {t.key: t.success for t in self.trajectories}
        for m in self.summary.get("missing", []):
            out.setdefault((m["task_id"], int(m["sample"])), False)
        return out


def read_json(path: Path, kind: str | None = None) -> dict[str, Any]:
    """A JSON object from `path`; with `kind`, its field `kind` must match."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: not readable JSON ({e})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(data).__name__}")  # noqa: TRY004 - bad file
    if kind is not None and data.get("kind") != kind:
        raise ValueError(f"{path}: field 'kind' is {data.get('kind')!r}, expected {kind!r}")
    return data


def is_eval_summary(path: Path) -> bool:
    try:
        return read_json(path).get("kind") == SUMMARY_KIND
    except ValueError:
        return False


def load_run(folder: Path) -> EvalRun:
    """The evaluation in `folder` (its `summary.json` and the store it names)."""
    path = folder / "summary.json"
    if not path.is_file():
        raise ValueError(f"{folder}: no summary.json (not a `proctor eval` output folder)")
    summary = read_json(path, SUMMARY_KIND)
    store = summary.get("store")
    if not isinstance(store, str):
        raise ValueError(f"{path}: field 'store' is {store!r}, expected a store folder name")  # noqa: TRY004
    if not (folder / store / "manifest.json").is_file():
        raise ValueError(f"{path}: field 'store' names {folder / store}, which is not a trajectory store")
    trajs = TrajectoryStore.open(folder / store).load()  # one record per (task, sample), retries first
    ids, samples = summary.get("task_ids"), summary.get("samples")
    if isinstance(ids, list) and isinstance(samples, int):  # only this evaluation's (task, sample) pairs
        wanted = {(t, k) for t in ids for k in range(samples)}
        trajs = [t for t in trajs if t.key in wanted]
    return EvalRun(folder, summary, sorted(trajs, key=lambda t: t.key))


def load_runs(folder: Path) -> list[EvalRun]:
    """The evaluations a folder holds: itself (`summary.json`), or each N of a sweep (`sweep.json`)."""
    if (folder / "summary.json").is_file():
        return [load_run(folder)]
    if (folder / "sweep.json").is_file():
        sweep = read_json(folder / "sweep.json", SWEEP_KIND)
        rows = sweep.get("rows")
        if not isinstance(rows, list) or not rows:
            raise ValueError(f"{folder / 'sweep.json'}: field 'rows' is empty or not a list")
        return [load_run(folder / str(r["dir"])) for r in rows]
    raise ValueError(f"{folder}: neither summary.json nor sweep.json (not a `proctor eval` output folder)")

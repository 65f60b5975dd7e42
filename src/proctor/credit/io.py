"""Thin adapters: read trajectories (TrajectoryStore, Parquet, saved HF dataset), write records as Parquet,
and write step labels back onto trajectories (`Step.targets`).

Output directory layout of `write_records`:
    OUT/targets.parquet   one row per record (`Record.to_row()`; `params` is the method's config as JSON)
    OUT/summary.json      method, parameters, dropped count and `summarize(records)`
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from proctor.credit.records import LabelledStep, Record
from proctor.credit.summary import summarize
from proctor.store import TrajectoryStore
from proctor.trajectory import Trajectory
from proctor.trajectory_export import dataset_to_trajectories, read_parquet

TARGETS_FILE = "targets.parquet"
SUMMARY_FILE = "summary.json"


def load_trajectories(path: str | os.PathLike) -> list[Trajectory]:
    """Trajectories from a TrajectoryStore directory, a Parquet file, or an HF dataset saved to disk."""
    path = Path(path)
    if (path / "manifest.json").exists():
        return TrajectoryStore.open(path).load()
    if path.is_file() and path.suffix == ".parquet":
        return read_parquet(path)
    if (path / "dataset_info.json").exists() or (path / "state.json").exists():
        import datasets

        return dataset_to_trajectories(datasets.load_from_disk(str(path)), source=str(path))
    raise FileNotFoundError(f"{path}: not a trajectory store (no manifest.json), a .parquet file, "
                            "or a saved HF dataset")


def records_to_dataset(records: Sequence[Record]):
    """Records (all of one kind) as an HF `datasets.Dataset`."""
    import datasets

    if not records:
        raise ValueError("no records to write")
    kinds = {type(r) for r in records}
    if len(kinds) > 1:
        raise ValueError(f"records of several kinds cannot share a table: {sorted(k.__name__ for k in kinds)}")
    return datasets.Dataset.from_list([r.to_row() for r in records])


def _empty_table(record_type: type):
    """A zero-row Arrow table with the columns of `record_type`'s rows (`Record.to_row()`)."""
    import dataclasses

    import pyarrow as pa

    def arrow_type(annotation: str):
        if annotation.startswith("dict"):
            return pa.map_(pa.string(), pa.float64())
        return {"int": pa.int64(), "float": pa.float64(), "bool": pa.bool_()}.get(
            annotation.split("|")[0].strip(), pa.string())

    columns = {f.name: pa.array([], arrow_type(str(f.type))) for f in dataclasses.fields(record_type)}
    columns["kind"] = pa.array([], pa.string())
    return pa.table(columns)


def write_records(records: Sequence[Record], out_dir: str | os.PathLike, info: dict[str, Any],
                  record_type: type = LabelledStep) -> dict[str, Any]:
    """Write OUT/targets.parquet and OUT/summary.json; returns the summary. No records is a result too: the
    table then has `record_type`'s columns and no rows."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if records:
        records_to_dataset(records).to_parquet(str(out / TARGETS_FILE))
    else:
        import pyarrow.parquet as pq

        pq.write_table(_empty_table(record_type), out / TARGETS_FILE)
    summary = {**info, **summarize(records)}
    (out / SUMMARY_FILE).write_text(json.dumps(summary, indent=2, sort_keys=True))
    return summary


def write_back(trajs: Sequence[Trajectory], records: Sequence[LabelledStep]) -> list[Trajectory]:
    """New trajectories with `Step.targets[method] = target` and `Step.targets[f"{method}:{name}"]` for
    each extra quantity; trajectories without records are returned unchanged."""
    by_step: dict[tuple[str, int], LabelledStep] = {}
    for r in records:
        if not isinstance(r, LabelledStep):
            raise TypeError(f"only step records can be written onto steps, got {type(r).__name__}")
        by_step[(r.trajectory_id, r.step)] = r
    out = []
    for t in trajs:
        steps = []
        for i, s in enumerate(t.steps):
            r = by_step.get((t.id, i))
            if r is None:
                steps.append(s)
                continue
            targets = {**s.targets, r.method: r.target, **{f"{r.method}:{k}": v for k, v in r.extra.items()}}
            steps.append(s.model_copy(update={"targets": targets}))
        out.append(t.model_copy(update={"steps": steps}))
    return out

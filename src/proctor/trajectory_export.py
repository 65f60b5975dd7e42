"""Trajectories to and from Hugging Face `datasets` / Parquet: one row per trajectory, losslessly invertible."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import Any

from pydantic import ValidationError

from proctor.trajectory import StoreError, Trajectory, describe_validation_error

# Nested free-form dicts are stored as JSON text so that Parquet's fixed schema never drops or
# coerces a key; everything else keeps its native column type.
_JSON_STEP_FIELDS = ("info", "targets", "scores")
_JSON_TRAJ_FIELDS = ("timings", "task_meta", "meta")


def _flatten(traj: Trajectory) -> dict[str, Any]:
    row = traj.model_dump()
    for k in _JSON_TRAJ_FIELDS:
        row[k] = json.dumps(row[k], sort_keys=True)
    for step in row["steps"]:
        for k in _JSON_STEP_FIELDS:
            step[k] = json.dumps(step[k], sort_keys=True)
    return row


def _unflatten(row: dict[str, Any], where: str) -> Trajectory:
    row = dict(row)
    for k in _JSON_TRAJ_FIELDS:
        row[k] = json.loads(row.get(k) or "{}")
    steps = []
    for step in row["steps"]:
        step = dict(step)
        for k in _JSON_STEP_FIELDS:
            step[k] = json.loads(step[k])
        steps.append(step)
    row["steps"] = steps
    try:
        return Trajectory.model_validate(row)
    except ValidationError as e:
        raise StoreError(f"{where}: {describe_validation_error(e)}") from None


def trajectories_to_dataset(trajs: Iterable[Trajectory]):
    """Trajectories → `datasets.Dataset`, one row per trajectory, losslessly invertible."""
    import datasets

    rows = [_flatten(t) for t in trajs]
    if not rows:
        raise ValueError("no trajectories to export")
    return datasets.Dataset.from_list(rows)


def dataset_to_trajectories(ds, source: str = "dataset") -> list[Trajectory]:
    """Inverse of `trajectories_to_dataset`; errors name the source and row."""
    return [_unflatten(row, f"{source} row {i}") for i, row in enumerate(ds)]


def read_parquet(path: str | os.PathLike) -> list[Trajectory]:
    import datasets

    return dataset_to_trajectories(datasets.Dataset.from_parquet(str(path)), source=str(path))

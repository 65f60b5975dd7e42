"""The one trajectory schema every stage reads and writes, and its on-disk store.

`Step.observation` is what the agent saw *before* it chose `Step.action` (the state s_t); the env's reply
to the action is the next step's observation, and the reply to the last action is
`Trajectory.final_observation`. `Step.reward` is the reward the env returned for that action.

`TrajectoryStore` is a directory of append-only JSONL shards plus a small `manifest.json`:

    store/
      manifest.json              format, version, creation time, free-form metadata
      shards/part-<writer>.jsonl one JSON trajectory per line; each writer appends to its own shard

Each record is written with a single `write` of one complete line followed by flush + fsync, so a process
killed at any moment leaves every completed trajectory readable and loses at most the line in flight
(a trailing line without its newline, which is repaired away with a warning when the store is reopened).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

log = logging.getLogger(__name__)

Termination = Literal["success", "failure", "max_steps", "env_error", "agent_error"]
TERMINATIONS: tuple[str, ...] = ("success", "failure", "max_steps", "env_error", "agent_error")

STORE_FORMAT = "proctor.trajectory_store"
STORE_VERSION = 1


class Step(BaseModel):
    """One agent turn: the state it saw, the action it took, and what the env said about it."""

    model_config = ConfigDict(extra="forbid")

    observation: str
    action: str
    reason: str | None = None
    raw_output: str | None = Field(default=None, description="the model's full text for this turn")
    logprobs: list[float] | None = Field(default=None, description="token log-probs of raw_output")
    reward: float = 0.0
    done: bool = False
    info: dict[str, Any] = Field(default_factory=dict)
    targets: dict[str, float] = Field(default_factory=dict, description="per-step targets by method")
    scores: dict[str, float] = Field(default_factory=dict, description="per-step scores by model")

    @property
    def valid(self) -> bool:
        """Whether the env accepted the action (`info['valid']`, True when the env does not say)."""
        return bool(self.info.get("valid", True))


class Trajectory(BaseModel):
    """One episode of one agent on one task."""

    model_config = ConfigDict(extra="forbid")

    id: str
    env: str
    task_id: str
    sample: int = Field(ge=0, description="index of this rollout among the K for its task")
    task: str
    split: str
    seed: int
    agent: str
    steps: list[Step] = Field(default_factory=list)
    final_observation: str = ""
    success: bool
    score: float
    termination: Termination
    error: str | None = None
    timings: dict[str, float] = Field(default_factory=dict)
    meta: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _consistent(self) -> Trajectory:
        if self.termination == "success" and not self.success:
            raise ValueError("termination is 'success' but success is False")
        if self.success and self.termination != "success":
            raise ValueError(f"success is True but termination is {self.termination!r}")
        if self.termination in ("env_error", "agent_error") and not self.error:
            raise ValueError(f"termination {self.termination!r} needs an error message")
        return self

    @property
    def key(self) -> tuple[str, int]:
        """The (task_id, sample) pair that identifies this rollout in a store."""
        return (self.task_id, self.sample)

    @property
    def actions(self) -> list[str]:
        return [s.action for s in self.steps]

    @property
    def total_reward(self) -> float:
        return sum(s.reward for s in self.steps)

    @staticmethod
    def new_id() -> str:
        return uuid.uuid4().hex


class StoreError(ValueError):
    """A store file that cannot be read as trajectories; the message names file, line and field."""


def _describe_validation_error(err: ValidationError) -> str:
    parts = []
    for e in err.errors():
        loc = ".".join(str(x) for x in e["loc"]) or "<record>"
        parts.append(f"field '{loc}': {e['msg']}")
    return "; ".join(parts)


def parse_trajectory_line(line: str, path: Path | str, lineno: int) -> Trajectory:
    """Parse one JSONL line; errors name the file, the 1-based line number and the field."""
    try:
        data = json.loads(line)
    except json.JSONDecodeError as e:
        raise StoreError(f"{path}:{lineno}: not valid JSON ({e.msg} at column {e.colno})") from None
    if not isinstance(data, dict):
        raise StoreError(f"{path}:{lineno}: expected a JSON object, got {type(data).__name__}")
    try:
        return Trajectory.model_validate(data)
    except ValidationError as e:
        raise StoreError(f"{path}:{lineno}: {_describe_validation_error(e)}") from None


class TrajectoryStore:
    """Append-only, sharded, resumable trajectory storage (see module docstring)."""

    def __init__(self, root: str | os.PathLike, meta: dict[str, Any] | None = None, create: bool = True):
        self.root = Path(root)
        self.shard_dir = self.root / "shards"
        self.manifest_path = self.root / "manifest.json"
        if self.manifest_path.exists():
            self.manifest = self._read_manifest()
            if meta:
                self.manifest.setdefault("meta", {}).update(meta)
                self._write_manifest()
        elif create:
            self.shard_dir.mkdir(parents=True, exist_ok=True)
            self.manifest = {
                "format": STORE_FORMAT,
                "version": STORE_VERSION,
                "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "meta": dict(meta or {}),
            }
            self._write_manifest()
        else:
            raise FileNotFoundError(f"no trajectory store at {self.root} (missing {self.manifest_path.name})")
        self._writer_fd: int | None = None
        self._writer_path: Path | None = None
        self._repair_torn_tails()

    @classmethod
    def open(cls, root: str | os.PathLike) -> TrajectoryStore:
        """Open an existing store (error if there is none)."""
        return cls(root, create=False)

    # -- manifest -------------------------------------------------------------------------------
    def _read_manifest(self) -> dict[str, Any]:
        try:
            manifest = json.loads(self.manifest_path.read_text())
        except json.JSONDecodeError as e:
            raise StoreError(f"{self.manifest_path}: not valid JSON ({e.msg})") from None
        if manifest.get("format") != STORE_FORMAT:
            raise StoreError(f"{self.manifest_path}: field 'format' is {manifest.get('format')!r}, "
                             f"expected {STORE_FORMAT!r}")
        if manifest.get("version") != STORE_VERSION:
            raise StoreError(f"{self.manifest_path}: field 'version' is {manifest.get('version')!r}, "
                             f"this proctor reads version {STORE_VERSION}")
        return manifest

    def _write_manifest(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.manifest_path.with_suffix(f".tmp-{os.getpid()}")
        tmp.write_text(json.dumps(self.manifest, indent=2, sort_keys=True))
        os.replace(tmp, self.manifest_path)

    @property
    def meta(self) -> dict[str, Any]:
        return self.manifest.get("meta", {})

    # -- writing --------------------------------------------------------------------------------
    def shards(self) -> list[Path]:
        return sorted(self.shard_dir.glob("*.jsonl")) if self.shard_dir.exists() else []

    def _repair_torn_tails(self) -> None:
        """Cut a trailing partial line (a record whose write was interrupted) from every shard."""
        for path in self.shards():
            size = path.stat().st_size
            if size == 0:
                continue
            with open(path, "rb+") as f:
                f.seek(-1, os.SEEK_END)
                if f.read(1) == b"\n":
                    continue
                f.seek(0)
                data = f.read()
                keep = data.rfind(b"\n") + 1
                f.truncate(keep)
            log.warning("%s: dropped %d bytes of a record whose write was interrupted", path, size - keep)

    def _open_writer(self) -> int:
        if self._writer_fd is None:
            self.shard_dir.mkdir(parents=True, exist_ok=True)
            name = f"part-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}.jsonl"
            self._writer_path = self.shard_dir / name
            self._writer_fd = os.open(self._writer_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        return self._writer_fd

    def append(self, traj: Trajectory) -> None:
        """Write one trajectory as one line, durably (one write, then fsync)."""
        line = (traj.model_dump_json() + "\n").encode()
        fd = self._open_writer()
        written = os.write(fd, line)
        while written < len(line):
            written += os.write(fd, line[written:])
        os.fsync(fd)

    def extend(self, trajs: Iterable[Trajectory]) -> None:
        for t in trajs:
            self.append(t)

    def close(self) -> None:
        if self._writer_fd is not None:
            os.close(self._writer_fd)
            self._writer_fd = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- reading --------------------------------------------------------------------------------
    def __iter__(self) -> Iterator[Trajectory]:
        for path in self.shards():
            with open(path, encoding="utf-8") as f:
                for lineno, line in enumerate(f, start=1):
                    if not line.strip():
                        continue
                    if not line.endswith("\n"):
                        log.warning("%s:%d: skipping a record still being written", path, lineno)
                        continue
                    yield parse_trajectory_line(line, path, lineno)

    def load(self) -> list[Trajectory]:
        return list(self)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def done_keys(self) -> set[tuple[str, int]]:
        """The (task_id, sample) pairs already stored: what a resumed run must skip."""
        return {t.key for t in self}

    # -- export ---------------------------------------------------------------------------------
    def to_dataset(self):
        """All trajectories as an HF `datasets.Dataset` (see `trajectories_to_dataset`)."""
        return trajectories_to_dataset(self.load())

    def to_parquet(self, path: str | os.PathLike) -> Path:
        path = Path(path)
        self.to_dataset().to_parquet(str(path))
        return path


# Nested free-form dicts are stored as JSON text so that Parquet's fixed schema never drops or
# coerces a key; everything else keeps its native column type.
_JSON_STEP_FIELDS = ("info", "targets", "scores")
_JSON_TRAJ_FIELDS = ("timings", "meta")


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
        row[k] = json.loads(row[k])
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
        raise StoreError(f"{where}: {_describe_validation_error(e)}") from None


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

"""The trajectory store: a locked, append-only directory of JSONL shards that every stage writes and reads.

`TrajectoryStore` is a directory of append-only JSONL shards plus a small `manifest.json`:

    store/
      manifest.json              format, version, creation time (ISO 8601, microseconds), free-form metadata
      shards/part-<writer>.jsonl one JSON trajectory per line; each writer appends to its own shard
      write.lock                 held (flock) by the one process writing; holds its pid

Each record is written with a single `write` of one complete line followed by fsync, so a process killed
at any moment leaves every completed trajectory readable and loses at most the line in flight (a trailing
line without its newline, which readers skip). Readers never write: a store can be read while a run
appends to it. One process writes at a time (the lock); writes are idempotent by trajectory id, and readers
keep one record per id and per (task_id, sample), saying how many they dropped (`deduplicate`).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Self

from proctor.outputs import as_json, claim_output
from proctor.trajectory import StoreError, Trajectory, parse_trajectory_line
from proctor.trajectory_export import trajectories_to_dataset

log = logging.getLogger(__name__)

STORE_FORMAT = "proctor.trajectory_store"
STORE_VERSION = 1


class StoreLockedError(StoreError):
    """Another process holds the store's write lock; the message names its pid."""


#: terminations whose record a later record of the same (task_id, sample) supersedes (a retried episode)
RETRYABLE: tuple[str, ...] = ("env_error", "agent_error")


def deduplicate(trajs: Iterable[Trajectory]) -> tuple[list[Trajectory], dict[str, int]]:
    """One record per trajectory id and per (task_id, sample), in their first order, and what was dropped.

    A repeated id is dropped (a second write of the same trajectory). Of records sharing a (task_id, sample),
    a successful or failed episode is kept over one that ended in `env_error`/`agent_error` (a retry
    supersedes it; the latest such error is kept when all failed), else the first. Counts: `same_id`,
    `same_key` (two finished episodes for one pair: two runs wrote into one store), `superseded`.
    """
    seen_ids: set[str] = set()
    kept: dict[tuple[str, int], int] = {}
    out: list[Trajectory | None] = []
    counts = {"same_id": 0, "same_key": 0, "superseded": 0}
    for t in trajs:
        if t.id in seen_ids:
            counts["same_id"] += 1
            continue
        seen_ids.add(t.id)
        at = kept.get(t.key)
        if at is None:
            kept[t.key] = len(out)
            out.append(t)
            continue
        old = out[at]
        if old.termination in RETRYABLE:
            counts["superseded"] += 1
            out[at] = None
            kept[t.key] = len(out)
            out.append(t)
        elif t.termination in RETRYABLE:
            counts["superseded"] += 1
        else:
            counts["same_key"] += 1
    return [t for t in out if t is not None], counts


# -- the write lock: one writing process per store ----------------------------------------------------------
LOCK_FILE = "write.lock"
_HELD_LOCKS: dict[str, list[int]] = {}  # lock path -> [fd, holders in this process]


def _forget_inherited_locks() -> None:
    """In a forked child: close the inherited lock fds (the parent keeps its lock; the child holds none)."""
    for fd, _ in _HELD_LOCKS.values():
        try:
            os.close(fd)
        except OSError:
            pass
    _HELD_LOCKS.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_inherited_locks)


def _lock_holder(fd: int) -> str:
    try:
        info = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError):
        info = {}
    if not isinstance(info, dict) or "pid" not in info:
        return "another process"
    return f"pid {info['pid']} on {info.get('host', '?')} (since {info.get('since', '?')})"


def acquire_store_lock(root: Path) -> str:
    """Take the exclusive write lock of the store at `root` (`fcntl.flock` on `root/write.lock`, non-blocking,
    shared by the stores of this process); returns the key to release it with. The kernel releases it when
    the process dies, so a killed run never leaves the store locked."""
    import fcntl

    path = str((root / LOCK_FILE).resolve())
    held = _HELD_LOCKS.get(path)
    if held is not None:
        held[1] += 1
        return path
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _lock_holder(fd)
        os.close(fd)
        raise StoreLockedError(
            f"{root}: the store is being written by {holder}; wait for that run to end, or write to another "
            f"directory (two writers would store the same (task, sample) twice)") from None
    except BaseException:
        os.close(fd)
        raise
    info = json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                       "since": time.strftime("%Y-%m-%dT%H:%M:%S%z")}).encode()
    os.ftruncate(fd, 0)
    os.pwrite(fd, info, 0)
    _HELD_LOCKS[path] = [fd, 1]
    return path


def release_store_lock(key: str) -> None:
    import fcntl

    held = _HELD_LOCKS.get(key)
    if held is None:
        return
    held[1] -= 1
    if held[1] == 0:
        del _HELD_LOCKS[key]
        fcntl.flock(held[0], fcntl.LOCK_UN)
        os.close(held[0])


def _scan_ids(shards: Iterable[Path]) -> set[str]:
    """The trajectory ids on the complete lines of `shards` (unreadable lines are left to the readers)."""
    ids: set[str] = set()
    for path in shards:
        with open(path, "rb") as f:
            for raw in f:
                if not raw.endswith(b"\n"):
                    continue
                try:
                    record = json.loads(raw)
                except ValueError:
                    continue
                if isinstance(record, dict) and isinstance(record.get("id"), str):
                    ids.add(record["id"])
    return ids


class TrajectoryStore:
    """Append-only, sharded, resumable trajectory storage (see module docstring).

    Reading (`TrajectoryStore.open(root)`, iteration, `load`) never writes. Writing (`append`, creating a
    store, or giving `meta` for an existing one) first takes the store's exclusive write lock
    (`StoreLockedError` names the process that holds it); `close()` releases it.
    """

    def __init__(self, root: str | os.PathLike, meta: dict[str, Any] | None = None, create: bool = True):
        self.root = Path(root)
        self.shard_dir = self.root / "shards"
        self.manifest_path = self.root / "manifest.json"
        self._lock_key: str | None = None
        self._writer_fd: int | None = None
        self._writer_path: Path | None = None
        self._stored_ids: set[str] | None = None
        self.skipped_writes = 0
        if self.manifest_path.exists():
            self.manifest = self._read_manifest()
            if meta:
                self.lock()
                self.manifest = self._read_manifest()
                self.manifest.setdefault("meta", {}).update(meta)
                self._write_manifest()
        elif create:
            self.root.mkdir(parents=True, exist_ok=True)
            self.lock()
            if self.manifest_path.exists():  # another writer created it meanwhile
                self.manifest = self._read_manifest()
                self.manifest.setdefault("meta", {}).update(meta or {})
            else:
                self.manifest = {
                    "format": STORE_FORMAT,
                    "version": STORE_VERSION,
                    "created": datetime.now().astimezone().isoformat(timespec="microseconds"),
                    "meta": dict(meta or {}),
                }
            self.shard_dir.mkdir(parents=True, exist_ok=True)
            self._write_manifest()
        else:
            raise FileNotFoundError(f"no trajectory store at {self.root} (missing {self.manifest_path.name})")

    @classmethod
    def open(cls, root: str | os.PathLike) -> TrajectoryStore:
        """Open an existing store (error if there is none); reading it writes nothing."""
        return cls(root, create=False)

    # -- manifest -------------------------------------------------------------------------------
    def _read_manifest(self) -> dict[str, Any]:
        try:
            manifest = json.loads(self.manifest_path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise StoreError(f"{self.manifest_path}: not valid JSON ({e})") from None
        if not isinstance(manifest, dict) or manifest.get("format") != STORE_FORMAT:
            found = manifest.get("format") if isinstance(manifest, dict) else manifest
            raise StoreError(f"{self.manifest_path}: field 'format' is {found!r}, expected {STORE_FORMAT!r}")
        if manifest.get("version") != STORE_VERSION:
            raise StoreError(f"{self.manifest_path}: field 'version' is {manifest.get('version')!r}, "
                             f"this proctor reads version {STORE_VERSION}")
        return manifest

    def _write_manifest(self) -> None:
        tmp = self.manifest_path.with_suffix(f".tmp-{os.getpid()}")
        tmp.write_text(json.dumps(self.manifest, indent=2, sort_keys=True))
        os.replace(tmp, self.manifest_path)

    @property
    def meta(self) -> dict[str, Any]:
        return self.manifest.get("meta", {})

    # -- writing --------------------------------------------------------------------------------
    def shards(self) -> list[Path]:
        return sorted(self.shard_dir.glob("*.jsonl")) if self.shard_dir.exists() else []

    @property
    def locked(self) -> bool:
        """Whether this store object holds the write lock."""
        return self._lock_key is not None

    def lock(self) -> Self:
        """Take the exclusive write lock (idempotent); take it before reading what a resumed run must skip."""
        if self._lock_key is None:
            self._lock_key = acquire_store_lock(self.root)
        return self

    def _open_writer(self) -> int:
        if self._writer_fd is None:
            self.shard_dir.mkdir(parents=True, exist_ok=True)
            # the name starts with the creation time, so shards sort in the order they were started
            name = (f"part-{time.time_ns():020d}-{socket.gethostname()}-{os.getpid()}-"
                    f"{uuid.uuid4().hex[:8]}.jsonl")
            self._writer_path = self.shard_dir / name
            self._writer_fd = os.open(self._writer_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        return self._writer_fd

    def append(self, traj: Trajectory) -> bool:
        """Write one trajectory as one line, durably (one write, then fsync); False when a trajectory with
        its id is already stored (writes are idempotent by id). A write cut short by an error is cut back
        from this writer's own shard (no other process ever repairs a shard)."""
        self.lock()
        if self._stored_ids is None:
            self._stored_ids = _scan_ids(self.shards())
        if traj.id in self._stored_ids:
            self.skipped_writes += 1
            return False
        line = (traj.model_dump_json() + "\n").encode()
        fd = self._open_writer()
        start = os.lseek(fd, 0, os.SEEK_END)
        try:
            written = os.write(fd, line)
            while written < len(line):
                written += os.write(fd, line[written:])
            os.fsync(fd)
        except BaseException:
            os.ftruncate(fd, start)
            raise
        self._stored_ids.add(traj.id)
        return True

    def extend(self, trajs: Iterable[Trajectory]) -> int:
        """Append each; the number written (those already stored are skipped)."""
        return sum(self.append(t) for t in trajs)

    def close(self) -> None:
        """Close this writer's shard and release the write lock (reading stays possible)."""
        if self._writer_fd is not None:
            os.close(self._writer_fd)
            self._writer_fd = None
        if self.skipped_writes:
            log.warning("%s: %d trajectories were already stored (same id) and were not written again",
                        self.root, self.skipped_writes)
            self.skipped_writes = 0
        if self._lock_key is not None:
            release_store_lock(self._lock_key)
            self._lock_key = None
        self._stored_ids = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001, S110 - interpreter shutdown: the kernel releases fds and locks
            pass

    # -- reading --------------------------------------------------------------------------------
    def _read_all(self) -> Iterator[Trajectory]:
        incomplete = 0
        for path in self.shards():
            with open(path, "rb") as f:
                for lineno, raw in enumerate(f, start=1):
                    if not raw.endswith(b"\n"):  # the last line, still being written or cut by a kill
                        incomplete += 1
                        continue
                    if raw.strip():
                        yield parse_trajectory_line(raw, path, lineno)
        if incomplete:
            log.warning("%s: skipped %d incomplete last line(s) (a write in progress, or cut by a kill)",
                        self.root, incomplete)

    def load(self) -> list[Trajectory]:
        """Every trajectory, one per id and per (task_id, sample) (see `deduplicate`, which it warns about)."""
        trajs, counts = deduplicate(self._read_all())
        if counts["same_id"] or counts["same_key"]:
            log.warning(
                "%s: ignored %d duplicate records (%d repeat a trajectory id, %d a (task_id, sample) pair that "
                "another record already has; the first is kept)", self.root,
                counts["same_id"] + counts["same_key"], counts["same_id"], counts["same_key"])
        if counts["superseded"]:
            log.info("%s: %d records of episodes that ended in an error are superseded by retries",
                     self.root, counts["superseded"])
        return trajs

    def __iter__(self) -> Iterator[Trajectory]:
        return iter(self.load())

    def __len__(self) -> int:
        return len(self.load())

    def done_keys(self) -> set[tuple[str, int]]:
        """The (task_id, sample) pairs already stored: what a resumed run must skip."""
        return {t.key for t in self.load()}

    # -- export ---------------------------------------------------------------------------------
    def to_dataset(self):
        """All trajectories as an HF `datasets.Dataset` (see `trajectories_to_dataset`)."""
        return trajectories_to_dataset(self.load())

    def to_parquet(self, path: str | os.PathLike) -> Path:
        path = Path(path)
        self.to_dataset().to_parquet(str(path))
        return path


def open_for_run(root: str | os.PathLike, key: str, identity: dict[str, Any], *, overwrite: bool = False,
                 what: str = "trajectories", compared: Sequence[str] | None = None) -> tuple[TrajectoryStore, bool]:
    """The store at `root` for writing the run `identity` (recorded as `meta[key]`), locked, and whether it
    resumes that run (`proctor.outputs.claim_output`): created when absent or empty, resumed when it holds the same
    run, refused (`OutputExistsError`, one line naming the field that differs) when it holds trajectories of another
    run or of no run of this kind, emptied first with `overwrite`. `compared`: the fields of `identity` that make
    the run (default all; the others are recorded, not compared). A resumed store keeps the identity it recorded.
    The lock is held while deciding, so no other process writes meanwhile."""
    root, identity = Path(root), as_json(identity)
    root.mkdir(parents=True, exist_ok=True)
    lock = acquire_store_lock(root)
    try:
        existing = TrajectoryStore.open(root) if (root / "manifest.json").exists() else None
        holds = existing is not None and any(s.stat().st_size for s in existing.shards())
        present = [existing.manifest_path, existing.shard_dir] if holds else []
        recorded = existing.meta.get(key) if existing else None
        resume = claim_output(root, _fields(identity, compared), recorded=_fields(recorded, compared),
                              present=present, overwrite=overwrite, what=what)
        return (existing.lock() if resume else TrajectoryStore(root, meta={key: identity})), resume
    finally:
        release_store_lock(lock)


def _fields(run: Any, names: Sequence[str] | None) -> Any:
    """The fields `names` of a recorded run identity (all when None; what is not a mapping, as it is)."""
    return {k: run.get(k) for k in names} if names is not None and isinstance(run, dict) else run

"""The store under misuse: readers never write, one writer at a time (named by pid), duplicate records dropped
with a warning, idempotent writes, invalid UTF-8 located, and a writer's own torn tail cut back."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from proctor.store import StoreLockedError, TrajectoryStore
from proctor.trajectory import StoreError
from test_trajectory import make_traj

TESTS = os.path.dirname(__file__)


def snapshot(root) -> dict[str, tuple[bytes, int]]:
    """Every file under `root`: its bytes and mtime (ns)."""
    out = {}
    for dirpath, _, files in os.walk(root):
        for name in files:
            path = os.path.join(dirpath, name)
            with open(path, "rb") as f:
                out[path] = (f.read(), os.stat(path).st_mtime_ns)
    return out


def python(script: str, **kw) -> subprocess.Popen:
    head = f"import sys; sys.path.insert(0, {TESTS!r})\n"
    return subprocess.Popen([sys.executable, "-c", head + textwrap.dedent(script)], text=True, **kw)


def test_reading_a_store_with_a_torn_tail_writes_nothing(tmp_path):
    with TrajectoryStore(tmp_path / "s") as store:
        store.append(make_traj("t0"))
    shard = store.shards()[0]
    with open(shard, "a") as f:
        f.write(make_traj("t1").model_dump_json()[:40])  # a line still being written (or cut by a kill)
    before = snapshot(tmp_path / "s")
    assert [t.task_id for t in TrajectoryStore.open(tmp_path / "s").load()] == ["t0"]
    assert [t.task_id for t in TrajectoryStore(tmp_path / "s")] == ["t0"]  # an existing store, no meta
    assert snapshot(tmp_path / "s") == before


def test_a_second_writer_is_refused_with_the_holders_pid(tmp_path):
    root = tmp_path / "s"
    holder = python(f"""
        from test_trajectory import make_traj
        from proctor.store import TrajectoryStore
        store = TrajectoryStore({str(root)!r})
        store.append(make_traj("t0"))
        print("ready", flush=True)
        sys.stdin.readline()
    """, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert holder.stdout.readline().strip() == "ready"
        with pytest.raises(StoreLockedError, match=rf"being written by pid {holder.pid} "):
            TrajectoryStore(root).append(make_traj("t1"))
        with pytest.raises(StoreLockedError, match=rf"pid {holder.pid}"):
            TrajectoryStore(root, meta={"x": 1})
        assert [t.task_id for t in TrajectoryStore.open(root)] == ["t0"]  # reading needs no lock
    finally:
        holder.send_signal(signal.SIGKILL)  # the kernel releases a dead process's lock
        holder.wait()
    with TrajectoryStore(root) as store:
        assert store.append(make_traj("t1"))
    assert sorted(t.task_id for t in TrajectoryStore.open(root)) == ["t0", "t1"]


def test_stores_of_one_process_share_its_lock(tmp_path):
    a = TrajectoryStore(tmp_path / "s")
    b = TrajectoryStore.open(tmp_path / "s")
    a.append(make_traj("t0"))
    b.append(make_traj("t1"))  # same process: no conflict
    a.close()
    b.append(make_traj("t2"))
    b.close()
    assert len(TrajectoryStore.open(tmp_path / "s")) == 3


def test_readers_drop_duplicate_ids_and_pairs_and_say_so(tmp_path, caplog):
    store = TrajectoryStore(tmp_path / "s")
    store.close()
    first = [make_traj("t0", 0), make_traj("t0", 1), make_traj("t1", 0)]
    again = make_traj("t0", 0)  # the same trajectory id written twice
    other = make_traj("t1", 0).model_copy(update={"id": "second-run"})  # another run's episode of (t1, 0)
    (store.shard_dir / "part-a.jsonl").write_text("".join(t.model_dump_json() + "\n" for t in first))
    (store.shard_dir / "part-b.jsonl").write_text(again.model_dump_json() + "\n" + other.model_dump_json() + "\n")
    trajs = TrajectoryStore.open(tmp_path / "s").load()
    assert [(t.id, t.key) for t in trajs] == [(t.id, t.key) for t in first]
    assert "ignored 2 duplicate records (1 repeat a trajectory id, 1 a (task_id, sample) pair" in caplog.text
    assert TrajectoryStore.open(tmp_path / "s").done_keys() == {("t0", 0), ("t0", 1), ("t1", 0)}


def test_a_retried_episode_supersedes_its_error_record_silently(tmp_path, caplog):
    failed = make_traj("t0", 0, success=False).model_copy(
        update={"id": "failed", "termination": "env_error", "error": "env op timed out"})
    retried = make_traj("t0", 0).model_copy(update={"id": "retried"})
    with TrajectoryStore(tmp_path / "s") as store:
        store.extend([failed, make_traj("t1", 0), retried])
    assert [t.id for t in TrajectoryStore.open(tmp_path / "s").load()] == ["t1-0", "retried"]
    assert "duplicate" not in caplog.text


def test_writes_are_idempotent_by_trajectory_id(tmp_path):
    trajs = [make_traj("t0", 0), make_traj("t0", 1), make_traj("t1", 0)]
    for written in (3, 0):  # e.g. `proctor targets --write-back DIR` run twice
        with TrajectoryStore(tmp_path / "s", meta={"targets": "mc-q"}) as store:
            assert store.extend(trajs) == written
    lines = [line for shard in store.shards() for line in shard.read_text().splitlines()]
    assert len(lines) == 3


def test_targets_write_back_twice_stores_each_trajectory_once(tmp_path):
    from typer.testing import CliRunner

    from credit_fixtures import toy_rollouts
    from proctor.cli import app

    src = tmp_path / "src"
    with TrajectoryStore(src) as s:
        s.extend(toy_rollouts())
    back = tmp_path / "back"
    for i in range(2):
        res = CliRunner().invoke(app, ["targets", "--method", "mc-q", "--in", str(src), "--out",
                                       str(tmp_path / f"t{i}"), "--split", "keep", "--write-back", str(back)])
        assert res.exit_code == 0, res.output
    raw = [json.loads(line)["id"] for shard in TrajectoryStore.open(back).shards() for line in shard.open()]
    assert sorted(raw) == sorted(t.id for t in toy_rollouts())


def test_invalid_utf8_names_file_and_line(tmp_path):
    with TrajectoryStore(tmp_path / "s") as store:
        store.append(make_traj("t0"))
    shard = store.shards()[0]
    bad = make_traj("t1").model_dump_json().replace("You won!", "You w\\u00f6n!").encode()
    bad = bad.replace(b"w\\u00f6n", b"w\xf6n")  # latin-1 bytes: not UTF-8
    with open(shard, "ab") as f:
        f.write(bad + b"\n")
    with pytest.raises(StoreError, match=rf"{shard.name}:2: not valid UTF-8 \(byte \d+ of the line is b'\\xf6'\)"):
        TrajectoryStore.open(tmp_path / "s").load()


def test_a_write_cut_short_is_cut_back_from_the_writers_own_shard(tmp_path):
    """A real short write: the file-size limit (RLIMIT_FSIZE) stops the second record half-way (EFBIG)."""
    root = tmp_path / "s"
    proc = python(f"""
        import resource, signal
        from test_trajectory import make_traj
        from proctor.store import TrajectoryStore
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        store = TrajectoryStore({str(root)!r})
        store.append(make_traj("t0"))
        size = store.shards()[0].stat().st_size
        resource.setrlimit(resource.RLIMIT_FSIZE, (size + 100, resource.RLIM_INFINITY))
        try:
            store.append(make_traj("t1"))
        except OSError as e:
            print("write failed:", e.strerror, flush=True)
        print(store.shards()[0].stat().st_size == size)
    """, stdout=subprocess.PIPE)
    out, _ = proc.communicate(timeout=120)
    assert out.splitlines() == ["write failed: File too large", "True"]
    shard = TrajectoryStore.open(root).shards()[0]
    assert shard.read_bytes().endswith(b"\n")
    assert [t.task_id for t in TrajectoryStore.open(root)] == ["t0"]

"""Trajectory schema validation, the append-only store (atomic writes, resume, errors) and lossless export."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from proctor.store import TrajectoryStore
from proctor.trajectory import Step, StoreError, Trajectory
from proctor.trajectory_export import dataset_to_trajectories, read_parquet, trajectories_to_dataset


def make_traj(task_id: str = "t0", sample: int = 0, success: bool = True, n_steps: int = 3) -> Trajectory:
    steps = [
        Step(
            observation=f"obs {i}",
            action=f"go to drawer {i}",
            reason="look there" if i == 0 else None,
            reward=1.0 if (success and i == n_steps - 1) else 0.0,
            done=i == n_steps - 1,
            info={"valid": i != 1, "admissible_actions": ["look", f"go to drawer {i}"], "nested": {"k": [1, 2]}},
            logprobs=[-0.5, -1.25] if i == 2 else None,
            targets={"mc-q": 0.75} if i == 0 else {},
        )
        for i in range(n_steps)
    ]
    return Trajectory(
        id=f"{task_id}-{sample}", env="household", task_id=task_id, sample=sample, task="put a apple in fridge",
        split="test", seed=7, agent="expert:oracle", steps=steps, final_observation="You won!",
        success=success, score=1.0 if success else 0.0, termination="success" if success else "failure",
        timings={"wall_s": 0.5}, meta={"config": {"temperature": 0.7}},
    )


def test_schema_rejects_inconsistent_outcome():
    with pytest.raises(ValueError, match="termination is 'success' but success is False"):
        Trajectory.model_validate({**make_traj().model_dump(), "success": False})
    with pytest.raises(ValueError, match="needs an error message"):
        Trajectory.model_validate({**make_traj(success=False).model_dump(), "termination": "env_error"})
    with pytest.raises(ValueError, match="termination"):
        Trajectory.model_validate({**make_traj().model_dump(), "termination": "crashed"})


def test_step_valid_defaults_true_and_reads_info():
    assert Step(observation="o", action="a").valid
    assert not Step(observation="o", action="a", info={"valid": False}).valid


def test_store_round_trip_and_resume_keys(tmp_path):
    trajs = [make_traj("t0", 0), make_traj("t0", 1, success=False), make_traj("t1", 0)]
    with TrajectoryStore(tmp_path / "s", meta={"env": "household"}) as store:
        store.extend(trajs)
    reopened = TrajectoryStore.open(tmp_path / "s")
    assert reopened.load() == trajs
    assert reopened.done_keys() == {("t0", 0), ("t0", 1), ("t1", 0)}
    assert reopened.meta == {"env": "household"}
    with reopened:  # a second writer appends to its own shard
        reopened.append(make_traj("t2", 0))
    assert len(reopened.shards()) == 2
    assert len(TrajectoryStore.open(tmp_path / "s")) == 4


def test_open_missing_store_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no trajectory store"):
        TrajectoryStore.open(tmp_path / "nope")


def test_corrupt_line_names_file_line_and_field(tmp_path):
    with TrajectoryStore(tmp_path / "s") as store:
        store.append(make_traj("t0"))
        store.append(make_traj("t1"))
    shard = store.shards()[0]
    lines = shard.read_text().splitlines(keepends=True)
    bad = json.loads(lines[1])
    bad["steps"][2]["reward"] = "lots"
    shard.write_text(lines[0] + json.dumps(bad) + "\n")
    with pytest.raises(StoreError, match=rf"{shard.name}:2: field 'steps\.2\.reward'"):
        TrajectoryStore.open(tmp_path / "s").load()
    shard.write_text(lines[0] + "{not json\n" + lines[1])
    with pytest.raises(StoreError, match=rf"{shard.name}:2: not valid JSON"):
        TrajectoryStore.open(tmp_path / "s").load()


def test_missing_field_is_named(tmp_path):
    store = TrajectoryStore(tmp_path / "s")
    record = make_traj().model_dump()
    del record["task_id"]
    (store.shard_dir / "part-x.jsonl").write_text(json.dumps(record) + "\n")
    with pytest.raises(StoreError, match="part-x.jsonl:1: field 'task_id': Field required"):
        store.load()


def test_torn_tail_is_skipped_by_readers_and_left_alone(tmp_path, caplog):
    with TrajectoryStore(tmp_path / "s") as store:
        store.append(make_traj("t0"))
    shard = store.shards()[0]
    with open(shard, "a") as f:
        f.write(make_traj("t1").model_dump_json()[:40])  # a write cut short by a kill
    size = shard.stat().st_size
    reopened = TrajectoryStore(tmp_path / "s")
    assert [t.task_id for t in reopened.load()] == ["t0"]
    assert "skipped 1 incomplete last line" in caplog.text
    assert shard.stat().st_size == size  # a reader never writes (the shard may belong to a live writer)
    with reopened:
        reopened.append(make_traj("t2"))  # a new writer appends to a shard of its own
    assert sorted(t.task_id for t in TrajectoryStore.open(tmp_path / "s")) == ["t0", "t2"]


def test_kill_mid_run_keeps_every_completed_record(tmp_path):
    """SIGKILL a process that appends continuously: all complete records survive, nothing else is lost."""
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(os.path.dirname(__file__))!r})
        from test_trajectory import make_traj
        from proctor.store import TrajectoryStore
        store = TrajectoryStore({str(tmp_path / "s")!r})
        i = 0
        while True:
            store.append(make_traj(f"t{{i}}", n_steps=20))
            if i == 5:
                print("ready", flush=True)
            i += 1
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    trajs = TrajectoryStore(tmp_path / "s").load()
    assert len(trajs) >= 6
    assert [t.task_id for t in trajs] == [f"t{i}" for i in range(len(trajs))]


def test_dataset_and_parquet_round_trip_is_lossless(tmp_path):
    trajs = [make_traj("t0", 0), make_traj("t0", 1, success=False)]
    ds = trajectories_to_dataset(trajs)
    assert len(ds) == 2 and ds[0]["task_id"] == "t0"
    assert dataset_to_trajectories(ds) == trajs
    with TrajectoryStore(tmp_path / "s") as store:
        store.extend(trajs)
    path = store.to_parquet(tmp_path / "t.parquet")
    assert read_parquet(path) == trajs


def test_dataset_with_bad_row_names_row():
    ds = trajectories_to_dataset([make_traj()])
    ds = ds.map(lambda r: {"termination": "exploded"})
    with pytest.raises(StoreError, match="row 0: field 'termination'"):
        dataset_to_trajectories(ds)

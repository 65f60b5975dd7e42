"""A reader process and a writer process on one store at the same time: 10,000 records, nothing lost.

Each record spans three memory pages (~9 KB), so a reader regularly sees a record half-written; opening
the store must not "repair" that line away from under the writer, and reads must never fail on it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from proctor.store import TrajectoryStore

N_RECORDS = 10_000
TESTS = os.path.dirname(__file__)

WRITER = """
from proctor.store import TrajectoryStore
from proctor.trajectory import Step, Trajectory
store = TrajectoryStore(ROOT)
print("ready", flush=True)
pad = "x" * 9000
for i in range(N):
    store.append(Trajectory(id=f"r{i}", env="e", task_id=f"t{i}", sample=0, task="t", split="test", seed=i,
                            agent="a", steps=[Step(observation="o", action="a", done=True)],
                            final_observation=pad, success=True, score=1.0, termination="success"))
store.close()
"""

READER = """
import json, time
import pytest

from proctor.store import TrajectoryStore
opens, loads, last, errors = 0, 0, 0, []
next_load = 0.0
while True:
    finished = os.path.exists(DONE)
    try:
        store = TrajectoryStore.open(ROOT)  # what every reader does first
        opens += 1
        if time.monotonic() >= next_load or finished:
            n = len(store.load())
            loads += 1
            if n < last:
                errors.append(f"count went down from {last} to {n}")
            last = n
            next_load = time.monotonic() + 1.0
    except Exception as e:  # noqa: BLE001 - reported to the test
        errors.append(f"{type(e).__name__}: {e}")
    if finished:
        break
print(json.dumps({"opens": opens, "loads": loads, "last": last, "errors": errors[:5]}))
"""


def run(script: str, **kw) -> subprocess.Popen:
    head = f"import os, sys; sys.path.insert(0, {TESTS!r})\n"
    return subprocess.Popen([sys.executable, "-c", head + textwrap.dedent(script)], text=True, **kw)


@pytest.mark.slow
def test_concurrent_reader_and_writer_lose_nothing(tmp_path):
    root, done = tmp_path / "s", tmp_path / "writer-done"
    consts = f"ROOT, N, DONE = {str(root)!r}, {N_RECORDS}, {str(done)!r}\n"
    t0 = time.monotonic()
    writer = run(consts + WRITER, stdout=subprocess.PIPE)
    assert writer.stdout.readline().strip() == "ready"
    reader = run(consts + READER, stdout=subprocess.PIPE)
    assert writer.wait(timeout=300) == 0
    done.touch()
    out, _ = reader.communicate(timeout=300)
    report = json.loads(out)
    seconds = time.monotonic() - t0
    assert report["errors"] == [], report
    assert report["last"] == N_RECORDS and report["opens"] > 100, report
    lines = [line for shard in TrajectoryStore.open(root).shards() for line in shard.read_bytes().split(b"\n")]
    assert lines[-1] == b"" and len(lines) == N_RECORDS + 1  # every record whole, once
    assert sorted(t.id for t in TrajectoryStore.open(root)) == sorted(f"r{i}" for i in range(N_RECORDS))
    print(f"{N_RECORDS} records, {report['opens']} reader opens, {report['loads']} full reads, {seconds:.1f} s")

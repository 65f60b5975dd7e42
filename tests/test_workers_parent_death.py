"""Env worker processes die with the process that started them, even while an env call hangs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc")
TESTS = os.path.dirname(__file__)


def alive(pid: int) -> bool:
    """The process exists and is not a zombie (an orphan may wait to be reaped by a container's init)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


PARENT = """
import sys, threading
sys.path.insert(0, TESTS)
import test_rollout_envs  # registers the `guess` env
from proctor.envs.registry import EnvSpec
from proctor.rollout.worker_process import ProcessEnvPool

spec = EnvSpec("guess", {"hang_on": ["test-0"], "hang_s": 600.0})
box = {}
if FROM_THREAD:  # kernel_signal is off: the watchdog thread alone must notice
    t = threading.Thread(target=lambda: box.update(pool=ProcessEnvPool(spec, 2, 2, step_timeout=None)))
    t.start()
    t.join()
    pool = box["pool"]
else:
    pool = ProcessEnvPool(spec, 2, 2, step_timeout=None)
pool.reset(0, "test-0", 1)
pool.reset(1, "test-1", 1)
assert all(r.ok for r in pool.collect().values())
pool.step(1, "guess 0")  # the worker of a pool started by a finished thread still answers
assert pool.collect()[1].ok
print(" ".join(str(p.pid) for p in pool._procs.values()), flush=True)
pool.step(0, "guess 0")  # hangs for 600 s in its worker
pool.collect()
"""


@pytest.mark.parametrize("from_thread", [False, True], ids=["main-thread", "other-thread"])
def test_workers_die_when_their_parent_is_killed_mid_env_call(from_thread):
    script = f"TESTS, FROM_THREAD = {TESTS!r}, {from_thread}\n" + textwrap.dedent(PARENT)
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        line = parent.stdout.readline()
        pids = [int(p) for p in line.split()]
        assert len(pids) == 2, line
        time.sleep(1.0)  # the step is now hanging in worker 0
        assert all(alive(p) for p in pids)
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    deadline = time.monotonic() + 5.0
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [p for p in pids if alive(p)]
    for p in left:
        os.kill(p, signal.SIGKILL)
    assert not left, f"workers {left} outlived their killed parent"

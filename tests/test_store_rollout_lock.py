"""Two rollouts into one `--out`: the second is refused before it runs a single episode, naming the first."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

from typer.testing import CliRunner

from proctor.cli import app
from proctor.store import TrajectoryStore


def test_a_second_rollout_into_the_same_out_is_refused(tmp_path):
    out = tmp_path / "runs"
    args = ["rollout", "--env", "household", "--agent", "expert", "--tasks", "3", "--samples", "2",
            "--no-progress", "--out", str(out)]
    first = CliRunner().invoke(app, args[:-2] + ["--tasks", "1", "--out", str(out)])
    assert first.exit_code == 0, first.output
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys
        from proctor.store import TrajectoryStore
        store = TrajectoryStore.open({str(out)!r}).lock()  # a rollout writing into the same store
        print("ready", flush=True)
        sys.stdin.readline()
    """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        res = CliRunner().invoke(app, args)
        assert res.exit_code == 2
        assert f"being written by pid {holder.pid}" in " ".join(res.output.split())
        assert len(TrajectoryStore.open(out)) == 2  # nothing written by the refused run
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    res = CliRunner().invoke(app, args)  # the holder is gone: resume
    assert res.exit_code == 0, res.output
    assert sorted(t.key for t in TrajectoryStore.open(out)) == [(t, k) for t in sorted(
        {t.task_id for t in TrajectoryStore.open(out)}) for k in range(2)]
    assert len(TrajectoryStore.open(out)) == 6

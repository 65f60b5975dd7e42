"""Run `proctor ...` under torchrun with CPU processes (gloo), as the distributed tests do."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def torchrun_cli(tmp_path: Path, args: list[str], processes: int, timeout: float = 300) -> subprocess.CompletedProcess:
    """`torchrun --standalone --nproc_per_node PROCESSES proctor ARGS` on the CPU, 1 thread per process; asserts
    that it exits 0 (with the end of its stderr) and returns the completed process."""
    driver = tmp_path / "driver.py"
    driver.write_text("from proctor.cli import main\n\nmain()\n")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(processes),
           str(driver), *args]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "CUDA_VISIBLE_DEVICES": ""}
    res = subprocess.run(cmd, check=False, capture_output=True, text=True, env=env, timeout=timeout)
    assert res.returncode == 0, res.stderr[-3000:]
    return res

"""A PRM served by the loop (`prm_serving: {engine: server}`): after Q_k is trained, `proctor prm serve Q_k` runs
as a process of its own (on its own device: `device`, or the device plan's `devices.prm`), and every evaluation
that ranks with Q_k (best-of-N, search, the scoring of its episodes) scores through it, so the orchestrator holds
no PRM. The server follows the iteration's PRM: it restarts on Q_{k+1}. Its scores are those of the PRM loaded
in-process (`tests/test_pipeline_prm_server.py` checks the evaluation stores agree to 1e-4).

A PRM head only: a likelihood PRM is an LM scored by `prompt_logprobs`, which vLLM serves (`prm_server` of the
search and trainer configs); the loop does not start that server yet.
"""

from __future__ import annotations

import atexit
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Literal

import httpx
from pydantic import BaseModel, ConfigDict, Field


class PRMServingSection(BaseModel):
    """Where the loop's evaluations score with Q_k (see module docstring)."""

    model_config = ConfigDict(extra="forbid")

    engine: Literal["local", "server"] = Field(default="local", description="local: each evaluation loads Q_k "
                                               "itself; server: the loop serves Q_k with `proctor prm serve` and the "
                                               "evaluations score through it")
    device: str = Field(default="auto", description="the server's device (auto: CUDA when present; with "
                        "devices.prm, its first GPU)")
    batch_size: int = Field(default=16, ge=1, description="states (or trajectories) the server scores in one pass")
    port: int = Field(default=0, ge=0, le=65535, description="the server's port on 127.0.0.1 (0: a free one, kept "
                      "in RUN/prm-server.json so that a resumed run asks the same address)")
    start_timeout: float = Field(default=300.0, gt=0, description="seconds to wait for the server to answer")


class ServedPRM:
    """The `proctor prm serve` process of a run (see module docstring), on 127.0.0.1:`port`."""

    def __init__(self, section: PRMServingSection, port: int, log_file: Path, env: dict[str, str] | None = None):
        self.section, self.port, self.log_file, self.env = section, port, log_file, env or {}
        self.current: str | None = None
        self._proc: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def ref(self) -> dict[str, Any]:
        """The `prm_server` an agent, search or evaluation config takes to score here."""
        return {"base_url": self.base_url}

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def follow(self, prm: Path) -> None:
        """Serve the PRM saved in `prm` (starting, or restarting on another PRM)."""
        if self.running and self.current == str(prm):
            return
        self.stop()
        command = [sys.executable, "-m", "proctor", "prm", "serve", str(prm), "--port", str(self.port),
                   "--batch-size", str(self.section.batch_size), "--device", self.section.device]
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        with self.log_file.open("ab") as out:
            out.write(f"$ {' '.join(command)}\n".encode())
            out.flush()
            self._proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                          env={**os.environ, **self.env})
        atexit.register(self.stop)
        self.current = str(prm)
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.section.start_timeout
        while True:
            if self._proc is None or self._proc.poll() is not None:
                code = self._proc.returncode if self._proc is not None else None
                self._proc = None
                raise RuntimeError(f"the PRM server exited with code {code} during start-up; see {self.log_file}")
            try:
                if httpx.get(f"{self.base_url}/health", timeout=5).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the PRM server did not answer within {self.section.start_timeout:.0f} s; see "
                                   f"{self.log_file}")
            time.sleep(0.5)

    def stop(self) -> None:
        """End the server (SIGTERM, then SIGKILL after 30 s). Idempotent."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        atexit.unregister(self.stop)
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def with_prm_server(value: Any, prm: str, ref: dict[str, Any]) -> Any:
    """`value` (an agent or search config) with `prm_server: ref` given to every part that ranks with PRM `prm`."""
    if isinstance(value, list):
        return [with_prm_server(v, prm, ref) for v in value]
    if not isinstance(value, dict):
        return value
    value = {k: with_prm_server(v, prm, ref) for k, v in value.items()}
    return {**value, "prm_server": ref} if value.get("prm") == prm and "prm_server" not in value else value

"""A PRM served by the loop (`prm_serving: {engine: server}`): after Q_k is trained, it is served by a process of its
own (on its own device: `device`, or the device plan's `devices.prm`), and every evaluation that ranks with Q_k
(best-of-N, search, the scoring of its episodes) scores through it, so the orchestrator holds no PRM. The server
follows the iteration's PRM. Its scores are those of the PRM loaded in-process.

- A PRM head: `proctor prm serve Q_k` (`ServedPRM`), restarted on Q_{k+1} (`tests/test_pipeline_prm_server.py`
  checks the evaluation stores agree to 1e-4).
- A likelihood PRM: its LM on a vLLM server (`served_likelihood_prm`: the `generation` section's vLLM settings, one
  copy, the weights of Q_{k+1} reloaded in place), which scores by `prompt_logprobs`; the PRM folder gives β, b, the
  prompt and the tokenizer (`tests/test_vllm.py` runs it in the loop).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from proctor.serving.process import ServerProcess


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
        self.section, self.port, self.env = section, port, env or {}
        self.current: str | None = None
        self._process = ServerProcess("the PRM server", log_file)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def ref(self) -> dict[str, Any]:
        """The `prm_server` an agent, search or evaluation config takes to score here."""
        return {"base_url": self.base_url}

    def follow(self, prm: Path) -> None:
        """Serve the PRM saved in `prm` (starting, or restarting on another PRM)."""
        if self._process.running and self.current == str(prm):
            return
        self._process.stop()
        command = [sys.executable, "-m", "proctor", "prm", "serve", str(prm), "--port", str(self.port),
                   "--batch-size", str(self.section.batch_size), "--device", self.section.device]
        self._process.start(command, {**os.environ, **self.env}, f"{self.base_url}/health",
                            self.section.start_timeout)
        self.current = str(prm)

    def stop(self) -> None:
        self._process.stop()

    def exited(self) -> int | None:
        """The exit code of a server that ended by itself (None while it runs)."""
        return self._process.exited()

    @property
    def log_file(self) -> Path:
        return self._process.log_file


def with_prm_server(value: Any, prm: str, ref: dict[str, Any]) -> Any:
    """`value` (an agent or search config) with `prm_server: ref` given to every part that ranks with PRM `prm`."""
    if isinstance(value, list):
        return [with_prm_server(v, prm, ref) for v in value]
    if not isinstance(value, dict):
        return value
    value = {k: with_prm_server(v, prm, ref) for k, v in value.items()}
    return {**value, "prm_server": ref} if value.get("prm") == prm and "prm_server" not in value else value


#: the name the loop's vLLM server of a likelihood PRM serves Q_k under
SERVED_PRM_NAME = "prm"


def served_likelihood_prm(section: PRMServingSection, server: Any, port: int, log_file: Path,
                          env: dict[str, str] | None = None) -> Any:
    """The loop's vLLM server of a likelihood PRM's LM (a `ServedPolicy` under the name `prm`): `server` (the
    `generation` section's `VLLMServerConfig`) as one copy without LoRA, on `port`, reloading each new Q_k in
    place; `ref()` is the `prm_server` that scores on it."""
    from proctor.rl.served_policy import GenerationBackend, ServedPolicy

    config = server.model_copy(update={"port": port, "weight_reload": True, "enable_lora": False,
                                       "data_parallel_size": 1, "start_timeout": section.start_timeout,
                                       "env": {**server.env, **(env or {})}})
    return ServedPolicy(GenerationBackend(engine="vllm", server=config), "", lora=False, log_file=log_file,
                        name=SERVED_PRM_NAME)

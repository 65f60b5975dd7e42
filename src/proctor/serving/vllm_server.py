"""`VLLMServer`: vLLM's OpenAI-compatible server as a managed subprocess that follows a training run.

vLLM runs from its own Python environment (`PROCTOR_VLLM_PYTHON`, its `python`; `scripts/install_vllm_cpu.sh`
makes one for the CPU), since its pins (transformers, torch) are not proctor's. The launcher

- starts `python -m vllm.entrypoints.openai.api_server` on 127.0.0.1 (a free port unless one is given), in its
  own process group, with its output in a log file;
- waits until `/v1/models` answers, and fails with the log's last lines if the process exits first or the
  start-up takes longer than `start_timeout`;
- follows the iterate: `load_lora(name, folder)` hot-loads a LoRA adapter (`/v1/load_lora_adapter`, which needs
  `enable_lora` and, as vLLM requires, `VLLM_ALLOW_RUNTIME_LORA_UPDATING=True`, set here), and
  `restart(model)` serves new full weights;
- stops with the run: `stop()` (also on leaving the `with` block and at interpreter exit) ends the whole process
  group, SIGTERM then SIGKILL; on Linux the server also gets SIGKILL if the process that started it dies
  (`proctor.serving.process.ServerProcess`), so no run leaves an orphan server.

The API key (`api_key_env`, read from the environment, never logged) is passed to vLLM's `--api-key`, which
then asks every request for it.

On the CPU build, `VLLM_CPU_KVCACHE_SPACE` (GiB of KV cache; 2 here) and the Intel OpenMP runtime of the venv
(`LD_PRELOAD=<venv>/lib/libiomp5.so`, when present) are set unless the environment sets them.
"""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path
from typing import Any, Literal, Self

import httpx
from pydantic import BaseModel, ConfigDict, Field

from proctor.serving.process import ServerProcess

log = logging.getLogger(__name__)

PYTHON_ENV = "PROCTOR_VLLM_PYTHON"


class VLLMServerError(RuntimeError):
    """The vLLM server could not start, answer or load an adapter."""


class VLLMServerConfig(BaseModel):
    """How to serve a model with vLLM (the fields map to `vllm.entrypoints.openai.api_server` flags)."""

    model_config = ConfigDict(extra="forbid")

    python: str | None = Field(default=None, description=f"the python of vLLM's environment (None: ${PYTHON_ENV})")
    port: int = Field(default=0, ge=0, le=65535, description="port on 127.0.0.1 (0: a free one)")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        default="auto", description="weights' dtype (float32 on the CPU build: bfloat16 is slow there)")
    max_model_len: int | None = Field(default=None, ge=16, description="context length (None: the model's)")
    enable_lora: bool = Field(default=False, description="serve LoRA adapters (needed by load_lora)")
    max_lora_rank: int = Field(default=16, ge=1, description="largest LoRA rank that can be loaded")
    max_loras: int = Field(default=2, ge=1, description="adapters held at once")
    max_num_batched_tokens: int | None = Field(
        default=None, ge=16, description="tokens one engine step may process (None: vLLM's). On the CPU build "
        "set it well above concurrent requests x prompt length: a prompt split over steps (chunked prefill) "
        "with a per-request seed crashes vLLM 0.32's CPU sampler ('CPU Generator does not use offset')")
    gpu_memory_utilization: float | None = Field(default=None, gt=0, le=1,
                                                 description="fraction of GPU memory vLLM may take (None: vLLM's)")
    tensor_parallel_size: int = Field(default=1, ge=1, description="GPUs one copy of the model is split over "
                                      "(vLLM's --tensor-parallel-size)")
    data_parallel_size: int = Field(default=1, ge=1, description="copies of the model behind the one server, each on "
                                    "its own GPUs; vLLM spreads the requests over them (--data-parallel-size)")
    api_key_env: str | None = Field(default=None, description="environment variable holding the key every "
                                    "request must carry (None: none)")
    weight_reload: bool = Field(default=False, description="serve vLLM's development endpoints "
                                "(VLLM_SERVER_DEV_MODE, on 127.0.0.1 like the rest) so that a new iterate's weights "
                                "reload in place (`reload_weights`), the server process kept, instead of a restart")
    enforce_eager: bool = Field(default=False, description="run the model eagerly (vLLM's --enforce-eager): no "
                                "compilation or graph capture at start-up, so it starts in about a minute instead of "
                                "several (first start, CPU build), and each step runs slower")
    start_timeout: float = Field(default=600.0, gt=0, description="seconds to wait for the server to answer")
    extra_args: list[str] = Field(default_factory=list, description="more api_server flags, verbatim")
    env: dict[str, str] = Field(default_factory=dict, description="more environment variables for the server")


def vllm_python(configured: str | None = None) -> str:
    """The python of vLLM's environment: `configured`, else $PROCTOR_VLLM_PYTHON; one clear error otherwise."""
    python = configured or os.environ.get(PYTHON_ENV)
    if not python:
        raise VLLMServerError(f"no vLLM environment: set {PYTHON_ENV} to the python of a venv with vLLM installed "
                              "(scripts/install_vllm_cpu.sh makes one for the CPU and prints it)")
    if not Path(python).is_file():
        raise VLLMServerError(f"{PYTHON_ENV}={python}: no such file")
    return python


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class VLLMServer:
    """A vLLM OpenAI server subprocess serving `model` as `served_name` (see module docstring)."""

    def __init__(self, model: str | os.PathLike, served_name: str, config: VLLMServerConfig | None = None,
                 log_file: str | os.PathLike | None = None):
        self.config = config or VLLMServerConfig()
        self.python = vllm_python(self.config.python)
        self.model = str(model)
        self.served_name = served_name
        self.port = self.config.port or free_port()
        self.log_file = Path(log_file) if log_file else Path(f"vllm-{self.port}.log")
        self.adapters: dict[str, str] = {}
        self._process = ServerProcess("vLLM", self.log_file, VLLMServerError)
        self._key = os.environ.get(self.config.api_key_env) if self.config.api_key_env else None
        if self.config.api_key_env and not self._key:
            raise VLLMServerError(f"api_key_env: the environment variable {self.config.api_key_env} is not set")

    @property
    def base_url(self) -> str:
        """The OpenAI base URL (`.../v1`)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self) -> list[str]:
        c = self.config
        cmd = [self.python, "-m", "vllm.entrypoints.openai.api_server", "--model", self.model,
               "--served-model-name", self.served_name, "--host", "127.0.0.1", "--port", str(self.port),
               "--dtype", c.dtype]
        if c.max_model_len:
            cmd += ["--max-model-len", str(c.max_model_len)]
        if c.enable_lora:
            cmd += ["--enable-lora", "--max-lora-rank", str(c.max_lora_rank), "--max-loras", str(c.max_loras)]
        if c.max_num_batched_tokens:
            cmd += ["--max-num-batched-tokens", str(c.max_num_batched_tokens)]
        if c.gpu_memory_utilization is not None:
            cmd += ["--gpu-memory-utilization", str(c.gpu_memory_utilization)]
        if c.tensor_parallel_size > 1:
            cmd += ["--tensor-parallel-size", str(c.tensor_parallel_size)]
        if c.data_parallel_size > 1:
            cmd += ["--data-parallel-size", str(c.data_parallel_size)]
        if c.enforce_eager:
            cmd += ["--enforce-eager"]
        return cmd + list(c.extra_args)

    def environment(self) -> dict[str, str]:
        env = {**os.environ, **self.config.env}
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
        iomp = Path(self.python).parent.parent / "lib" / "libiomp5.so"
        if iomp.is_file() and "LD_PRELOAD" not in env:
            env["LD_PRELOAD"] = str(iomp)
        if self.config.enable_lora:
            env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] = "True"
        if self._key:
            env["VLLM_API_KEY"] = self._key  # vLLM reads its --api-key from here: the key is never on a command line
        if self.config.weight_reload:
            env["VLLM_SERVER_DEV_MODE"] = "1"
        return env

    # -- lifecycle --------------------------------------------------------------------------------------
    def start(self) -> Self:
        log.info("vLLM: starting %s on port %d (log: %s)", self.model, self.port, self.log_file)
        self._process.start(self.command(), self.environment(), f"{self.base_url}/models", self.config.start_timeout,
                            self._headers())
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """End the server's process group: SIGTERM, then SIGKILL after `timeout` s. Idempotent."""
        self._process.stop(timeout)
        self.adapters.clear()

    def restart(self, model: str | os.PathLike | None = None) -> None:
        """Serve `model` (new full weights; None: the same folder again) under the same name and port (started
        when it was not running)."""
        self.stop()
        if model is not None:
            self.model = str(model)
        self.start()

    @property
    def running(self) -> bool:
        return self._process.running

    @property
    def pid(self) -> int | None:
        """The server's process id (None when it is not running)."""
        return self._process.pid

    def exited(self) -> int | None:
        """The exit code of a server that ended by itself since it started (None while it runs)."""
        return self._process.exited()

    def reload_weights(self, model: str | os.PathLike) -> None:
        """Load the full weights saved in `model` (the same architecture and tokenizer) into the running server in
        place (vLLM's `reload_weights`, a `weight_reload` server), and drop the prefix cache computed with the old
        ones; the server keeps its process, name and port."""
        if not self.config.weight_reload:
            raise VLLMServerError("reload_weights needs a server started with weight_reload: true")
        self._post("collective_rpc", {"method": "reload_weights",
                                      "kwargs": {"weights_path": str(Path(model).resolve())}})
        self._post("reset_prefix_cache", {})
        self.model = str(model)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- adapters ---------------------------------------------------------------------------------------
    def load_lora(self, name: str, folder: str | os.PathLike) -> str:
        """Hot-load the LoRA adapter saved in `folder` as model `name` (requests then name it); returns it."""
        if not self.config.enable_lora:
            raise VLLMServerError("load_lora needs a server started with enable_lora: true")
        if not (Path(folder) / "adapter_config.json").is_file():
            raise VLLMServerError(f"{folder}: no adapter_config.json (not a saved LoRA adapter)")
        if name in self.adapters or name in self.served_models():  # the name may be another client's adapter
            self._post("unload_lora_adapter", {"lora_name": name})
        self._post("load_lora_adapter", {"lora_name": name, "lora_path": str(Path(folder).resolve())})
        self.adapters[name] = str(folder)
        return name

    def unload_lora(self, name: str) -> None:
        self._post("unload_lora_adapter", {"lora_name": name})
        self.adapters.pop(name, None)

    def served_models(self) -> list[str]:
        resp = httpx.get(f"{self.base_url}/models", headers=self._headers(), timeout=30)
        resp.raise_for_status()
        return [m["id"] for m in resp.json()["data"]]

    def _post(self, path: str, body: dict[str, Any]) -> None:
        """POST to the server; the development endpoints (collective_rpc, reset_prefix_cache) are at its root."""
        root = self.base_url.removesuffix("/v1") if path in ("collective_rpc", "reset_prefix_cache") else self.base_url
        resp = httpx.post(f"{root}/{path}", json=body, headers=self._headers(), timeout=300)
        if resp.status_code != 200:
            raise VLLMServerError(f"{root}/{path} answered HTTP {resp.status_code}: {resp.text[:500]}")

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._key}"} if self._key else {}

    def log_tail(self, lines: int = 30) -> str:
        return self._process.log_tail(lines)

    def requests_by_engine(self) -> dict[str, int]:
        """The requests each of the server's engines (its data-parallel copies) has finished so far, from its
        Prometheus `/metrics` (`vllm:request_success_total`, summed over finish reasons, by `engine` label)."""
        resp = httpx.get(f"{self.base_url.removesuffix('/v1')}/metrics", headers=self._headers(), timeout=30)
        resp.raise_for_status()
        return requests_by_engine(resp.text)


class AttachedVLLMServer(VLLMServer):
    """A vLLM server another process manages (the loop's, at `url`), which this one follows the iterate on but
    neither starts nor stops: `model` is what it serves now (the owner made it serve the starting policy)."""

    def __init__(self, url: str, model: str | os.PathLike, served_name: str, config: VLLMServerConfig | None = None):
        super().__init__(model, served_name, (config or VLLMServerConfig()).model_copy(
            update={"port": int(httpx.URL(url).port or 80)}), log_file=os.devnull)
        self.url = url.rstrip("/")

    @property
    def base_url(self) -> str:
        return self.url

    @property
    def running(self) -> bool:
        try:
            return httpx.get(f"{self.base_url}/models", headers=self._headers(), timeout=10).status_code == 200
        except httpx.HTTPError:
            return False

    def start(self) -> Self:
        if not self.running:
            raise VLLMServerError(f"the vLLM server at {self.base_url} does not answer (it is managed elsewhere: "
                                  "see its owner's log)")
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Nothing to stop: the server is its owner's."""

    def exited(self) -> int | None:
        return None  # its owner watches it

    def restart(self, model: str | os.PathLike | None = None) -> None:
        raise VLLMServerError(f"the vLLM server at {self.base_url} is managed elsewhere: it cannot be restarted on "
                              f"{model} from here (give it weight_reload, or enable_lora for LoRA iterates)")


def requests_by_engine(metrics: str) -> dict[str, int]:
    """Finished requests by engine label in a vLLM Prometheus text page (lines such as
    `vllm:request_success_total{engine="1",finished_reason="stop",model_name="policy"} 12.0`)."""
    counts: dict[str, int] = {}
    for line in metrics.splitlines():
        if not line.startswith("vllm:request_success_total{"):
            continue
        labels, _, value = line.rpartition(" ")
        engine = next((part.split("=", 1)[1].strip('"') for part in labels[labels.index("{") + 1:-1].split(",")
                       if part.startswith("engine=")), "0")
        counts[engine] = counts.get(engine, 0) + int(float(value))
    return counts


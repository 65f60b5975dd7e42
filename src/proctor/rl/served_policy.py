"""Generation by vLLM for the on-policy trainers: a managed server that follows the iterate.

With `generation: {engine: vllm}` in a trainer's config, iteration k's rollouts (and online DPO's candidate
actions) come from a vLLM server (`proctor.serving.vllm_server.VLLMServer`, started on the first iteration
with the starting policy, logging to `output_dir/vllm.log`) instead of the in-memory policy:

- LoRA training: the server runs with LoRA enabled and each saved iterate's adapters
  (`<iter>/policy/adapter/`) are hot-loaded under the iteration's name (`iter-k`), which the sampler asks for;
- full training: the server reloads the saved iterate's weights in place (`weight_reload`; vLLM's
  `reload_weights`), or restarts on its folder.

The sampler renders prompts with the shared renderer and sends them to the completions endpoint, so the token
ids the trainers rebuild for a prompt are those the server saw, and stores the generated ids. `hf` agents
map to the `openai` agent (temperature, top-p, stop strings, `max_new_tokens` → `max_tokens`, seed); `choice`
agents score the admissible actions by `prompt_logprobs` on the same server (one row per request: vLLM's CPU
build cannot batch them with LoRA on).
The trainer owns its server: `with generation_server(cfg, policy) as served:` around its iterations (a
`ServedPolicy` on the main process, which samples; None otherwise), so the server stops when the run ends, however
it ends (and at interpreter exit in any case). `GenerationBackend` is the trainers' `generation:` section.
"""

from __future__ import annotations

import json
import logging
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any, Literal, Self

import httpx
from pydantic import BaseModel, ConfigDict, Field

from proctor.agents.base import Agent
from proctor.renames import moved_names
from proctor.serving.vllm_server import AttachedVLLMServer, VLLMServer, VLLMServerConfig, VLLMServerError
from proctor.training.distributed import is_main_process
from proctor.training.policy import ADAPTER_DIR, is_peft

log = logging.getLogger(__name__)

SERVED_NAME = "policy"


class GenerationBackend(BaseModel):
    """Where the policy's samples are generated during on-policy training (a trainer's `generation:`)."""

    model_config = ConfigDict(extra="forbid")

    engine: Literal["local", "vllm"] = Field(default="local", description="local: the in-memory policy; vllm: a "
                                             "managed vLLM server that follows each iterate (LoRA hot-load, or a "
                                             "restart on full weights)")
    server: VLLMServerConfig = Field(default_factory=VLLMServerConfig, description="the vLLM server's settings")
    url: str | None = Field(default=None, description="the base URL (`http://127.0.0.1:PORT/v1`) of a running vLLM "
                            "server to sample from instead of starting one (the loop's, which serves the starting "
                            "policy): the trainer makes it follow each iterate (`server.weight_reload`, or "
                            "`server.enable_lora` for LoRA iterates, as it was started) and leaves it running")


class ServedPolicy:
    """The vLLM server of one training run, serving its current iterate (see module docstring)."""

    def __init__(self, config: GenerationBackend, start: str, lora: bool, log_file: Path, name: str = SERVED_NAME):
        server = config.server.model_copy(update={"enable_lora": lora or config.server.enable_lora})
        self.server = (VLLMServer(start, name, server, log_file=log_file) if config.url is None
                       else AttachedVLLMServer(config.url, start, name, server))
        self.name = name
        self.lora = self.server.config.enable_lora
        self.current = start
        self.model = name

    def follow(self, current: str) -> str:
        """Serve the iterate saved in `current` (starting or restarting the server as needed); returns the model
        name to ask for. A LoRA iterate is hot-loaded onto its base model (the base reloaded first when the server
        holds other weights)."""
        adapter = Path(current) / ADAPTER_DIR
        base = adapter_base(adapter) if self.lora and (adapter / "adapter_config.json").is_file() else None
        if base is not None:
            if not self.server.running:
                self.server.restart(base)
            elif not same_model(base, self.server.model):
                self.reload(base)
            name = Path(current).parent.name or "iterate"
            if self.server.adapters.get(name) != str(adapter):
                self.model = self.server.load_lora(name, adapter)
        elif not self.server.running:
            self.server.restart(current)
            self.model = self.name
        elif current != self.server.model:
            self.reload(current)
        if current != self.current:
            log.info("vLLM now serves %s as %r", current, self.model)
        self.current = current
        return self.model

    def forget(self) -> None:
        """Take the served weights as unknown (another process, a trainer attached to this server, made it follow
        its own iterates): the next `follow` reloads whatever it is asked for."""
        self.server.model = ""
        self.server.adapters.clear()

    def reload(self, current: str) -> None:
        """Serve the full weights in `current`: in place where the server allows it (`weight_reload`), else (or
        when the reload fails) by a restart."""
        if self.server.config.weight_reload:
            try:
                self.server.reload_weights(current)
                self.model = self.name
                return
            except (VLLMServerError, httpx.HTTPError) as e:
                log.warning("vLLM: reloading %s in place failed (%s); restarting on it", current, e)
        self.server.restart(current)
        self.model = self.name

    def agent_config(self, agent: dict[str, Any]) -> dict[str, Any]:
        """The config of the agent that samples from the served iterate as `agent` (kind hf or choice, its `model`
        the iterate's folder, which gives the tokenizer) does locally: hf → the `openai` agent on the completions
        endpoint (the renderer's prompt, the same sampling settings); choice → the choice agent scoring on the
        server (`prompt_logprobs`; one row per request with LoRA on: vLLM's CPU build cannot batch them)."""
        server = self.server
        key = server.config.api_key_env or "OPENAI_API_KEY"
        if agent["kind"] == "hf":
            out = {"kind": "openai", "base_url": server.base_url, "model": self.model, "endpoint": "completions",
                   "tokenizer": agent["model"], "api_key_env": key, "max_tokens": agent.get("max_new_tokens", 48)}
            return out | {k: agent[k] for k in ("prompt", "temperature", "top_p", "stop", "seed") if k in agent}
        if agent["kind"] == "choice":
            return {**agent, "server": {"base_url": server.base_url, "model": self.model, "api_key_env": key,
                                        "rows_per_request": 1 if self.lora else 8,
                                        "concurrency": 1 if self.lora else 2}}
        raise ValueError(f"generation.engine vllm samples with agent kind hf or choice, not {agent['kind']!r}")

    def ref(self) -> dict[str, Any]:
        """The `prm_server` (a `ServerRef`) that scores on this server by `prompt_logprobs` (a likelihood PRM's LM
        served here)."""
        return {"base_url": self.server.base_url, "model": self.model,
                "api_key_env": self.server.config.api_key_env or "OPENAI_API_KEY"}

    def sampler(self, agent: Any) -> Agent:
        """The agent that samples from the served iterate (`agent_config` of the trainer's agent, built)."""
        from proctor.agents.registry import agent_config

        return agent_config(self.agent_config({**agent.model_dump(mode="json"), "model": self.current})).build()

    def stop(self) -> None:
        self.server.stop()

    def exited(self) -> int | None:
        """The exit code of a server that ended by itself (None while it runs)."""
        return self.server.exited()

    @property
    def log_file(self) -> Path:
        return self.server.log_file

    def __enter__(self) -> Self:
        return self  # the server starts when it is first asked to follow an iterate

    def __exit__(self, *exc: object) -> None:
        self.stop()


def adapter_base(adapter: Path) -> str | None:
    """The folder (or hub name) of the model a saved LoRA adapter was trained on."""
    return json.loads((adapter / "adapter_config.json").read_text()).get("base_model_name_or_path")


def same_model(a: str | None, b: str | None) -> bool:
    """Whether two model references name the same model (folders compared resolved)."""
    if a is None or b is None:
        return False
    return Path(a).resolve() == Path(b).resolve() if Path(a).exists() and Path(b).exists() else a == b


def generation_server(cfg: Any, policy: Any) -> AbstractContextManager[ServedPolicy | None]:
    """The vLLM server of a trainer's run (`cfg.generation.engine` vllm, an agent of kind hf or choice), to be held
    for the run: `with generation_server(cfg, policy) as served:`, stopped when the block ends, however it ends.
    A `ServedPolicy` of the starting policy (LoRA when `policy` has adapters) on the main process, the one that
    samples; None elsewhere, and without vLLM (the in-memory policy samples)."""
    if cfg.generation.engine != "vllm" or cfg.agent.kind not in ("hf", "choice") or not is_main_process():
        return nullcontext()
    return ServedPolicy(cfg.generation, str(cfg.policy), is_peft(policy), Path(cfg.output_dir) / "vllm.log")


#: the backend's earlier name (transformers' `GenerationConfig` is another thing)
__getattr__ = moved_names(__name__, {"GenerationConfig": "GenerationBackend"})

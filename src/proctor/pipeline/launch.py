"""How the loop's training stages run: in the orchestrator's process (the default), or in N processes on a node
under `torchrun` or `accelerate launch` (DDP; FSDP or DeepSpeed ZeRO-3 through an Accelerate config file), and on
several nodes with torch's c10d rendezvous, one launcher per node placed by Ray (`proctor.pipeline.nodes`).

A launched stage runs `proctor run RUN/config.yaml --stage KEY --result-file F` in every process
(`proctor.pipeline.stage.stage_command`): each rank builds the same stage and trains its shard; the main process
writes the stage's result to F, and the orchestrator records the stage in `manifest.json`. Each rank's output
goes to its own log file under `RUN/logs/<stage>/`. When a rank fails, the stage fails with one line naming the
stage, the rank, its error and its log file (`RankFailure`), nothing is recorded, and the same `proctor run`
resumes from that stage.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

#: the stage families a `launch` section may name
TRAINING_STAGES = ("sft", "prm", "improve")


class LaunchSection(BaseModel):
    """How the loop's training stages (SFT, the PRM, the improvement) run (see module docstring)."""

    model_config = ConfigDict(extra="forbid")

    processes: int = Field(default=1, ge=1, description="training processes per node (1: in the orchestrator's "
                           "own process); each takes one GPU where CUDA is seen, else one CPU (gloo)")
    launcher: Literal["torchrun", "accelerate"] = Field(
        default="torchrun", description="the launcher of a multi-process stage: torchrun (DDP), or accelerate "
        "launch with `accelerate_config` (DDP, FSDP, DeepSpeed ZeRO-3 as that file says)")
    accelerate_config: Path | None = Field(default=None, description="an Accelerate config file (`accelerate "
                                           "config`) for launcher accelerate: its distributed type, FSDP or "
                                           "DeepSpeed plugin and mixed precision")
    nodes: int = Field(default=1, ge=1, description="nodes that train together (torch's c10d rendezvous; more than "
                       "one needs `ray_address`: Ray places one launcher on each node)")
    ray_address: str | None = Field(default=None, description="with nodes > 1: the Ray cluster whose nodes run the "
                                    "launchers (`auto`: the cluster this machine belongs to, `ray start`)")
    stages: list[Literal["sft", "prm", "improve"]] = Field(
        default_factory=lambda: list(TRAINING_STAGES), description="the training stages launched this way (the "
        "others run in the orchestrator's process)")

    @model_validator(mode="after")
    def _consistent(self) -> LaunchSection:
        if self.accelerate_config is not None:
            if self.launcher != "accelerate":
                raise ValueError("launch.accelerate_config is read by `launcher: accelerate` only")
            if not self.accelerate_config.is_file():
                raise ValueError(f"launch.accelerate_config: {str(self.accelerate_config)!r}: no such file")
        if self.nodes > 1 and self.ray_address is None:
            raise ValueError(f"launch.nodes: {self.nodes} nodes need launch.ray_address (the Ray cluster that places "
                             "one launcher on each node)")
        if self.nodes == 1:
            available, what = devices_here()
            if self.processes > available:
                raise ValueError(f"launch.processes: {self.processes} processes, but this machine has {available} "
                                 f"{what}")
        return self

    def launches(self, family: str) -> bool:
        """Whether a training stage of `family` (sft, prm, improve) runs in launched processes."""
        return (self.processes > 1 or self.nodes > 1) and family in self.stages

    def words(self, node_rank: int | None = None, rdzv: str | None = None) -> list[str]:
        """The launcher's command words before `proctor`'s arguments: e.g. `torchrun --standalone
        --nproc-per-node 2 -m proctor`; on several nodes, node `node_rank` of a c10d rendezvous at `rdzv`
        (host:port) that node 0 hosts (`is_host`: a node need not recognise its own address in `rdzv`)."""
        if self.launcher == "torchrun":
            where = (["--standalone"] if self.nodes == 1 else
                     ["--nnodes", str(self.nodes), "--rdzv-backend", "c10d", "--rdzv-endpoint", str(rdzv),
                      "--rdzv-conf", f"is_host={int(not node_rank)}"])
            return ["torchrun", *where, "--nproc-per-node", str(self.processes), "-m", "proctor"]
        config = ["--config_file", str(self.accelerate_config)] if self.accelerate_config else []
        where = ([] if self.nodes == 1 else
                 ["--num_machines", str(self.nodes), "--machine_rank", str(node_rank or 0),
                  "--main_process_ip", str(rdzv).rsplit(":", 1)[0], "--main_process_port", str(rdzv).rsplit(":", 1)[1],
                  "--rdzv_backend", "c10d", "--rdzv_conf", f"is_host={int(not node_rank)}"])
        return ["accelerate", "launch", *config, *where, "--num_processes", str(self.processes * self.nodes),
                "--multi_gpu" if _cuda_count() else "--cpu", "-m", "proctor"]


def _cuda_count() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def devices_here() -> tuple[int, str]:
    """How many training processes this machine holds, and of what: its CUDA devices, else its CPUs."""
    gpus = _cuda_count()
    return (gpus, "CUDA devices") if gpus else (os.cpu_count() or 1, "CPUs (no CUDA device is seen)")


class DevicePlan(BaseModel):
    """Which CUDA devices the loop's vLLM server and its launched training stages get (see `docs/concepts/loop.md`):
    e.g. the server on GPUs 0–3 and training on 4–7, both running at once; or neither given, every part on every
    GPU with the server stopped while a stage trains."""

    model_config = ConfigDict(extra="forbid")

    generation: list[int] | None = Field(default=None, description="the GPUs of the vLLM server of `generation: "
                                         "{engine: vllm}` (its tensor × data parallel size must be their number; "
                                         "None: every GPU)")
    training: list[int] | None = Field(default=None, description="the GPUs of the launched training stages, one "
                                       "process each (launch.processes must be their number; None: every GPU)")
    prm: list[int] | None = Field(default=None, description="the GPUs of the served PRM (`prm_serving: {engine: "
                                  "server}`; None: every GPU)")

    @model_validator(mode="after")
    def _seen(self) -> DevicePlan:
        seen = _cuda_count()
        for part in ("generation", "training", "prm"):
            devices = getattr(self, part)
            if devices is None:
                continue
            if not devices or len(set(devices)) != len(devices):
                raise ValueError(f"devices.{part}: give distinct GPU indices, e.g. [0, 1]")
            outside = [d for d in devices if not 0 <= d < seen]
            if outside:
                raise ValueError(f"devices.{part}: GPU {outside[0]} is not a CUDA device torch sees here (it sees "
                                 f"{seen}{': ' + ', '.join(map(str, range(seen))) if seen else ''})")
        return self

    @property
    def apart(self) -> bool:
        """Whether the server and training have GPUs of their own (the server keeps running while a stage trains)."""
        return (self.generation is not None and self.training is not None
                and not set(self.generation) & set(self.training))

    @staticmethod
    def visible(devices: list[int] | None) -> dict[str, str]:
        """The environment that gives a process `devices` (nothing: every device)."""
        return {} if devices is None else {"CUDA_VISIBLE_DEVICES": ",".join(map(str, devices))}


class RankFailure(RuntimeError):
    """A launched stage failed: the stage, the first rank that failed, what it said, and its log file."""

    def __init__(self, stage: str, rank: int | None, exitcode: str, error: str, log: Path):
        self.stage, self.rank, self.exitcode, self.error, self.log = stage, rank, exitcode, error, log
        who = f"rank {rank}" if rank is not None else "its launcher"
        super().__init__(f"stage {stage} failed on {who} ({exitcode}): {error} (log: {log}); the same `proctor run` "
                         "resumes from this stage")

    def __reduce__(self) -> tuple[Any, ...]:  # sent back from a node's Ray task
        return RankFailure, (self.stage, self.rank, self.exitcode, self.error, self.log)


ROOT_CAUSE = re.compile(r"Root Cause \(first observed failure\):.*?rank\s*:\s*(\d+) \(local_rank: (\d+)\).*?"
                        r"exitcode\s*:\s*(-?\d+)[^\n]*?(\(\w+\))?\s*\n.*?error_file\s*:\s*(\S+)", re.DOTALL)


def root_cause(output: str) -> dict[str, Any] | None:
    """The first failed rank in a torch elastic launcher's output (torchrun, accelerate launch): its global and
    local rank, exit code (negative: the signal), signal name and error file (None: not written); None when the
    output names no failure."""
    m = ROOT_CAUSE.search(output)
    if m is None:
        return None
    rank, local, code, signal, error_file = m.groups()
    return {"rank": int(rank), "local_rank": int(local), "exitcode": int(code),
            "signal": signal.strip("()") if signal else None,
            "error_file": None if error_file == "<N/A>" else error_file}


def rank_error(cause: dict[str, Any], rank_log: Path | None) -> str:
    """What the failed rank said: its error file's message, else the last line of its log, else its signal."""
    if cause.get("error_file") and Path(cause["error_file"]).is_file():
        try:
            message = json.loads(Path(cause["error_file"]).read_text())["message"]
            text = message["message"] if isinstance(message, dict) else str(message)
            return text.strip().splitlines()[-1]
        except (ValueError, KeyError, TypeError, IndexError):
            pass
    if rank_log is not None and rank_log.is_file():
        lines = [line.strip() for line in rank_log.read_text(errors="replace").splitlines() if line.strip()]
        if lines:
            return lines[-1]
    return f"killed by {cause['signal']}" if cause.get("signal") else "no error message"


def rank_log_file(log_dir: Path, local_rank: int) -> Path | None:
    """The newest stderr log torchrun wrote for `local_rank` under `log_dir` (`--log-dir`)."""
    logs = sorted(log_dir.glob(f"*/attempt_*/{local_rank}/stderr.log"), key=lambda p: p.stat().st_mtime)
    return logs[-1] if logs else None


def executable(words: list[str]) -> list[str]:
    """The launcher words with the launcher run by this Python (the venv's torch and accelerate)."""
    if words[0] == "torchrun":
        return [sys.executable, "-m", "torch.distributed.run", *words[1:]]
    if words[:2] == ["accelerate", "launch"]:
        return [sys.executable, "-m", "accelerate.commands.launch", *words[2:]]
    return words


def run_launched(key: str, words: list[str], stage_args: list[str], log_dir: Path, result_file: Path,
                 main_here: bool = True, env: dict[str, str] | None = None) -> dict[str, Any] | None:
    """Run one stage under the launcher `words` (`LaunchSection.words`), each rank's output in its own log file
    under `log_dir` (torchrun) or the launcher's log (accelerate); returns the result the main process wrote to
    `result_file` (None when the main process may be on another node: not `main_here`); `env`: more environment
    (the device plan's `CUDA_VISIBLE_DEVICES`). A failed rank raises `RankFailure`."""
    log_dir.mkdir(parents=True, exist_ok=True)
    if main_here:
        result_file.unlink(missing_ok=True)
    logs = ["--log-dir", str(log_dir), "--tee", "3", "--local-ranks-filter", "0"] if words[0] == "torchrun" else []
    argv = executable(words)
    at = argv.index("--nproc-per-node") if "--nproc-per-node" in argv else len(argv) - 2
    argv = [*argv[:at], *logs, *argv[at:], *stage_args, "--result-file", str(result_file)]
    launcher_log = log_dir / "launcher.log"
    with launcher_log.open("w") as out:
        proc = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, check=False,
                              env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})})
    text = launcher_log.read_text(errors="replace")
    if proc.returncode == 0 and result_file.is_file():
        return json.loads(result_file.read_text())
    if proc.returncode == 0 and not main_here:
        return None
    cause = root_cause(text)
    if cause is None:
        tail = [line for line in text.splitlines() if line.strip()][-1:] or ["no output"]
        raise RankFailure(key, None, f"exit code {proc.returncode}", tail[0].strip(), launcher_log)
    rank_log = rank_log_file(log_dir, cause["local_rank"]) if words[0] == "torchrun" else None
    code = f"exit code {cause['exitcode']}" + (f", {cause['signal']}" if cause["signal"] else "")
    raise RankFailure(key, cause["rank"], code, rank_error(cause, rank_log), rank_log or launcher_log)

"""What the PRM quality experiments share: Monte-Carlo completions from trajectory prefixes, training a PRM
in process with proctor's trainer, and scoring held-out trajectories.

Completions follow the layout of `proctor.credit.completions`: an ordinary `Trajectory` whose first
`meta["prefix_len"]` steps are the source's (replayed in a fresh env), then the agent's own, with
`meta["prefix_of"]` = the source's id. Each completion gets its own `sample` number (a hash of source id,
prefix length and index), so a stochastic policy seeded by (task, sample, step) makes different choices in
each; the env is replayed with the source's seed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from proctor.agents.base import Agent, AgentError, Candidate, Prefix
from proctor.envs.registry import EnvSpec
from proctor.prm.config import PRMTrainConfig
from proctor.prm.data import StepwiseExample, write_stepwise
from proctor.prm.model import ProcessRewardModel
from proctor.prm.trainer import train_prm
from proctor.episode import step_info
from proctor.trajectory import Step, Trajectory


def completion_sample(source_id: str, prefix_len: int, index: int, tag: str = "") -> int:
    """A 31-bit sample number for completion `index` from the first `prefix_len` actions of a source."""
    digest = hashlib.sha256(f"completion/{source_id}/{prefix_len}/{tag}/{index}".encode()).digest()
    return int.from_bytes(digest[:4], "big") >> 1


@dataclass(frozen=True)
class Start:
    """Where completions start: after replaying `actions` in `source`'s task (the source's first k actions
    for Math-Shepherd, or a state's history plus one candidate action)."""

    source: Trajectory
    actions: tuple[str, ...]
    tag: str = ""


class _Live:
    """One completion in flight: its env, the steps so far, and the state the agent acts in next."""

    def __init__(self, env: Any, start: Start, index: int):
        self.env, self.start = env, start
        s = start.source
        self.sample = completion_sample(s.id, len(start.actions), index, start.tag)
        self.observation, self.info = env.reset(s.task_id, s.seed)
        self.steps: list[Step] = []
        for a in start.actions:
            if env.done:
                raise ValueError(f"completion start of {s.id}: the episode ended before all "
                                 f"{len(start.actions)} actions were replayed")
            self.advance(Candidate(action=a, raw_output=a))

    def prefix(self) -> Prefix:
        s = self.start.source
        return Prefix(env=s.env, task_id=s.task_id, task=s.task, observation=self.observation,
                      history=list(self.steps), info=self.info, sample=self.sample, seed=s.seed)

    def advance(self, c: Candidate) -> bool:
        """Apply one action; True when the episode ended."""
        obs, reward, done, info = self.env.step(c.action)
        self.steps.append(Step(observation=self.observation, action=c.action, reason=c.reason,
                               raw_output=c.raw_output, reward=reward, done=done,
                               info=step_info(self.info, info, c)))
        self.observation, self.info = obs, info
        return done

    def trajectory(self, agent: str, termination: str | None = None, error: str | None = None) -> Trajectory:
        s, info = self.start.source, self.info
        if termination is None:
            termination = "success" if info.get("won") else "max_steps" if info.get("truncated") else "failure"
        meta = {"prefix_of": s.id, "prefix_len": len(self.start.actions)}
        if self.start.tag:
            meta["tag"] = self.start.tag
        return Trajectory(id=Trajectory.new_id(), env=s.env, task_id=s.task_id, sample=self.sample, task=s.task,
                          split=s.split, seed=s.seed, agent=agent, steps=self.steps,
                          final_observation=self.observation, success=bool(info.get("won")),
                          score=float(info.get("score", 0.0)), termination=termination, error=error, meta=meta)


def complete(env_spec: EnvSpec, agent: Agent, starts: Sequence[Start], n: int,
             batch_size: int = 256) -> list[Trajectory]:
    """`n` completions by `agent` from every start (module docstring), one agent call per step for the whole
    batch in flight. An agent error ends the completions of that batch with `agent_error` (recorded)."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    work = [(st, j) for st in starts for j in range(n)]
    name = agent.describe()
    envs = [env_spec.make() for _ in range(min(batch_size, len(work)))]
    out: list[Trajectory] = []
    try:
        for first in range(0, len(work), batch_size):
            live = [_Live(envs[i], st, j) for i, (st, j) in enumerate(work[first : first + batch_size])]
            live, done = [x for x in live if not x.env.done], [x for x in live if x.env.done]
            out += [x.trajectory(name) for x in done]
            while live:
                try:
                    cands = agent.act([x.prefix() for x in live], 1)
                except AgentError as e:
                    out += [x.trajectory(name, "agent_error", f"{type(e).__name__}: {e}") for x in live]
                    break
                still = []
                for x, c in zip(live, cands, strict=True):
                    if x.advance(c[0]):
                        out.append(x.trajectory(name))
                    else:
                        still.append(x)
                live = still
    finally:
        for e in envs:
            e.close()
    return out


def shepherd_starts(sources: Sequence[Trajectory]) -> list[Start]:
    """The starts Math-Shepherd needs: every inner prefix k = 1..T−1 of every source (the last step's
    evidence is the trajectory's own outcome)."""
    return [Start(src, tuple(src.actions[:k])) for src in sources for k in range(1, len(src.steps))]


def train_on_examples(examples: Sequence[StepwiseExample], backbone: str | Path, out_dir: str | Path, *,
                      max_steps: int, learning_rate: float, batch_size: int, seed: int = 0,
                      loss: str = "bce") -> tuple[ProcessRewardModel, dict[str, Any]]:
    """Train a scalar-head PRM on `backbone` with proctor's trainer (`proctor prm train`'s code path, the data
    written as a stepwise JSONL file first); returns the PRM and {train_loss, steps, seconds}."""
    out_dir = Path(out_dir)
    data = write_stepwise(examples, out_dir / "train.jsonl")
    cfg = PRMTrainConfig.model_validate({
        "model": {"backbone": str(backbone), "head": "scalar", "dtype": "float32"},
        "loss": loss,
        "seed": seed,
        "data": {"train": str(data)},
        "training": {"output_dir": str(out_dir / "prm"), "max_steps": max_steps, "learning_rate": learning_rate,
                     "per_device_train_batch_size": batch_size, "lr_scheduler_type": "cosine",
                     "warmup_steps": max(1, max_steps // 20), "weight_decay": 0.0, "logging_steps": 50,
                     "save_strategy": "no", "use_cpu": True, "disable_tqdm": True},
    })
    start = time.perf_counter()
    prm, result, _ = train_prm(cfg)
    return prm, {"train_loss": result.training_loss, "steps": result.global_step,
                 "seconds": round(time.perf_counter() - start, 1)}


def add_training_args(p: argparse.ArgumentParser) -> None:
    """The backbone, PRM training and run options both experiments take."""
    p.add_argument("--backbone", type=Path, default=None, help="an existing model folder (default: build one)")
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--max-steps", type=int, default=600)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--work", type=Path, default=None, help="keep models and data here (default: a temp dir)")
    p.add_argument("--progress", action="store_true", help="show rollout progress bars")


def run_in_workdir(run: Callable[[argparse.Namespace, Path], dict[str, Any]], args: argparse.Namespace
                   ) -> dict[str, Any]:
    """Run the experiment in `--work` (or a temporary folder) and print its JSON result."""
    if args.work is not None:
        args.work.mkdir(parents=True, exist_ok=True)
        result = run(args, args.work)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            result = run(args, Path(tmp))
    print(json.dumps(result, indent=2))
    return result

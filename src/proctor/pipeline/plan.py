"""`plan_stages(cfg)`: the stages `proctor run CONFIG` runs, in the loop's order, without running any
(`proctor run CONFIG --dry-run`).

Each planned stage has the key its record gets in `manifest.json` (`model`, `demos`, `iter-0/sft`,
`iter-<k>/rollouts`, `iter-<k>/eval/<name>`, ...), its iteration, what it runs (env, split, tasks, samples;
or the trainer and its size), the model it starts from or acts with (π_k: `iter-<k>/policy`; Q_k:
`iter-<k>/prm`) and its output folder. It follows `proctor.pipeline.run.Pipeline.run` stage for stage; the
slow tests check that a run records exactly the planned keys.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from proctor.pipeline.config import (
    BonDistillSection,
    EvalEntry,
    LikelihoodPRMSection,
    PipelineConfig,
    TaskSection,
)
from proctor.pipeline.run import _slug


@dataclasses.dataclass(frozen=True)
class PlannedStage:
    """One stage of the loop, as `proctor run --dry-run` prints it."""

    key: str
    iteration: int
    runs: str
    model: str
    out: Path

    def line(self, width: int = 26) -> str:
        """One line: the key (padded to `width`), the iteration, what it runs | with which model → where."""
        return f"{self.key:<{width}} iteration {self.iteration}  {self.runs}  | {self.model}  → {self.out}"


def split_sizes(cfg: PipelineConfig) -> dict[str, int]:
    """{split: number of tasks} of the config's env (builds the env: its data must be there)."""
    from proctor.envs.registry import EnvSpec

    env = EnvSpec(cfg.env, dict(cfg.env_kwargs)).make()
    try:
        return {split: len(env.task_ids(split)) for split in env.splits()}
    finally:
        env.close()


def describe_tasks(cfg: PipelineConfig, section: TaskSection, sizes: Mapping[str, int] | None = None,
                   first: int | None = None, samples: int | None = None) -> str:
    """'ENV SPLIT: N tasks (how chosen) × K samples'; `sizes` (`split_sizes`) gives the split's task count,
    `first` takes the first N of the section's tasks (an evaluation entry's `tasks`)."""
    tasks = section.task_ids()
    total = (sizes or {}).get(section.split)
    if isinstance(tasks, list):
        n = len(tasks[:first]) if first else len(tasks)
        how = f"of panel {section.panel}" if section.panel is not None else "listed"
        text = f"{n} tasks {how}"
    else:
        n = min(x for x in (tasks, first, total) if x is not None) if (tasks or first or total) else None
        if tasks is None and first is None:
            text = f"all {total} tasks" if total is not None else "all tasks"
        else:
            text = f"first {n} task{'s' if n != 1 else ''}" + (f" of {total}" if total is not None else "")
    k = section.samples if samples is None else samples
    return f"{cfg.env} {section.split}: {text} × {k} sample{'s' if k != 1 else ''}"


def describe_agent(agent: Any, policy: str, prm: str | None) -> str:
    """An agent or search config in a few words, `$policy` and `$prm` named (π_k, Q_j)."""
    if isinstance(agent, str):
        return {"$policy": policy, "$prm": prm or "$prm"}.get(agent, agent)
    if not isinstance(agent, Mapping):
        return str(agent)
    kind = agent.get("kind") or agent.get("method") or "?"
    parts = []
    for key in ("model", "expert", "n", "beams", "expansions", "temperature", "base", "agent", "prm"):
        if key in agent and agent[key] is not None:
            value = agent[key]
            text = describe_agent(value, policy, prm) if isinstance(value, (Mapping, str)) else str(value)
            parts.append(text if key in ("model", "expert") else f"{key}={text}")
    return f"{kind}({', '.join(parts)})"


def plan_stages(cfg: PipelineConfig, sizes: Mapping[str, int] | None = None) -> list[PlannedStage]:
    """The stages `run_pipeline(cfg)` runs, in order (see module docstring); `sizes` (`split_sizes`) adds the
    splits' task counts to the descriptions."""
    out = Path(cfg.out)
    stages: list[PlannedStage] = []

    def add(key: str, iteration: int, runs: str, model: str, folder: Path) -> None:
        stages.append(PlannedStage(key, iteration, runs, model, folder))

    if cfg.model.tiny is not None:
        add("model", 0, "build a tiny model", f"tiny {cfg.model.tiny}", out / "model")
        start = f"the tiny model ({out / 'model'})"
    else:
        start = str(cfg.model.path)
    add("demos", 0, describe_tasks(cfg, cfg.demos, sizes), describe_agent(cfg.demos.agent, "π0", None), out / "demos")
    add("iter-0/sft", 0, f"SFT, {cfg.sft.steps} steps on the demonstrations", f"{start} → π0", out / "iter-0" / "policy")
    agent = {**cfg.policy_agent, "model": "$policy"}
    prm: str | None = None
    for k in range(cfg.iterations + 1):
        pi = f"π{k}"
        if k < cfg.iterations or cfg.iterations == 0:
            it = out / f"iter-{k}"
            add(f"iter-{k}/rollouts", k, describe_tasks(cfg, cfg.rollout, sizes), describe_agent(agent, pi, None),
                it / "rollouts")
            if cfg.prm_candidates is None:
                params = "".join(f", {key}={value}" for key, value in (cfg.targets.params or {}).items())
                add(f"iter-{k}/targets", k, f"{cfg.targets.method} targets of {pi}'s rollouts{params}", "-",
                    it / "targets")
            else:
                completer = describe_agent(cfg.prm_candidates.agent or agent, pi, None)
                add(f"iter-{k}/candidates", k, f"candidate actions at {cfg.prm_candidates.per_source or 'all'} "
                    f"states of each rollout, {cfg.prm_candidates.completions} completions each", completer,
                    it / "candidates")
                add(f"iter-{k}/candidate-pairs", k, f"Bradley–Terry pairs at margin {cfg.prm_candidates.margin}",
                    "-", it / "candidate-pairs")
            if isinstance(cfg.prm, LikelihoodPRMSection):
                anchor = {"$demos": "the demonstrations", "$rollouts": f"{pi}'s rollouts"}.get(
                    str(cfg.prm.anchor), str(cfg.prm.anchor))
                what = f"likelihood PRM, {cfg.prm.steps} steps" + (f", anchored on {anchor}" if cfg.prm.anchor else "")
                start_prm = pi
            else:
                what = f"PRM head ({cfg.prm.model.head}, loss {cfg.prm.loss or 'default'})"
                start_prm = {"$policy": pi, "$model": start}.get(cfg.prm.model.backbone, cfg.prm.model.backbone)
            prm = f"Q{k}"
            add(f"iter-{k}/prm", k, what, f"{start_prm} → {prm}", it / "prm")
        for entry in cfg.evaluate.entries:
            if entry.iterations is None or k in entry.iterations:
                stages.append(_eval_stage(cfg, entry, k, pi, prm, sizes))
        watched = cfg.monitored_entry() if cfg.monitor is not None else None
        if watched is not None and prm is not None and (watched.iterations is None or k in watched.iterations):
            add(f"iter-{k}/monitor", k, f"MC re-labels of {cfg.monitor.states} actions of {watched.name!r}, "
                f"{cfg.monitor.completions} completions each", f"{pi} completes; {prm} scored", out / f"iter-{k}" /
                "monitor")
        if k < cfg.iterations:
            improve = cfg.improve
            if isinstance(improve, BonDistillSection):
                states = {"$rollouts": f"{pi}'s rollouts"}.get(str(improve.states_from), str(improve.states_from))
                init = {"$prm": f"{prm}'s LM", "$policy": pi}.get(str(improve.init), str(improve.init or pi))
                what = (f"best-of-{improve.n} distillation into {init}, {improve.epochs} epochs on up to "
                        f"{improve.max_states or 'all'} states of {states}")
            else:
                tasks = improve.values(cfg, {}).get("tasks")
                tasks = ("all" if tasks is None else f"{len(tasks)}" + (f" of panel {improve.panel}" if improve.panel
                                                                       else " listed") if isinstance(tasks, list)
                         else f"the first {tasks}")
                states = f", iteration 1's states from {improve.states_from}" if improve.states_from else ""
                what = (f"online DPO, {improve.iterations} iteration(s) of {improve.rollouts_per_task} rollout(s) "
                        f"on {cfg.env} {improve.split} tasks: {tasks}{states}")
            add(f"iter-{k}/improve", k, what, f"{pi} against {prm} → π{k + 1}", out / f"iter-{k + 1}" / "policy")
    return stages


def _eval_stage(cfg: PipelineConfig, entry: EvalEntry, k: int, pi: str, prm: str | None,
                sizes: Mapping[str, int] | None) -> PlannedStage:
    method = entry.agent if entry.agent is not None else entry.search
    return PlannedStage(f"iter-{k}/eval/{_slug(entry.name)}", k,
                        f"evaluate {entry.name!r} on " + describe_tasks(cfg, entry.section(cfg.evaluate), sizes,
                                                                          first=None if entry.panel else entry.tasks),
                        describe_agent(method, pi, prm), Path(cfg.out) / f"iter-{k}" / "eval" / _slug(entry.name))

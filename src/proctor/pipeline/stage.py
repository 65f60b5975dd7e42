"""`Stage`: one stage of `proctor run` as an object — its key in `manifest.json`, its typed config, the library
call that runs it in this process, the files that mark it done, how it is described in the plan, and whether it
trains (a training stage may run in several processes: `proctor.pipeline.launch`).

`Pipeline.stages` (`proctor.pipeline.run`) yields the loop's stages in order; `proctor run` runs them and
`proctor run --dry-run` prints them, so the plan and the run are one loop. Every stage's exact command is
`proctor run RUN/config.yaml --stage KEY` (`stage_command`): run by hand, from a SLURM script or under
`torchrun`, it records the stage in the same run folder's manifest.
"""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel

#: the resolved loop config a run writes into its folder; every stage's command reads it
RUN_CONFIG = "config.yaml"


@dataclasses.dataclass
class Stage:
    """One stage of the loop (see module docstring). `config()` builds its typed config (when it is about to run:
    a config may check that its inputs exist); `run(config)` is the stage's library call; `result` sums up what it
    returned for the manifest; `serves`: the policy a served generator must follow first (a stage that samples
    from π_k); `trains`: a stage that trains a model (the served generator is stopped first, and the `launch`
    section may run it in several processes); `scores`: the PRM a served PRM must follow first (an evaluation
    that ranks or scores with Q_k); `name`: its family (`sft`, `prm`, `eval`, ...; default: its key)."""

    key: str
    iteration: int
    runs: str
    model: str
    out: Path
    config: Callable[[], BaseModel | dict[str, Any] | None]
    inputs: list[Path]
    outputs: list[Path]
    run: Callable[[Any], Any]
    result: Callable[[Any], dict[str, Any]] = lambda _: {}
    trains: bool = False
    serves: Path | None = None
    scores: Path | None = None
    name: str = ""

    def __post_init__(self) -> None:
        self.name = self.name or self.key  # what the stage is reported as (`sft`, `prm`, `eval`, ...)

    def line(self, width: int = 26) -> str:
        """One line: the key (padded to `width`), the iteration, what it runs | with which model → where."""
        return f"{self.key:<{width}} iteration {self.iteration}  {self.runs}  | {self.model}  → {self.out}"


def stage_command(run_dir: Path, key: str, launcher: list[str] | None = None) -> str:
    """The shell command that runs stage `key` of the run in `run_dir` (under `launcher`: its words up to and with
    the program, e.g. `torchrun ... -m proctor`)."""
    words = [*(launcher or ["proctor"]), "run", str(Path(run_dir) / RUN_CONFIG), "--stage", key]
    return shlex.join(words)


def slug(name: str) -> str:
    """`name` as a folder name (an evaluation entry's folder)."""
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in name).strip("-") or "policy"


def split_sizes(env: str, env_kwargs: Mapping[str, Any]) -> dict[str, int]:
    """{split: number of tasks} of the env (builds the env: its data must be there)."""
    from proctor.envs.registry import EnvSpec

    built = EnvSpec(env, dict(env_kwargs)).make()
    try:
        return {split: len(built.task_ids(split)) for split in built.splits()}
    finally:
        built.close()


def describe_tasks(env: str, section: Any, sizes: Mapping[str, int] | None = None, first: int | None = None,
                   samples: int | None = None) -> str:
    """'ENV SPLIT: N tasks (how chosen) × K samples' of a `TaskSection`; `sizes` (`split_sizes`) gives the split's
    task count, `first` takes the first N of the section's tasks (an evaluation entry's `tasks`)."""
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
    return f"{env} {section.split}: {text} × {k} sample{'s' if k != 1 else ''}"


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

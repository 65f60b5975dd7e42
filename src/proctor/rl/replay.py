"""A fixed-capacity replay buffer of agent transitions in columnar form (ArCHer's off-policy critic data).

One transition per agent step: the state's prompt ids (the one renderer, as the agent saw it), the token ids
the policy generated for its action and their sampling log-probs, the env's reward, `terminated` (the episode
reached a terminal state: no value beyond it) and `truncated` (cut by the step limit: targets bootstrap), and
the next state's prompt ids. Columns are plain lists; when full, the oldest transition is overwritten.
`save`/`load` write one parquet file (pyarrow; no pickles), the write position in its metadata.

    buffer = ReplayBuffer(10_000)
    slots = buffer.add(transitions(tokenizer, trajs, prompt_cfg, iteration=1))
    batch = buffer.sample(64, torch.Generator().manual_seed(0))   # uniform, with replacement
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import torch

from proctor.prompts import PromptConfig, prefix_at
from proctor.rl.pairs import prompt_ids
from proctor.rl.step_rows import step_row
from proctor.trajectory import Trajectory


@dataclass
class ReplayTransition:
    """One agent step (see module docstring)."""

    prompt_ids: list[int]
    action_ids: list[int]
    logprobs: list[float]
    reward: float
    terminated: bool
    truncated: bool
    next_prompt_ids: list[int]
    action: str = ""
    trajectory: str = ""
    step: int = 0
    iteration: int = 0


COLUMNS = tuple(f.name for f in fields(ReplayTransition))


def transitions(tokenizer: Any, trajs: Sequence[Trajectory], cfg: PromptConfig | None, iteration: int = 0
                ) -> list[ReplayTransition]:
    """Every step of `trajs` as a transition; a step without the policy's token ids is an error."""
    out = []
    for traj in trajs:
        rows = [step_row(tokenizer, traj, t, cfg) for t in range(len(traj.steps))]
        nexts = [r.prompt_ids for r in rows[1:]] + [prompt_ids(tokenizer, prefix_at(traj, len(traj.steps)), cfg)]
        for t, (step, row, nxt) in enumerate(zip(traj.steps, rows, nexts, strict=True)):
            out.append(ReplayTransition(row.prompt_ids, row.completion_ids, list(step.logprobs or []), float(step.reward),
                                  step.terminated, step.truncated, nxt, step.action, traj.id, t, iteration))
    return out


class ReplayBuffer:
    """Fixed-capacity columnar buffer of `ReplayTransition`s (see module docstring)."""

    def __init__(self, capacity: int):
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self.columns: dict[str, list[Any]] = {c: [] for c in COLUMNS}
        self.position = 0  # the slot the next transition overwrites once the buffer is full

    def __len__(self) -> int:
        return len(self.columns["reward"])

    def add(self, items: Sequence[ReplayTransition]) -> list[int]:
        """Append (or, when full, overwrite the oldest); returns the slots written, in order."""
        slots = []
        for item in items:
            row = asdict(item)
            if len(self) < self.capacity:
                slot = len(self)
                for c in COLUMNS:
                    self.columns[c].append(row[c])
            else:
                slot = self.position
                self.position = (self.position + 1) % self.capacity
                for c in COLUMNS:
                    self.columns[c][slot] = row[c]
            slots.append(slot)
        return slots

    def take(self, slots: Sequence[int]) -> list[ReplayTransition]:
        return [ReplayTransition(**{c: self.columns[c][i] for c in COLUMNS}) for i in slots]

    def sample(self, n: int, generator: torch.Generator) -> list[ReplayTransition]:
        """`n` transitions drawn uniformly with replacement (ArCHer's sampling), reproducible by `generator`."""
        if not len(self):
            raise ValueError("sampling from an empty replay buffer")
        return self.take(torch.randint(len(self), (n,), generator=generator).tolist())

    def save(self, path: str | os.PathLike) -> Path:
        """One parquet file with a column per field; capacity and write position in the schema metadata."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        meta = {"proctor.replay": json.dumps({"capacity": self.capacity, "position": self.position})}
        table = pa.table({c: self.columns[c] for c in COLUMNS}).replace_schema_metadata(meta)
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, out)
        return out

    @classmethod
    def load(cls, path: str | os.PathLike) -> ReplayBuffer:
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        meta = (table.schema.metadata or {}).get(b"proctor.replay")
        if meta is None or set(table.column_names) != set(COLUMNS):
            raise ValueError(f"{path}: not a replay buffer saved by proctor (columns {table.column_names})")
        info = json.loads(meta)
        buffer = cls(info["capacity"])
        buffer.columns = {c: table.column(c).to_pylist() for c in COLUMNS}
        buffer.position = info["position"]
        return buffer

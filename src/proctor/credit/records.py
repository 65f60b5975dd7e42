"""The labelled records every estimator emits, each with its provenance.

Every record names the trajectory and step it came from (so the PRM stage can re-render the prefix from
the trajectory: task, history, observation), the method, and the method's parameters as JSON. Records are
slotted dataclasses (a million of them are cheap); `to_row()` gives the flat dict written to Parquet.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from pydantic import BaseModel


def params_json(cfg: BaseModel) -> str:
    """A method's parameters as canonical JSON (stored with every record)."""
    return json.dumps(cfg.model_dump(mode="json"), sort_keys=True)


class _Row:
    __slots__ = ()
    KIND: ClassVar[str]
    _FIELDS: ClassVar[tuple[str, ...]]

    def to_row(self) -> dict[str, Any]:
        row = {f: getattr(self, f) for f in self._FIELDS}
        row["kind"] = self.KIND
        return row


def _finish(cls):
    cls._FIELDS = tuple(f.name for f in fields(cls))
    return cls


@_finish
@dataclass(slots=True)
class LabelledStep(_Row):
    """One step of one trajectory with its target.

    `target` is the training label (e.g. the normalised Q̃ ∈ [0,1] for mc-q); `extra` holds the related
    quantities (e.g. `q` on the ±1 scale); `visits` is the number of samples the target averages over
    (occurrences of the (s, a) pair, of the state, completions, or the group size, per method).
    """

    KIND: ClassVar[str] = "step"
    trajectory_id: str
    task_id: str
    env: str
    split: str
    step: int
    state_key: str
    action: str
    reason: str | None
    target: float
    visits: int
    method: str
    params: str
    extra: dict[str, float] = field(default_factory=dict)

    @property
    def label(self) -> float:
        return self.target


@_finish
@dataclass(slots=True)
class PreferencePair(_Row):
    """Two actions taken at the same state, `chosen` with Q̂ above `rejected`'s by more than δ.

    (trajectory_id, step) is an occurrence of (state, chosen); (rejected_trajectory_id, rejected_step) of
    (state, rejected); both prefixes are the same state. Q values are on the ±1 scale.
    """

    KIND: ClassVar[str] = "preference"
    trajectory_id: str
    task_id: str
    env: str
    split: str
    step: int
    state_key: str
    chosen: str
    chosen_reason: str | None
    rejected: str
    rejected_reason: str | None
    q_chosen: float
    q_rejected: float
    visits_chosen: int
    visits_rejected: int
    rejected_trajectory_id: str
    rejected_step: int
    method: str
    params: str

    @property
    def label(self) -> float:
        return self.q_chosen - self.q_rejected

    @property
    def visits(self) -> int:
        return min(self.visits_chosen, self.visits_rejected)


@_finish
@dataclass(slots=True)
class Transition(_Row):
    """An inverse-PRM transition (s, a, s', a', terminal, label) (docs/methods.md §5).

    s = prefix of `trajectory_id` up to `step`, a = its action; s' = the prefix up to `step + 1` and
    a' = `next_action` (re-sampled from the policy for expert data). Terminal transitions have no s', a'.
    """

    KIND: ClassVar[str] = "transition"
    trajectory_id: str
    task_id: str
    env: str
    split: str
    step: int
    state_key: str
    action: str
    next_state_key: str | None
    next_action: str | None
    terminal: bool
    label: float
    source: str
    method: str
    params: str

    @property
    def visits(self) -> int:
        return 1


@_finish
@dataclass(slots=True)
class ProgressExample(_Row):
    """SPA progress-estimator input: one trajectory, a score at the end of each turn, one outcome.

    `turns` are the step indices whose last token carries a progress score ĉ_k; only their sum is
    supervised, towards `outcome` (docs/methods.md §6).
    """

    KIND: ClassVar[str] = "progress"
    trajectory_id: str
    task_id: str
    env: str
    split: str
    turns: list[int]
    outcome: float
    method: str
    params: str

    @property
    def label(self) -> float:
        return self.outcome

    @property
    def visits(self) -> int:
        return 1

    @property
    def state_key(self) -> str:
        return self.trajectory_id


Record = LabelledStep | PreferencePair | Transition | ProgressExample

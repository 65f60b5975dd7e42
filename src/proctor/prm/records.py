"""Training data of the pairwise, progress, value and inverse-PRM objectives (`proctor.prm.objectives`).

- `PairExample`: a shared state (prompt + earlier steps) and two candidate last steps, chosen and rejected
  (AgentPRM's relative loss, docs/methods.md §1.3/§7.2); JSON/JSONL files via `read_pairs`.
- `examples_from_records`: the records of `proctor targets` (`targets.parquet`, `proctor.credit.records`)
  rendered from the trajectories they name with the shared prompt renderer:
  step records → one example per trajectory with the targets as labels; progress records → one example
  per trajectory with the outcome (SPA); preference records → `PairExample`s; transition records →
  examples read by the `td_bce` objective (a label on step k is the transition k → k+1 of the same
  example, terminal when step k is the example's last). A rollout's own transitions share one example;
  an expert transition with a re-sampled a' gets its own, ending with a' at s'.
- `trajectory_rows`: the same step (or progress) records read off `Step.targets` of stored trajectories.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from proctor.prm.data import DataError, StepwiseExample, read_json_records
from proctor.prm.rendering import render_states, render_trajectory
from proctor.prompts.render import PromptConfig
from proctor.trajectory import Trajectory


class PairExample(BaseModel):
    """Two candidate last steps at one state: `prompt` + `history` (earlier steps, scored but not
    supervised), then `chosen` or `rejected`."""

    model_config = ConfigDict(extra="forbid")

    prompt: str
    history: list[str] = Field(default_factory=list)
    chosen: str
    rejected: str
    id: str | None = None
    meta: dict[str, Any] = Field(default_factory=dict)

    def branches(self) -> tuple[StepwiseExample, StepwiseExample]:
        """The chosen and the rejected solution, labelled 1 and 0 at their last step."""
        unlabelled: list[float | None] = [None] * len(self.history)
        return tuple(  # type: ignore[return-value]
            StepwiseExample(
                prompt=self.prompt,
                completions=[*self.history, step],
                labels=[*unlabelled, label],
                id=f"{self.id}:{name}",
            )
            for name, step, label in (("chosen", self.chosen, 1.0), ("rejected", self.rejected, 0.0))
        )


def read_pairs(path: str | Path) -> list[PairExample]:
    """Preference pairs from a JSON or JSONL file; errors name the file, the row and the field."""
    out = []
    for i, rec in enumerate(read_json_records(path), 1):
        if not isinstance(rec, dict):
            raise DataError(f"{path}:{i}: expected a JSON object, got {type(rec).__name__}")
        try:
            out.append(PairExample.model_validate(rec))
        except ValidationError as e:
            fields = "; ".join(f"field '{'.'.join(map(str, x['loc']))}': {x['msg']}" for x in e.errors())
            raise DataError(f"{path}:{i}: {fields}") from None
    return out


def read_targets(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The rows of a `targets.parquet` (or of the folder `proctor targets --out` wrote)."""
    import pyarrow.parquet as pq

    path = Path(path)
    if path.is_dir():
        path = path / "targets.parquet"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no targets file (run `proctor targets` first)")
    return pq.read_table(path).to_pylist()


def load_trajectory_index(paths: Iterable[str | os.PathLike]) -> dict[str, Trajectory]:
    """Trajectories by id from stores / Parquet files / saved datasets; a duplicated id is an error."""
    from proctor.credit.io import load_trajectories

    index: dict[str, Trajectory] = {}
    for p in paths:
        for t in load_trajectories(p):
            if t.id in index:
                raise DataError(f"{p}: trajectory id {t.id!r} appears twice among data.trajectories")
            index[t.id] = t
    return index


def trajectory_rows(
    trajs: Sequence[Trajectory], target: str | None, allow_missing: bool
) -> list[dict[str, Any]]:
    """Step records from `Step.targets[target]`, or (no target) one progress record per trajectory with
    its score as the outcome."""
    if target is None:
        return [{"kind": "progress", "trajectory_id": t.id, "outcome": t.score} for t in trajs]
    rows = []
    for t in trajs:
        for k, step in enumerate(t.steps):
            if target in step.targets:
                rows.append(
                    {"kind": "step", "trajectory_id": t.id, "step": k, "target": step.targets[target]}
                )
            elif not allow_missing:
                raise DataError(
                    f"trajectory {t.id} step {k}: no target {target!r} (has {sorted(step.targets)})"
                )
    return rows


Renderer = Callable[[Trajectory, Sequence[float | None]], StepwiseExample]


def examples_from_records(
    tokenizer: Any,
    rows: Sequence[dict[str, Any]],
    trajs: dict[str, Trajectory],
    marker: str = "<|step|>",
    cfg: PromptConfig | None = None,
    score_at: str = "action",
) -> list[StepwiseExample] | list[PairExample]:
    """Examples from credit records of one kind (module docstring), rendered from `trajs` (id → trajectory)."""
    if not rows:
        raise DataError("no target records")
    kinds = {r.get("kind") for r in rows}
    if len(kinds) != 1:
        raise DataError(f"target records of several kinds {sorted(map(str, kinds))}; use one kind per file")
    [kind] = kinds
    renderer = render_states if score_at == "state" else render_trajectory

    def render(t: Trajectory, labels: Sequence[float | None]) -> StepwiseExample:
        return renderer(tokenizer, t, labels, cfg, marker)

    if kind == "step":
        return _step_examples(rows, trajs, render)
    if kind == "progress":
        return [
            render(_traj(trajs, r, i), [None] * len(_traj(trajs, r, i).steps)).model_copy(
                update={"outcome": float(r["outcome"])}
            )
            for i, r in enumerate(rows)
        ]
    if score_at != "action":
        raise DataError(f"{kind!r} records score actions; data.score_at must be 'action'")
    if kind == "preference":
        return [_pair(trajs, r, i, render) for i, r in enumerate(rows)]
    if kind == "transition":
        return _transition_examples(rows, trajs, render)
    raise DataError(f"target records of kind {kind!r} are not PRM training data")


def _traj(
    trajs: dict[str, Trajectory], row: dict[str, Any], i: int, key: str = "trajectory_id"
) -> Trajectory:
    t = trajs.get(row[key])
    if t is None:
        raise DataError(f"target record {i}: {key} {row[key]!r} is not in data.trajectories")
    return t


def _upto(traj: Trajectory, n: int) -> Trajectory:
    return traj.model_copy(update={"steps": traj.steps[:n]})


def _step_examples(rows: Sequence[dict[str, Any]], trajs: dict[str, Trajectory], render: Renderer):
    labels: dict[str, list[float | None]] = {}
    for i, r in enumerate(rows):
        t = _traj(trajs, r, i)
        row = labels.setdefault(t.id, [None] * len(t.steps))
        k = r["step"]
        if not 0 <= k < len(row) or row[k] is not None:
            raise DataError(f"target record {i}: step {k} of trajectory {t.id!r} is out of range or repeated")
        row[k] = float(r["target"])
    return [render(trajs[tid], lab) for tid, lab in labels.items()]


def _pair(trajs: dict[str, Trajectory], r: dict[str, Any], i: int, render: Renderer) -> PairExample:
    c = render(_upto(_traj(trajs, r, i), r["step"] + 1), [None] * (r["step"] + 1))
    rej_traj = _upto(_traj(trajs, r, i, "rejected_trajectory_id"), r["rejected_step"] + 1)
    rej = render(rej_traj, [None] * (r["rejected_step"] + 1))
    if c.prompt != rej.prompt or c.completions[:-1] != rej.completions[:-1]:
        raise DataError(f"target record {i}: the chosen and rejected prefixes render differently")
    return PairExample(
        prompt=c.prompt,
        history=c.completions[:-1],
        chosen=c.completions[-1],
        rejected=rej.completions[-1],
        id=f"{r['trajectory_id']}:{r['step']}>{r['rejected_trajectory_id']}:{r['rejected_step']}",
    )


def _transition_examples(
    rows: Sequence[dict[str, Any]], trajs: dict[str, Trajectory], render: Renderer
) -> list[StepwiseExample]:
    own: dict[str, dict[int, float]] = {}
    out = []
    for i, r in enumerate(rows):
        t, k = _traj(trajs, r, i), r["step"]
        last = len(t.steps) - 1
        if not 0 <= k <= last or bool(r["terminal"]) != (k == last):
            raise DataError(
                f"target record {i}: step {k} of {t.id!r} ({last + 1} steps), terminal={r['terminal']}"
            )
        if r["terminal"] or r["next_action"] == t.steps[k + 1].action:
            own.setdefault(t.id, {})[k] = float(r["label"])
            continue
        swapped = t.steps[k + 1].model_copy(update={"action": r["next_action"], "reason": None})
        resampled = t.model_copy(update={"steps": [*t.steps[: k + 1], swapped]})
        out.append(render(resampled, [None] * k + [float(r["label"]), None]))
    for tid, labelled in own.items():
        t = trajs[tid]
        n = min(len(t.steps), max(labelled) + 2)
        out.append(render(_upto(t, n), [labelled.get(k) for k in range(n)]))
    return out

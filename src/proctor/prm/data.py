"""PRM training data: the stepwise record every importer produces, and proctor's own stepwise files.

The one in-memory format is `StepwiseExample`, TRL's stepwise format `{"prompt", "completions", "labels"}`
(docs/methods.md §7.3) with float labels (a bool label is 0.0 / 1.0; `None` marks a step that is scored but not
supervised) and an optional trajectory `outcome` (the SPA progress-sum loss, §6, supervises only that).
`read_stepwise` / `write_stepwise` read and write JSON / JSONL files of them (bool or float labels). Other
datasets' formats (Math-Shepherd, PRM800K, ProcessBench) are read by `proctor.prm.importers`; agent trajectories
become stepwise examples in `proctor.prm.rendering`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from proctor.renames import moved_names


class DataError(ValueError):
    """A record that cannot be read as PRM data; the message names the source, the row and the field."""


class StepwiseExample(BaseModel):
    """One solution or trajectory: a prompt, its steps, and one label per step."""

    model_config = ConfigDict(extra="forbid")

    prompt: str
    completions: list[str] = Field(min_length=1)
    labels: list[float | None]
    outcome: float | None = Field(default=None, description="trajectory outcome R (SPA progress-sum loss)")
    id: str | None = None
    meta: dict[str, Any] = Field(default_factory=dict)

    @field_validator("labels", mode="before")
    @classmethod
    def _bool_to_float(cls, v: Any) -> Any:
        if isinstance(v, list):
            return [float(x) if isinstance(x, bool) else x for x in v]
        return v

    @model_validator(mode="after")
    def _aligned(self) -> StepwiseExample:
        if len(self.labels) != len(self.completions):
            raise ValueError(f"{len(self.completions)} completions but {len(self.labels)} labels")
        return self

    @property
    def num_steps(self) -> int:
        return len(self.completions)

    def to_trl(self) -> dict[str, Any]:
        """The TRL stepwise record (bool labels when every label is 0/1, else floats)."""
        if any(x is None for x in self.labels):
            raise DataError(f"example {self.id!r}: TRL's format has no unlabelled steps")
        hard = all(x in (0.0, 1.0) for x in self.labels)
        labels = [bool(x) for x in self.labels] if hard else list(self.labels)
        return {"prompt": self.prompt, "completions": list(self.completions), "labels": labels}


def _describe(err: ValidationError) -> str:
    return "; ".join(
        f"field '{'.'.join(str(x) for x in e['loc']) or '<record>'}': {e['msg']}" for e in err.errors()
    )


def parse_stepwise(record: Any, where: str) -> StepwiseExample:
    """Validate one stepwise record; `where` (file:row) is named in the error."""
    if not isinstance(record, dict):
        raise DataError(f"{where}: expected a JSON object, got {type(record).__name__}")
    try:
        return StepwiseExample.model_validate(record)
    except ValidationError as e:
        raise DataError(f"{where}: {_describe(e)}") from None


def read_json_records(path: str | Path) -> list[Any]:
    """Records of a `.json` file (a list) or a `.jsonl` file (one object a line)."""
    path = Path(path)
    text = path.read_text()
    if path.suffix == ".jsonl":
        out = []
        for i, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise DataError(f"{path}:{i}: not valid JSON ({e.msg})") from None
        return out
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise DataError(f"{path}: not valid JSON ({e.msg} at line {e.lineno})") from None
    if not isinstance(data, list):
        raise DataError(f"{path}: expected a JSON list of records, got {type(data).__name__}")
    return data


def read_stepwise(path: str | Path) -> list[StepwiseExample]:
    """Stepwise records from a JSON or JSONL file."""
    return [parse_stepwise(r, f"{path}:{i}") for i, r in enumerate(read_json_records(path), 1)]


def write_stepwise(examples: Iterable[StepwiseExample], path: str | Path) -> Path:
    """Write examples as JSONL (the proctor stepwise format, a superset of TRL's)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        for ex in examples:
            f.write(ex.model_dump_json() + "\n")
    return path


def row_name(ex: StepwiseExample) -> str:
    """How an error names an example: its file and record (`meta["row"]`) and/or its id."""
    row = ex.meta.get("row")
    if row and ex.id is not None:
        return f"{row} (id {ex.id!r})"
    return str(row) if row else f"example {ex.id!r}"


#: the importers and the readers of their formats, moved to `proctor.prm.importers`
__getattr__ = moved_names(__name__, {name: f"proctor.prm.importers:{name}" for name in (
    "MATH_SHEPHERD_TAG", "from_math_shepherd", "from_prm800k", "from_processbench", "read_processbench", "IMPORTERS",
    "load_examples", "SCORE_FORMATS", "parse_unlabelled", "read_for_scoring")})

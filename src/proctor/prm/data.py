"""PRM training data: the stepwise record every importer produces, and the importers.

The one in-memory format is `StepwiseExample`, TRL's stepwise format `{"prompt", "completions", "labels"}`
(docs/methods.md §7.3) with float labels (a bool label is 0.0 / 1.0; `None` marks a step that is scored but not
supervised) and an optional trajectory `outcome` (the SPA progress-sum loss, §6, supervises only that).

Importers, each a pure function of parsed JSON records (errors name the source and the row):

- `read_stepwise`: JSON / JSONL files already in the stepwise format (bool or float labels).
- `from_math_shepherd`: Math-Shepherd records `{"input": "... ки ...", "label": "... + ... - ..."}`.
- `from_prm800k`: PRM800K phase-1/2 records (`question.problem`, `label.steps[*].completions[*].rating`).
- `from_processbench`: ProcessBench records (`steps`, `label` = index of the first wrong step, -1 if none).

`load_examples` reads a file in any of these formats, `read_for_scoring` one to score (labels optional).
Agent trajectories become stepwise examples in `proctor.prm.rendering`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator


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


MATH_SHEPHERD_TAG = "ки"


def from_math_shepherd(
    records: Sequence[dict[str, Any]], source: str = "math-shepherd", first_step: str = "Step 1:"
) -> list[StepwiseExample]:
    """Math-Shepherd records: `input` holds the solution with a `ки` tag after every step, `label` is the
    same text with each tag replaced by `+` (correct) or `-` (wrong). The prompt is the text before
    `first_step`; each step is the text between two tags, stripped."""
    out = []
    for i, rec in enumerate(records):
        where = f"{source}:{i}"
        inp, lab = rec.get("input"), rec.get("label")
        if not isinstance(inp, str) or not isinstance(lab, str):
            raise DataError(f"{where}: fields 'input' and 'label' must be strings")
        pieces = inp.split(MATH_SHEPHERD_TAG)
        if len(pieces) < 2:
            raise DataError(f"{where}: field 'input' has no '{MATH_SHEPHERD_TAG}' step tag")
        signs, pos = [], 0
        for piece in pieces[:-1]:
            if lab[pos : pos + len(piece)] != piece or pos + len(piece) >= len(lab):
                raise DataError(f"{where}: field 'label' does not match 'input' around character {pos}")
            sign = lab[pos + len(piece)]
            if sign not in "+-":
                raise DataError(f"{where}: field 'label' has {sign!r} where a step tag is, expected + or -")
            signs.append(sign == "+")
            pos += len(piece) + 1
        head, sep, first = pieces[0].partition(first_step)
        if not sep:
            raise DataError(f"{where}: field 'input' has no {first_step!r} before the first step tag")
        steps = [(first_step + first).strip()] + [p.strip() for p in pieces[1:-1]]
        out.append(
            StepwiseExample(
                prompt=head.strip(),
                completions=steps,
                labels=signs,
                id=str(rec.get("id", i)),
                meta={"source": source},
            )
        )
    return out


def from_prm800k(
    records: Sequence[dict[str, Any]], source: str = "prm800k", neutral_is_correct: bool = True
) -> list[StepwiseExample]:
    """PRM800K records. Each step uses the completion the labeller chose (`chosen_completion`), else the
    human-written one, else the first rated completion. Rating 1 is correct, -1 wrong, 0 neutral
    (`neutral_is_correct`). The solution stops after its first wrong step, as in the labelling."""
    out = []
    for i, rec in enumerate(records):
        where = f"{source}:{i}"
        try:
            problem = rec["question"]["problem"]
            steps = rec["label"]["steps"]
        except (KeyError, TypeError):
            raise DataError(f"{where}: needs fields 'question.problem' and 'label.steps'") from None
        texts, labels = [], []
        for k, step in enumerate(steps):
            chosen, human = step.get("chosen_completion"), step.get("human_completion")
            comps = step.get("completions") or []
            if chosen is not None:
                comp = comps[chosen]
            elif human:
                comp = human
            elif comps:
                comp = comps[0]
            else:
                raise DataError(f"{where}: field 'label.steps.{k}' has no completion")
            rating = comp.get("rating")
            if rating not in (-1, 0, 1):
                raise DataError(f"{where}: field 'label.steps.{k}.rating' is {rating!r}, expected -1, 0 or 1")
            texts.append(comp["text"])
            labels.append(rating == 1 or (rating == 0 and neutral_is_correct))
            if rating == -1:
                break
        if not texts:
            raise DataError(f"{where}: field 'label.steps' is empty")
        out.append(
            StepwiseExample(
                prompt=problem,
                completions=texts,
                labels=labels,
                id=str(rec.get("timestamp", i)),
                meta={"source": source},
            )
        )
    return out


def from_processbench(
    records: Sequence[dict[str, Any]], source: str = "processbench", through_first_error: bool = True
) -> list[StepwiseExample]:
    """ProcessBench records. `label` is the index of the first wrong step (-1 if all are correct): steps
    before it are correct, that step is wrong, and later steps are unknown. With `through_first_error`
    the solution is cut after the first wrong step (training data); otherwise every step is kept and the
    later ones are unlabelled (`None`; evaluation scores them all). `meta['first_error']` keeps the label."""
    out = []
    for i, rec in enumerate(records):
        where = f"{source}:{rec.get('id', i)}"
        steps, first = rec.get("steps"), rec.get("label")
        if not isinstance(steps, list) or not steps:
            raise DataError(f"{where}: field 'steps' must be a non-empty list")
        if not isinstance(first, int) or not -1 <= first < len(steps):
            raise DataError(
                f"{where}: field 'label' is {first!r}, expected -1 or a step index < {len(steps)}"
            )
        labels: list[float | None] = (
            [1.0] * len(steps) if first == -1 else ([1.0] * first + [0.0] + [None] * (len(steps) - first - 1))
        )
        keep = len(steps) if first == -1 or not through_first_error else first + 1
        out.append(
            StepwiseExample(
                prompt=rec.get("problem", ""),
                completions=steps[:keep],
                labels=labels[:keep],
                id=str(rec.get("id", i)),
                meta={"source": source, "first_error": first},
            )
        )
    return out


def read_processbench(path: str | Path, through_first_error: bool = False) -> list[StepwiseExample]:
    """A ProcessBench JSON file (e.g. gsm8k.json) as examples, all steps kept by default (evaluation)."""
    return from_processbench(
        read_json_records(path), source=str(path), through_first_error=through_first_error
    )


IMPORTERS = {
    "stepwise": lambda recs, src: [parse_stepwise(r, f"{src}:{i}") for i, r in enumerate(recs, 1)],
    "math_shepherd": lambda recs, src: from_math_shepherd(recs, source=src),
    "prm800k": lambda recs, src: from_prm800k(recs, source=src),
    "processbench": lambda recs, src: from_processbench(recs, source=src),
}


def load_examples(path: str | Path, fmt: str = "stepwise") -> list[StepwiseExample]:
    """Read a JSON/JSONL file in one of the formats named in `IMPORTERS`; each example's `meta["row"]` is
    `file:record` (1-based), what errors about it name."""
    if fmt not in IMPORTERS:
        raise DataError(f"unknown data format {fmt!r}; known: {sorted(IMPORTERS)}")
    if not Path(path).is_file():
        raise DataError(f"{path}: no such data file")
    return _with_rows(IMPORTERS[fmt](read_json_records(path), str(path)), path)


def _with_rows(examples: list[StepwiseExample], path: str | Path) -> list[StepwiseExample]:
    for i, ex in enumerate(examples, 1):
        ex.meta.setdefault("row", f"{path}:{i}")
    return examples


def row_name(ex: StepwiseExample) -> str:
    """How an error names an example: its file and record (`meta["row"]`) and/or its id."""
    row = ex.meta.get("row")
    if row and ex.id is not None:
        return f"{row} (id {ex.id!r})"
    return str(row) if row else f"example {ex.id!r}"


#: `proctor prm score` input formats (besides a trajectory store folder)
SCORE_FORMATS = ("stepwise", "math_shepherd", "prm800k", "processbench")


def parse_unlabelled(record: Any, where: str) -> StepwiseExample:
    """A stepwise record to score: `{"prompt", "completions"}`, with `labels` and `id` optional."""
    if isinstance(record, dict) and "labels" not in record:
        steps = record.get("completions")
        record = {**record, "labels": [None] * len(steps) if isinstance(steps, list) else []}
    return parse_stepwise(record, where)


def read_for_scoring(path: str | Path, fmt: str = "stepwise") -> list[StepwiseExample]:
    """Examples to score from a JSON/JSONL file: `stepwise` records need no labels; `processbench` keeps every
    step of every solution (the training importer cuts each after its first wrong step)."""
    if fmt not in SCORE_FORMATS:
        raise DataError(f"unknown scoring format {fmt!r}; known: {', '.join(SCORE_FORMATS)} "
                        "(or give a trajectory store folder)")
    if not Path(path).is_file():
        raise DataError(f"{path}: no such data file")
    if fmt == "stepwise":
        records = read_json_records(path)
        return _with_rows([parse_unlabelled(r, f"{path}:{i}") for i, r in enumerate(records, 1)], path)
    if fmt == "processbench":
        return _with_rows(read_processbench(path, through_first_error=False), path)
    return load_examples(path, fmt)

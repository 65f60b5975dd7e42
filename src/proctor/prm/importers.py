"""PRM data in other datasets' formats, and any data file read as `StepwiseExample`s (`proctor.prm.data`).

Importers, each a pure function of parsed JSON records (errors name the source and the row):

- `from_math_shepherd`: Math-Shepherd records `{"input": "... ки ...", "label": "... + ... - ..."}`.
- `from_prm800k`: PRM800K phase-1/2 records (`question.problem`, `label.steps[*].completions[*].rating`).
- `from_processbench`: ProcessBench records (`steps`, `label` = index of the first wrong step, -1 if none).

`load_examples` reads a file in any of these formats or proctor's stepwise one (`IMPORTERS`), `read_for_scoring`
one to score (labels optional).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from proctor.prm.data import DataError, StepwiseExample, parse_stepwise, read_json_records

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

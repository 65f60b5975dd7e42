"""The ProcessBench protocol (Zheng et al. 2024, arXiv 2412.06559) for a proctor PRM.

A ProcessBench file holds step-by-step solutions with `label` = the index of the first wrong step, -1 when
every step is correct. The protocol, per file:

1. score every step of every solution with the PRM (one forward pass per solution, `PRMScorer`);
2. predict the first step whose score is below `threshold` (-1 when none is):
   p = min{k : s_k < threshold}, or -1;
3. acc_error = mean 𝟙[p = label] over the solutions with an error (label ≥ 0), acc_correct = mean 𝟙[p = -1]
   over the fully correct ones, F1 = 2·acc_error·acc_correct / (acc_error + acc_correct)
   (`proctor.prm.metrics.processbench_f1`).

A threshold can be chosen on one file and applied to others (`sweep_threshold`: the F1-best of a grid; the
paper tunes it per PRM). The paper's summary over several files is the mean of their F1s. Solutions are read with
`proctor.prm.importers.read_processbench` (all steps kept; the problem is the prompt).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.table import Table

from proctor.prm.data import DataError, StepwiseExample
from proctor.prm.importers import read_processbench
from proctor.prm.metrics import predicted_first_error, processbench_f1


@dataclass
class ProcessBenchResult:
    """The protocol's numbers for one file (accuracies are None for a kind of solution the file lacks)."""

    name: str
    threshold: float
    n: int
    n_error: int
    n_correct: int
    acc_error: float | None
    acc_correct: float | None
    f1: float | None
    predicted: list[int] = field(repr=False)
    labels: list[int] = field(repr=False)
    ids: list[str] = field(repr=False)
    scores: list[list[float]] = field(default_factory=list, repr=False)

    def summary(self) -> dict[str, Any]:
        """The numbers without the per-solution lists."""
        return {k: v for k, v in asdict(self).items() if k not in ("predicted", "labels", "ids", "scores")}


def first_errors(step_scores: Sequence[Sequence[float]], threshold: float = 0.5) -> list[int]:
    """The predicted first wrong step of each solution: min{k : s_k < threshold}, or -1."""
    return [predicted_first_error(s, threshold) for s in step_scores]


def protocol(
    name: str,
    step_scores: Sequence[Sequence[float]],
    labels: Sequence[int],
    threshold: float = 0.5,
    ids: Sequence[str] | None = None,
) -> ProcessBenchResult:
    """Steps 2 and 3 of the protocol (module docstring) on given per-step scores; pure."""
    if len(step_scores) != len(labels):
        raise ValueError(f"{name}: {len(step_scores)} scored solutions but {len(labels)} labels")
    for i, (s, y) in enumerate(zip(step_scores, labels, strict=True)):
        if not s:
            raise ValueError(f"{name}: solution {i} has no step scores")
        if not -1 <= y < len(s):
            raise ValueError(f"{name}: solution {i} has label {y} but {len(s)} step scores")
    predicted = first_errors(step_scores, threshold)
    acc = processbench_f1(predicted, labels, partial=True)
    n_error = sum(1 for y in labels if y != -1)
    return ProcessBenchResult(
        name=name,
        threshold=threshold,
        n=len(labels),
        n_error=n_error,
        n_correct=len(labels) - n_error,
        acc_error=acc["acc_error"],
        acc_correct=acc["acc_correct"],
        f1=acc["f1"],
        predicted=predicted,
        labels=list(labels),
        ids=list(ids) if ids is not None else [str(i) for i in range(len(labels))],
        scores=[list(map(float, x)) for x in step_scores],
    )


#: thresholds `sweep_threshold` tries by default: 0.01, 0.02, ..., 0.99
THRESHOLD_GRID = tuple(round(0.01 * k, 2) for k in range(1, 100))


def sweep_threshold(step_scores: Sequence[Sequence[float]], labels: Sequence[int],
                    grid: Sequence[float] = THRESHOLD_GRID) -> tuple[float, list[tuple[float, float | None]]]:
    """The threshold of `grid` with the highest F1 on these solutions (the lowest of tied ones), and every
    (threshold, F1) tried; pure. Needs both erroneous and fully correct solutions (else F1 is undefined)."""
    if not any(y == -1 for y in labels) or not any(y != -1 for y in labels):
        raise ValueError("a threshold sweep needs both erroneous and fully correct solutions")
    curve = [(t, processbench_f1(first_errors(step_scores, t), labels, partial=True)["f1"]) for t in grid]
    best = max(curve, key=lambda tf: (tf[1], -tf[0]))
    return best[0], curve


def stratified_head(labels: Sequence[int], limit: int) -> list[int]:
    """Indices of a `limit`-solution subset that keeps the file's mix of erroneous and correct solutions
    (ProcessBench files list all erroneous solutions first): the first k_e erroneous and the first
    limit − k_e correct ones in file order, k_e = round(limit · n_error / n), kept within [1, limit − 1]
    when the file has both kinds and limit ≥ 2, so F1 stays defined."""
    if limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit}")
    err = [i for i, y in enumerate(labels) if y != -1]
    cor = [i for i, y in enumerate(labels) if y == -1]
    if limit >= len(labels):
        return list(range(len(labels)))
    k = round(limit * len(err) / len(labels))
    if err and cor and limit >= 2:
        k = min(max(k, 1), limit - 1)
    k = max(min(k, len(err)), limit - len(cor))
    return sorted(err[:k] + cor[: limit - k])


def load_solutions(path: str | Path, limit: int | None = None) -> list[StepwiseExample]:
    """The solutions of a ProcessBench file, every step kept; with `limit`, the `stratified_head` subset."""
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit}")
    if not Path(path).is_file():
        raise DataError(f"{path}: no such ProcessBench file")
    examples = read_processbench(path)
    if not examples:
        raise DataError(f"{path}: holds no solutions")
    if limit is None:
        return examples
    return [examples[i] for i in stratified_head([int(ex.meta["first_error"]) for ex in examples], limit)]


def score_solutions(scorer: Any, examples: Sequence[StepwiseExample], progress: Any = None,
                    chunk: int = 64) -> list[list[float]]:
    """Per-step scores of every solution with `scorer` (a `PRMScorer`), batched by similar length so
    little compute is spent on padding; returned in the input order. `progress` (a
    `proctor.progress.StageProgress`) advances by the solutions scored, `chunk` at a time."""

    def size(i: int) -> int:
        return len(examples[i].prompt) + sum(map(len, examples[i].completions))

    order = sorted(range(len(examples)), key=size)
    out: list[list[float]] = [[] for _ in examples]
    for start in range(0, len(order), chunk):
        part = order[start : start + chunk]
        for i, s in zip(part, scorer.score_examples([examples[i] for i in part]), strict=True):
            out[i] = s
        if progress is not None:
            progress.advance(len(part))
    return out


def evaluate_solutions(scorer: Any, name: str, examples: Sequence[StepwiseExample], threshold: float = 0.5,
                       progress: Any = None) -> ProcessBenchResult:
    """Steps 1–3 of the protocol on solutions already read (`load_solutions`)."""
    scores = score_solutions(scorer, examples, progress)
    labels = [int(ex.meta["first_error"]) for ex in examples]
    return protocol(name, scores, labels, threshold, [str(ex.id) for ex in examples])


def evaluate_file(
    scorer: Any, path: str | Path, threshold: float = 0.5, limit: int | None = None, progress: Any = None
) -> ProcessBenchResult:
    """The whole protocol on one ProcessBench file (its name is the file's stem, e.g. `gsm8k`)."""
    return evaluate_solutions(scorer, Path(path).stem, load_solutions(path, limit), threshold, progress)


def report(results: Sequence[ProcessBenchResult]) -> dict[str, Any]:
    """JSON-ready summary: one entry per file and, when every file has an F1, their mean (the paper's
    'average F1')."""
    f1s = [r.f1 for r in results]
    return {
        "files": {r.name: r.summary() for r in results},
        "average_f1": sum(f1s) / len(f1s) if f1s and all(f is not None for f in f1s) else None,
    }


def results_table(results: Sequence[ProcessBenchResult]) -> Table:
    """The per-file numbers as a rich table (percentages, as the paper reports them)."""

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{100 * x:.1f}"

    table = Table("file", "solutions", "erroneous", "correct", "acc error %", "acc correct %", "F1 %",
                  title=f"ProcessBench (threshold {results[0].threshold:g})" if results else "ProcessBench")
    for r in results:
        table.add_row(r.name, str(r.n), str(r.n_error), str(r.n_correct), pct(r.acc_error), pct(r.acc_correct),
                      pct(r.f1))
    return table

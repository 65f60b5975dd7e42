"""What a PRM head trains on: its data read and checked row by row before any model loads (`read_data`,
`check_inputs`), then rendered with the backbone's tokenizer (`render_data`) and tokenized (`tokenize_examples`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from proctor.prm.config import PRMTrainConfig
from proctor.prm.data import DataError, StepwiseExample, row_name
from proctor.prm.importers import load_examples
from proctor.prm.model import ProcessRewardModel
from proctor.prm.objectives import objective
from proctor.prm.records import (
    PairExample,
    examples_from_records,
    load_trajectory_index,
    read_pairs,
    read_targets,
    trajectory_rows,
)
from proctor.prm.rendering import from_trajectories
from proctor.prm.tokenize import TokenizationError

#: data formats of plain stepwise text (a problem and its steps), not rendered agent states
TEXT_FORMATS = ("stepwise", "math_shepherd", "prm800k", "processbench")
#: the `targets.parquet` record kind each objective's data kind reads
RECORD_KINDS = {"steps": "step", "pairs": "preference", "progress": "progress", "transitions": "transition"}


def _check_targets(trajs: list[Any], path: str, target: str) -> None:
    for traj in trajs:
        for t, step in enumerate(traj.steps):
            if target not in step.targets:
                raise DataError(f"{path}: trajectory {traj.id} step {t} has no target {target!r} "
                                f"(has {sorted(step.targets)}); run `proctor targets --write-back` first, or set "
                                f"data.allow_missing_targets")


def read_data(cfg: PRMTrainConfig, path: str) -> Any:
    """One data file or store as `cfg.data` describes, read and checked row by row without a tokenizer (so a
    bad row is reported before any model loads); `render_data` turns it into training examples."""
    data = cfg.data
    if not Path(path).exists():
        raise DataError(f"{path}: no such data {'folder' if data.format == 'trajectories' else 'file'}")
    if data.format == "pairs":
        return read_pairs(path)
    if data.format == "targets":
        rows = read_targets(path)
        want = RECORD_KINDS[objective(cfg.loss).data]
        kinds = sorted({str(r.get("kind")) for r in rows})
        if kinds != [want]:
            raise DataError(f"{path}: holds {kinds} records; loss {cfg.loss!r} reads {want!r} records")
        return rows, load_trajectory_index(data.trajectories)
    if data.format != "trajectories":
        return load_examples(path, data.format)
    from proctor.store import TrajectoryStore

    trajs = TrajectoryStore.open(path).load()
    if data.target and not data.allow_missing_targets:
        _check_targets(trajs, path, data.target)
    return trajs


def render_data(cfg: PRMTrainConfig, raw: Any, tokenizer: Any) -> list[StepwiseExample] | list[PairExample]:
    """The training examples of what `read_data` read (trajectories rendered with the tokenizer's template)."""
    data, marker = cfg.data, cfg.tokenization.marker
    if data.format == "targets":
        rows, index = raw
        return examples_from_records(tokenizer, rows, index, marker, score_at=data.score_at)
    if data.format != "trajectories":
        return raw
    if data.score_at == "action" and data.target:
        return from_trajectories(tokenizer, raw, data.target, marker=marker, allow_missing=data.allow_missing_targets)
    rows = trajectory_rows(raw, data.target, data.allow_missing_targets)
    return examples_from_records(tokenizer, rows, {t.id: t for t in raw}, marker, score_at=data.score_at)


def check_inputs(cfg: PRMTrainConfig) -> dict[str, Any]:
    """Everything that can be checked before a model loads: the backbone reference (a missing local folder,
    or a hub name while offline and not cached) and every data row. Returns the data as `read_data` read it
    (`train`, and `eval` when the config has one)."""
    from proctor.models.loading import check_model_source

    check_model_source(cfg.model.backbone)
    for path in cfg.data.trajectories:
        if not Path(path).exists():
            raise DataError(f"data.trajectories: {path}: no such trajectory store or file")
    raw = {"train": read_data(cfg, cfg.data.train)}
    if cfg.data.eval:
        raw["eval"] = read_data(cfg, cfg.data.eval)
    return raw


def _no_labels_left(err: TokenizationError) -> bool:
    return "survive" in str(err)


def tokenize_examples(
    prm: ProcessRewardModel,
    examples: list[StepwiseExample] | list[PairExample],
    loss: str,
    is_eval: bool = False,
    unlabelled_rows: str = "error",
    report: dict[str, int] | None = None,
) -> list[dict[str, Any]]:
    """Features for training: one per example, `{"chosen", "rejected"}` per pair. The td_bce objective
    needs every step of an example (its last step is terminal), so truncating one is an error there.

    An example whose labelled steps truncation cuts away is an error naming its row, or (`unlabelled_rows`)
    kept with no labels (TRL's behaviour; one with no step position left at all is skipped) or skipped;
    `report` counts them ("kept_unlabelled", "skipped")."""
    report = report if report is not None else {}
    out = []
    for ex in examples:
        if isinstance(ex, PairExample):
            chosen, rejected = ex.branches()
            out.append({"chosen": prm.tokenize(chosen, is_eval), "rejected": prm.tokenize(rejected, is_eval)})
            continue
        try:
            f = prm.tokenize(ex, is_eval)
        except TokenizationError as e:
            if not _no_labels_left(e):
                raise TokenizationError(f"{row_name(ex)}: {e}") from None
            if unlabelled_rows == "error":
                raise TokenizationError(
                    f"{row_name(ex)}: no labelled step is left after truncation to "
                    f"tokenization.max_length={prm.spec.tokenization.max_length}; raise it, or set "
                    f"data.unlabelled_rows: keep (TRL's behaviour: the row stays, unsupervised) or skip") from None
            f = None
            if unlabelled_rows == "keep":
                try:
                    f = prm.tokenize(ex.model_copy(update={"labels": [None] * ex.num_steps}), is_eval)
                except TokenizationError:
                    f = None  # not even one step position is left: nothing to keep
            key = "kept_unlabelled" if f is not None else "skipped"
            report[key] = report.get(key, 0) + 1
            if f is None:
                continue
        if loss == "td_bce" and sum(f["step_mask"]) != ex.num_steps:
            raise TokenizationError(
                f"{row_name(ex)}: truncation cut {ex.num_steps - sum(f['step_mask'])} of its steps, which "
                f"would turn its last transition terminal (raise tokenization.max_length)"
            )
        out.append(f)
    return out

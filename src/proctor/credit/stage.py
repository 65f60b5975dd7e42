"""`run_targets(TargetsConfig)`: the targets stage as one library call (used by `proctor targets`, the
quickstart and the pipeline): read trajectories (and completions / policy rollouts), split by task, compute
a method's per-step targets, write `targets.parquet` + `summary.json`, optionally a store of the
trajectories with `Step.targets` filled, and check step labels against a ground truth the env recorded."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from proctor.credit.io import load_trajectories, write_records
from proctor.credit.io import write_back as fill_targets
from proctor.credit.records import LabelledStep, Record
from proctor.credit.registry import Sources, make_config, run_method
from proctor.credit.splits import check_no_leak, split_tasks, with_splits
from proctor.stats import auroc
from proctor.store import TrajectoryStore
from proctor.trajectory import Trajectory

log = logging.getLogger(__name__)


class TargetsConfig(BaseModel):
    """One targets stage."""

    model_config = ConfigDict(extra="forbid")

    method: str = Field(description="a registered credit method (`proctor targets --help`)")
    params: dict[str, Any] = Field(default_factory=dict, description="the method's parameters")
    input: Path = Field(description="trajectory store, .parquet file, or saved HF dataset")
    out: Path = Field(description="output directory (targets.parquet, summary.json)")
    completions: Path | None = Field(default=None, description="completions store (math-shepherd, inverse)")
    policy: Path | None = Field(default=None, description="policy rollouts store (inverse)")
    split: Literal["task", "keep"] = Field(default="task", description="assign splits by task, or keep them")
    fractions: tuple[float, float, float] = (0.8, 0.1, 0.1)
    seed: int = 0
    write_back: Path | None = Field(default=None, description="store of the trajectories with Step.targets")
    ground_truth: str | None = Field(
        default="step_correct",
        description="Step.info key of a ground-truth step label (arithmetic: step_correct); when the steps "
                    "carry it, the summary reports the labels' AUROC and accuracy against it")


def run_targets(cfg: TargetsConfig) -> dict[str, Any]:
    """Run the stage; returns the summary (also written to `cfg.out/summary.json`)."""
    params = make_config(cfg.method, cfg.params)
    t0 = time.perf_counter()
    trajs = load_trajectories(cfg.input)
    comps = load_trajectories(cfg.completions) if cfg.completions else None
    pol = load_trajectories(cfg.policy) if cfg.policy else None
    if cfg.split == "task":
        tasks = [(t.env, t.task_id) for group in (trajs, comps or [], pol or []) for t in group]
        assignment = split_tasks(tasks, cfg.fractions, cfg.seed)
        trajs = with_splits(trajs, assignment)
        comps = with_splits(comps, assignment) if comps is not None else None
        pol = with_splits(pol, assignment) if pol is not None else None
    result = run_method(cfg.method, Sources(trajs, completions=comps, policy=pol), params)
    check_no_leak(result.records)
    info: dict[str, Any] = {"method": cfg.method, "params": params.model_dump(mode="json"), "input": str(cfg.input),
                            "dropped": result.dropped, "seconds": round(time.perf_counter() - t0, 3),
                            "split": cfg.split}
    warnings = []
    same = same_outcome_warning(trajs)
    if same:
        warnings.append(same)
    if not result.records:
        why = result.notes.get("empty", "nothing to label")
        warnings.append(f"method {cfg.method!r} made 0 records ({why}); wrote the empty outputs")
    if warnings:
        info["warning"] = "; ".join(warnings)
        log.warning(info["warning"])
    if cfg.ground_truth:
        check = agreement(result.records, trajs, cfg.ground_truth)
        if check is not None:
            info["ground_truth"] = check
    summary = write_records(result.records, cfg.out, info, result.record_type or LabelledStep)
    if cfg.write_back is not None:
        if not all(isinstance(r, LabelledStep) for r in result.records):
            raise ValueError(f"write_back needs step records; method {cfg.method!r} makes other records")
        with TrajectoryStore(cfg.write_back, meta={"targets": cfg.method}) as store:
            store.extend(fill_targets(trajs, result.records))
    return summary


def same_outcome_warning(trajs: Sequence[Trajectory]) -> str | None:
    """A warning when every trajectory of a store has the same outcome (all succeeded or all failed):
    outcome-based targets then reflect only the discount, not the quality of actions."""
    outcomes = {t.success for t in trajs}
    if len(trajs) < 2 or len(outcomes) != 1:
        return None
    return (f"every one of the {len(trajs)} trajectories {'succeeded' if outcomes == {True} else 'failed'}: "
            "outcome-based targets then reflect only the discount; roll out a policy mix "
            "(e.g. --agent epsilon --agent-arg epsilon=0.3) to get both outcomes")


def agreement(records: Sequence[Record], trajs: Sequence[Trajectory], key: str) -> dict[str, Any] | None:
    """The step labels against `Step.info[key]` (a bool ground truth): n, AUROC and accuracy at 0.5, or
    None when no labelled step carries the key. AUROC is n/a (with the reason) when one class is absent."""
    steps = {(t.id, i): s for t in trajs for i, s in enumerate(t.steps)}
    pairs = []
    for r in records:
        if isinstance(r, LabelledStep):
            step = steps.get((r.trajectory_id, r.step))
            if step is not None and key in step.info:
                pairs.append((float(r.label), float(bool(step.info[key]))))
    if not pairs:
        return None
    labels, truth = [p[0] for p in pairs], [p[1] for p in pairs]
    out: dict[str, Any] = {"key": key, "n": len(pairs), "positives": int(sum(truth)),
                           "accuracy": sum((lab >= 0.5) == (t >= 0.5) for lab, t in pairs) / len(pairs)}
    try:
        out["auroc"] = auroc(labels, truth)
    except ValueError as e:
        out["auroc"] = None
        out["auroc_note"] = str(e)
    return out

"""`run_targets(TargetsConfig)`: the targets stage as one library call (used by `proctor targets`, the
quickstart and the pipeline): read trajectories (and completions / policy rollouts), split by task, compute
a method's per-step targets, write `targets.parquet` + `summary.json`, optionally a store of the
trajectories with `Step.targets` filled, and check step labels against a ground truth the env recorded.

Its outputs follow `proctor.outputs`' rule: the run (method, parameters, split, and which trajectories each input
holds) is recorded in `summary.json` (`run`) and in the write-back store's manifest (`meta.targets`); the same run
resumes, another is refused before any label is computed, and `overwrite` replaces it. A store never holds the
labels of two runs."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from proctor.credit.io import SUMMARY_FILE, TARGETS_FILE, load_trajectories, write_records
from proctor.credit.io import write_back as fill_targets
from proctor.credit.records import LabelledStep, Record
from proctor.credit.registry import Sources, make_config, run_method
from proctor.credit.splits import check_no_leak, split_tasks, with_splits
from proctor.outputs import claim_output, fingerprint
from proctor.stats import auroc
from proctor.store import open_for_run
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
    fractions: tuple[float, float, float] = Field(default=(0.8, 0.1, 0.1), description="with split 'task': the "
                                                   "shares of the tasks in train, valid and test (they sum to 1)")
    seed: int = Field(default=0, description="with split 'task': seeds which tasks go to which split")
    write_back: Path | None = Field(default=None, description="store of the trajectories with Step.targets")
    ground_truth: str | None = Field(
        default="step_correct",
        description="Step.info key of a ground-truth step label (arithmetic: step_correct); when the steps "
                    "carry it, the summary reports the labels' AUROC and accuracy against it")


def run_targets(cfg: TargetsConfig, overwrite: bool = False) -> dict[str, Any]:
    """Run the stage; returns the summary (also written to `cfg.out/summary.json`). `overwrite` replaces what
    `cfg.out` and `cfg.write_back` hold of another run (see the module docstring)."""
    params = make_config(cfg.method, cfg.params)
    t0 = time.perf_counter()
    if cfg.write_back is not None:
        sources = {cfg.input.resolve(), *(p.resolve() for p in (cfg.completions, cfg.policy) if p is not None)}
        if cfg.write_back.resolve() in sources:
            raise ValueError(f"write_back {cfg.write_back}: an input of this stage; write the labelled copy to "
                             "another folder")
    trajs = load_trajectories(cfg.input)
    comps = load_trajectories(cfg.completions) if cfg.completions else None
    pol = load_trajectories(cfg.policy) if cfg.policy else None
    identity = run_identity(cfg, params.model_dump(mode="json"), trajs, comps, pol)
    summary_path = cfg.out / SUMMARY_FILE
    claim_output(cfg.out, identity, recorded=_recorded_run(summary_path), overwrite=overwrite, what="targets",
                 present=[p for p in (cfg.out / TARGETS_FILE, summary_path) if p.exists()])
    with ExitStack() as stack:
        store = None
        if cfg.write_back is not None:  # claimed (and locked) before any label is computed
            store = stack.enter_context(open_for_run(cfg.write_back, "targets", identity, overwrite=overwrite,
                                                     what="labels")[0])
        if cfg.split == "task":
            tasks = [(t.env, t.task_id) for group in (trajs, comps or [], pol or []) for t in group]
            assignment = split_tasks(tasks, cfg.fractions, cfg.seed)
            trajs = with_splits(trajs, assignment)
            comps = with_splits(comps, assignment) if comps is not None else None
            pol = with_splits(pol, assignment) if pol is not None else None
        result = run_method(cfg.method, Sources(trajs, completions=comps, policy=pol), params)
        check_no_leak(result.records)
        info: dict[str, Any] = {"method": cfg.method, "params": params.model_dump(mode="json"),
                                "input": str(cfg.input), "dropped": result.dropped,
                                "seconds": round(time.perf_counter() - t0, 3), "split": cfg.split, "run": identity}
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
        if store is not None:
            if not all(isinstance(r, LabelledStep) for r in result.records):
                raise ValueError(f"write_back needs step records; method {cfg.method!r} makes other records")
            stored = {t.id for t in store.load()}  # a resumed run's labels are these same labels
            store.extend(t for t in fill_targets(trajs, result.records) if t.id not in stored)
    return summary


def run_identity(cfg: TargetsConfig, params: dict[str, Any], trajs: Sequence[Trajectory],
                 comps: Sequence[Trajectory] | None, pol: Sequence[Trajectory] | None) -> dict[str, Any]:
    """What decides the stage's labels: the method and its parameters, the split, and each input by path and by
    the trajectories it holds (a store that grew since gives other labels)."""
    identity: dict[str, Any] = {"method": cfg.method, "params": params, "split": cfg.split}
    if cfg.split == "task":
        identity.update(fractions=list(cfg.fractions), seed=cfg.seed)
    for name, path, group in (("input", cfg.input, trajs), ("completions", cfg.completions, comps),
                              ("policy", cfg.policy, pol)):
        if path is not None:
            identity[name] = {"path": str(path.resolve()), "trajectories": fingerprint(t.id for t in group or [])}
    return identity


def _recorded_run(path: Path) -> dict[str, Any] | None:
    """The run a targets `summary.json` records (None when it records none, or is not readable JSON)."""
    import json

    try:
        run = json.loads(path.read_text(encoding="utf-8")).get("run")
    except (OSError, ValueError, AttributeError):
        return None
    return run if isinstance(run, dict) else None


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

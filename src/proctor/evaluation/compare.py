"""`compare(dirs)`: evaluations side by side, each paired with the first (the baseline) on the (task, sample)
keys both ran, with McNemar's exact test and a per-task cluster bootstrap interval of the difference."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from proctor.evaluation.loading import EvalRun, load_runs
from proctor.evaluation.metrics import discordant_counts, mcnemar_exact, paired_bootstrap_diff

TEST_NAME = ("McNemar's exact test (two-sided) on the (task, sample) pairs both policies ran; the interval is a "
             "95% percentile bootstrap of the paired difference, resampling tasks")


@dataclass
class Comparison:
    """Rows in the order given; row 0 is the baseline (its paired fields are None)."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    test: str = TEST_NAME

    def to_dict(self) -> dict[str, Any]:
        return {"test": self.test, "rows": self.rows}


def diff_text(diff: float, ci95: list[float] | tuple[float, float]) -> str:
    """A paired difference in success points with its interval: "+11.0 [+3.5, +19.0]"."""
    return f"{100 * diff:+.1f} [{100 * ci95[0]:+.1f}, {100 * ci95[1]:+.1f}]"


def paired(base: EvalRun, other: EvalRun, resamples: int = 10_000, seed: int = 0) -> dict[str, Any]:
    """The paired statistics of `other` against `base` on their shared (task, sample) keys."""
    a_out, b_out = base.outcomes(), other.outcomes()
    same_setting = (base.summary.get("env"), base.summary.get("split")) == (other.summary.get("env"),
                                                                            other.summary.get("split"))
    keys = sorted(set(a_out) & set(b_out)) if same_setting else []
    if not keys:
        return {"pairs": 0, "b01": 0, "b10": 0, "diff": None, "diff_ci95": None, "p_value": None}
    a, b = [a_out[k] for k in keys], [b_out[k] for k in keys]
    b01, b10 = discordant_counts(a, b)
    diff, lo, hi = paired_bootstrap_diff(a, b, clusters=[k[0] for k in keys], resamples=resamples, seed=seed)
    return {"pairs": len(keys), "b01": b01, "b10": b10, "diff": diff, "diff_ci95": [lo, hi],
            "p_value": mcnemar_exact(b01, b10)}


def evaluation_labels(runs: list[EvalRun]) -> list[str]:
    """A row label per evaluation: its name (`proctor eval --name`, a pipeline entry's name), followed, where two
    evaluations share a name, by its folder relative to the folders' common parent ("policy (iter-1/eval/policy)")."""
    import os

    names = [run.policy for run in runs]
    root = os.path.commonpath([str(run.dir.resolve()) for run in runs])
    return [f"{name} ({os.path.relpath(run.dir.resolve(), root)})" if names.count(name) > 1 else name
            for run, name in zip(runs, names, strict=True)]


def compare(dirs: list[Path], resamples: int = 10_000, seed: int = 0) -> Comparison:
    """Side-by-side table of the evaluations in `dirs` (a sweep folder gives one row per N), each paired
    with the first. Raises ValueError naming a folder that holds no evaluation."""
    runs = [run for d in dirs for run in load_runs(Path(d))]
    if len(runs) < 2:
        raise ValueError(f"compare needs at least two evaluations, found {len(runs)} in {', '.join(map(str, dirs))}")
    out = Comparison()
    labels = evaluation_labels(runs)
    for i, run in enumerate(runs):
        s = run.summary
        row = {"label": labels[i], "policy": run.policy, "dir": str(run.dir), "env": s.get("env"), "split": s.get("split"),
               "episodes": s["episodes"], "successes": s["successes"], "success_rate": s["success_rate"],
               "success_ci95": s["success_ci95"], "mean_steps": s["mean_steps"],
               "env_steps": s.get("budget", {}).get("env_steps"), "crashed": len(s.get("crashed", [])),
               "mean_prm_score": (s.get("prm") or {}).get("mean_step_score")}
        row.update(paired(runs[0], run, resamples, seed) if i else
                   {"pairs": None, "b01": None, "b10": None, "diff": None, "diff_ci95": None, "p_value": None})
        out.rows.append(row)
    return out

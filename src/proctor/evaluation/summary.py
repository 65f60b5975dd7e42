"""What an evaluation reports about a set of trajectories: success with its 95% Wilson interval, steps,
invalid actions, PRM scores, terminations, a per-task-type table, budgets, and every crashed or missing
episode by name (`eval_summary`); `summary.json` and `summary.csv` are written from it."""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from proctor.evaluation.metrics import auroc, wilson_interval
from proctor.trajectory import TERMINATIONS, Step, Trajectory

SUMMARY_KIND = "proctor.eval"
SUMMARY_VERSION = 1
#: terminations of episodes that crashed (they count as failures and are listed)
CRASHED = ("env_error", "agent_error")
#: the task-type label of trajectories whose env gives none
NO_TYPE = "(none)"


def step_score(step: Step, key: str | None = None) -> float | None:
    """The PRM score of the action the step took: `Step.scores[key]` when `key` is given (None if absent);
    otherwise the score search chose it with (`info["candidate_meta"]["prm_score"]`), else the step's only
    score, else None."""
    if key is not None:
        return step.scores.get(key)
    meta = step.info.get("candidate_meta")
    if isinstance(meta, dict) and isinstance(meta.get("prm_score"), int | float):
        return float(meta["prm_score"])
    if len(step.scores) == 1:
        return next(iter(step.scores.values()))
    return None


def budget_of(trajs: Iterable[Trajectory]) -> dict[str, float]:
    """Total compute spent: the sum over episodes of `Trajectory.meta["budget"]` (search methods record their
    env steps, forked copies included, PRM calls and generated tokens there), or, for an episode without
    one, of what its steps record (`proctor.search.budget.trajectory_budget`: per-step best-of-N's
    candidates and PRM calls, else one env step and one candidate per step)."""
    from proctor.search.budget import trajectory_budget

    total: dict[str, float] = defaultdict(float)
    for t in trajs:
        budget = t.meta.get("budget")
        if not isinstance(budget, dict):
            budget = trajectory_budget(t).as_dict()
        for k, v in budget.items():
            if isinstance(v, int | float) and not isinstance(v, bool):
                total[k] += v
    return {k: (int(v) if float(v).is_integer() else v) for k, v in sorted(total.items())}


def rate_row(trajs: Sequence[Trajectory], failures: int = 0) -> dict[str, Any]:
    """Episodes, successes, success rate and its 95% Wilson interval, mean steps; `failures` extra episodes
    (missing ones) count as failed with no steps."""
    n = len(trajs) + failures
    wins = sum(t.success for t in trajs)
    lo, hi = wilson_interval(wins, n)
    steps = sum(len(t.steps) for t in trajs)
    return {"episodes": n, "successes": wins, "success_rate": wins / n if n else 0.0, "success_ci95": [lo, hi],
            "mean_steps": steps / n if n else 0.0}


def prm_stats(trajs: Sequence[Trajectory], key: str | None = None) -> dict[str, Any] | None:
    """Mean PRM score of the chosen actions over all scored steps, the mean last-step score of successful
    and of failed episodes, and the AUROC of the last-step score for success (when both outcomes occur);
    None when no step carries a score."""
    scores = [x for t in trajs for s in t.steps if (x := step_score(s, key)) is not None]
    if not scores:
        return None
    finals: list[tuple[float, bool]] = []
    for t in trajs:
        last = [x for s in t.steps if (x := step_score(s, key)) is not None]
        if last:
            finals.append((last[-1], t.success))
    won = [s for s, y in finals if y]
    lost = [s for s, y in finals if not y]
    both = bool(won) and bool(lost)
    return {
        "key": key, "scored_steps": len(scores), "mean_step_score": sum(scores) / len(scores),
        "scored_episodes": len(finals),
        "mean_final_score_success": sum(won) / len(won) if won else None,
        "mean_final_score_failure": sum(lost) / len(lost) if lost else None,
        "final_score_auroc": auroc([s for s, _ in finals], [float(y) for _, y in finals]) if both else None,
    }


def eval_summary(trajs: Sequence[Trajectory], wanted: Iterable[tuple[str, int]] | None = None,
                 score_key: str | None = None) -> dict[str, Any]:
    """The evaluation of `trajs` (one per (task, sample)). With `wanted`, every wanted key without a
    trajectory is listed under `missing` and counted as a failed episode; crashed episodes
    (`env_error`/`agent_error`) are failures and are listed under `crashed`. Nothing is dropped."""
    missing = sorted(set(wanted) - {t.key for t in trajs}) if wanted is not None else []
    n_missing = len(missing)
    row = rate_row(trajs, n_missing)
    steps = sum(len(t.steps) for t in trajs)
    invalid = sum(not s.valid for t in trajs for s in t.steps)
    terminations = {k: 0 for k in TERMINATIONS}
    for t in trajs:
        terminations[t.termination] += 1
    if n_missing:
        terminations["missing"] = n_missing
    by_type: dict[str, list[Trajectory]] = defaultdict(list)
    for t in trajs:
        by_type[str(t.task_meta.get("task_type", NO_TYPE))].append(t)
    n = row["episodes"]
    budget = budget_of(trajs)
    return {
        **row,
        "mean_env_score": sum(t.score for t in trajs) / n if n else 0.0,
        "invalid_action_rate": invalid / steps if steps else 0.0,
        "steps": steps,
        "terminations": terminations,
        "prm": prm_stats(trajs, score_key),
        "by_task_type": [{"task_type": k, **rate_row(v)} for k, v in sorted(by_type.items())],
        "budget": budget,
        "budget_per_episode": {k: v / n for k, v in budget.items()} if n else {},
        "crashed": [{"task_id": t.task_id, "sample": t.sample, "termination": t.termination, "error": t.error}
                    for t in sorted(trajs, key=lambda t: t.key) if t.termination in CRASHED],
        "missing": [{"task_id": k[0], "sample": k[1]} for k in missing],
    }


CSV_COLUMNS = ("policy", "group", "episodes", "successes", "success_rate", "ci95_low", "ci95_high", "mean_steps",
               "invalid_action_rate", "mean_prm_score", "env_steps", "crashed", "missing")


def summary_csv(summary: dict[str, Any]) -> str:
    """`summary.csv`: one row for all episodes (`group` = all), then one per task type."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, lineterminator="\n")
    w.writeheader()
    prm = summary.get("prm") or {}
    w.writerow({"policy": summary.get("policy", ""), "group": "all", "episodes": summary["episodes"],
                "successes": summary["successes"], "success_rate": f"{summary['success_rate']:.4f}",
                "ci95_low": f"{summary['success_ci95'][0]:.4f}", "ci95_high": f"{summary['success_ci95'][1]:.4f}",
                "mean_steps": f"{summary['mean_steps']:.3f}",
                "invalid_action_rate": f"{summary['invalid_action_rate']:.4f}",
                "mean_prm_score": f"{prm['mean_step_score']:.4f}" if prm else "",
                "env_steps": summary["budget"].get("env_steps", ""), "crashed": len(summary["crashed"]),
                "missing": len(summary["missing"])})
    for row in summary["by_task_type"]:
        w.writerow({"policy": summary.get("policy", ""), "group": f"task_type={row['task_type']}",
                    "episodes": row["episodes"], "successes": row["successes"],
                    "success_rate": f"{row['success_rate']:.4f}", "ci95_low": f"{row['success_ci95'][0]:.4f}",
                    "ci95_high": f"{row['success_ci95'][1]:.4f}", "mean_steps": f"{row['mean_steps']:.3f}"})
    return buf.getvalue()

"""The results table of a pipeline run, like AgentPRM's Table 1: iteration, policy, success % with its 95%
interval, mean steps, and the compute budget per episode; and each row paired with the first (π0 in the
quickstart). The run's summary rows as the rows of `proctor.evaluation.compare_table`, the one renderer."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from proctor.evaluation import compare_table

#: the paired statistics of a row's `vs_first` (`proctor.pipeline.run.paired_with_first`)
PAIRED = ("pairs", "diff", "diff_ci95", "b01", "b10", "p_value")


def _row(r: dict[str, Any]) -> dict[str, Any]:
    budget = r.get("budget") or {}
    return {"iteration": r["iteration"], "label": r["policy"], "success_rate": r.get("success_rate", 0.0),
            "success_ci95": r.get("success_ci95", [0.0, 0.0]), "episodes": r.get("episodes", 0),
            "mean_steps": r.get("mean_steps", 0.0), "env_steps": budget.get("env_steps"),
            "prm_calls": budget.get("prm_calls")}


def results_table(summary: dict[str, Any], title: str | None = None) -> Table:
    """The run's results, one row per evaluation (the first is the baseline)."""
    return compare_table.results_table(
        [_row(r) for r in summary.get("results", [])], title or f"{summary.get('env', '')}: held-out test tasks",
        "n: episodes; steps: mean steps per episode; env/ep, PRM/ep: env steps and PRM calls per episode",
        name="policy", iterations=True, prm_calls=True)


def paired_table(summary: dict[str, Any]) -> Table | None:
    """Each result row after the first against the first, on the tasks both ran (`vs_first`, from
    `proctor.pipeline.run.paired_with_first`): the difference in success points with its 95% bootstrap
    interval, the tasks won and lost, McNemar's exact p. None for fewer than two rows."""
    rows = [r for r in summary.get("results", [])[1:] if (r.get("vs_first") or {}).get("diff") is not None]
    if not rows:
        return None
    first = rows[0]["vs_first"]
    return compare_table.paired_table(
        [{**_row(r), **{k: r["vs_first"][k] for k in PAIRED}} for r in rows],
        f"paired with iteration {first['iteration']} {first['policy']} on the same tasks",
        "Δ: success points against the first row, 95% bootstrap CI; p: McNemar's exact test",
        name="policy", iterations=True)


def result_tables(summary: dict[str, Any], title: str | None = None) -> list[Table]:
    """What the CLI prints after a run: the results table, then the paired one when there is one."""
    paired = paired_table(summary)
    return [results_table(summary, title)] + ([paired] if paired is not None else [])

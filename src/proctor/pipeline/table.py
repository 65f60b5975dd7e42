"""The results table of a pipeline run, like AgentPRM's Table 1: policy, success % with its 95% interval,
mean steps, and the compute budget per episode; and each row paired with the first (π0 in the quickstart).
Headers are short and policy names wrap, so both tables read at 80 columns."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from proctor.evaluation.compare import diff_text


def results_table(summary: dict[str, Any], title: str | None = None) -> Table:
    table = Table(title=title or f"{summary.get('env', '')}: held-out test tasks")
    table.caption = "n: episodes; steps: mean steps per episode; env/ep, PRM/ep: env steps and PRM calls per episode"
    for col in ("iter", "policy", "success % [95% CI]", "n", "steps", "env/ep", "PRM/ep"):
        table.add_column(col, justify="left" if col == "policy" else "right",
                         **({"overflow": "fold"} if col == "policy" else {"no_wrap": True}))
    for r in summary.get("results", []):
        lo, hi = r.get("success_ci95", [0.0, 0.0])
        budget = r.get("budget") or {}
        n = max(1, r.get("episodes", 1))
        table.add_row(str(r["iteration"]), r["policy"], f"{100 * r.get('success_rate', 0):.1f} [{100 * lo:.1f}, "
                      f"{100 * hi:.1f}]", str(r.get("episodes", "")), f"{r.get('mean_steps', 0):.1f}",
                      f"{budget.get('env_steps', 0) / n:.1f}",
                      f"{budget.get('prm_calls', 0) / n:.1f}" if "prm_calls" in budget else "-")
    return table


def paired_table(summary: dict[str, Any]) -> Table | None:
    """Each result row after the first against the first, on the tasks both ran (`vs_first`, from
    `proctor.pipeline.run.paired_with_first`): the difference in success points with its 95% bootstrap
    interval, the tasks won and lost, McNemar's exact p. None for fewer than two rows."""
    rows = [r for r in summary.get("results", [])[1:] if (r.get("vs_first") or {}).get("diff") is not None]
    if not rows:
        return None
    first = rows[0]["vs_first"]
    table = Table(title=f"paired with iteration {first['iteration']} {first['policy']} on the same tasks")
    table.caption = "Δ: success points against the first row, 95% bootstrap CI; p: McNemar's exact test"
    for col in ("iter", "policy", "pairs", "Δ [95% CI]", "won / lost", "p"):
        table.add_column(col, justify="left" if col == "policy" else "right",
                         **({"overflow": "fold"} if col == "policy" else {"no_wrap": True}))
    for r in rows:
        vs = r["vs_first"]
        table.add_row(str(r["iteration"]), r["policy"], str(vs["pairs"]), diff_text(vs["diff"], vs["diff_ci95"]),
                      f"{vs['b01']} / {vs['b10']}", f"{vs['p_value']:.2g}")
    return table


def result_tables(summary: dict[str, Any], title: str | None = None) -> list[Table]:
    """What the CLI prints after a run: the results table, then the paired one when there is one."""
    paired = paired_table(summary)
    return [results_table(summary, title)] + ([paired] if paired is not None else [])

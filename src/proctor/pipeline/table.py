"""The results table of a pipeline run, like AgentPRM's Table 1: policy, success % with its 95% interval,
mean steps, and the compute budget per episode."""

from __future__ import annotations

from typing import Any

from rich.table import Table


def results_table(summary: dict[str, Any], title: str | None = None) -> Table:
    table = Table(title=title or f"{summary.get('env', '')}: held-out test tasks")
    for col, justify in (("iteration", "right"), ("policy", "left"), ("success %", "right"),
                         ("95% interval", "right"), ("episodes", "right"), ("mean steps", "right"),
                         ("env steps / episode", "right"), ("PRM calls / episode", "right")):
        table.add_column(col, justify=justify)
    for r in summary.get("results", []):
        lo, hi = r.get("success_ci95", [0.0, 0.0])
        budget = r.get("budget") or {}
        n = max(1, r.get("episodes", 1))
        table.add_row(str(r["iteration"]), r["policy"], f"{100 * r.get('success_rate', 0):.1f}",
                      f"[{100 * lo:.1f}, {100 * hi:.1f}]", str(r.get("episodes", "")),
                      f"{r.get('mean_steps', 0):.1f}", f"{budget.get('env_steps', 0) / n:.1f}",
                      f"{budget.get('prm_calls', 0) / n:.1f}" if "prm_calls" in budget else "-")
    return table

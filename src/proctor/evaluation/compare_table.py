"""The one renderer of result tables, `proctor compare`'s (`comparison_tables`) and `proctor run`'s
(`proctor.pipeline.table`): the results side by side (the first row is the baseline), then each later row paired
with it. Rows are labelled by name, headers are short and names wrap rather than being cut, so both tables read at
80 columns and stay narrow when piped.

A row is a flat mapping: `label`, `success_rate`, `success_ci95`, `episodes`, `mean_steps`, `env_steps` (the total,
or None), and, for the paired table, `pairs`, `diff`, `diff_ci95`, `b01`, `b10`, `p_value`; `iteration` and
`prm_calls` (a total, or None) where the table shows them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.table import Table

from proctor.evaluation.compare import Comparison, diff_text

#: the widest the names' column gets: longer names wrap, so the tables stay under 100 columns
NAME_WIDTH = 30

Row = Mapping[str, Any]


def _table(title: str, caption: str, name: str, numbers: tuple[str, ...], iterations: bool) -> Table:
    """A table whose name column wraps and whose numbers (the iteration before the name) never do."""
    table = Table(title=title, caption=caption, title_justify="left", caption_justify="left")
    if iterations:
        table.add_column("iter", justify="right", no_wrap=True)
    table.add_column(name, overflow="fold", min_width=10, max_width=NAME_WIDTH)
    for col in numbers:
        table.add_column(col, justify="right", no_wrap=True)
    return table


def _per_episode(total: float | None, row: Row) -> str:
    return f"{total / row['episodes']:.1f}" if total is not None and row["episodes"] else "—"


def results_table(rows: Sequence[Row], title: str, caption: str, *, name: str = "evaluation",
                  iterations: bool = False, prm_calls: bool = False) -> Table:
    """One row per result: success % with its 95% interval, episodes, mean steps, env steps (and PRM calls) per
    episode."""
    numbers = ("success % [95% CI]", "n", "steps", "env/ep", *(("PRM/ep",) if prm_calls else ()))
    table = _table(title, caption, name, numbers, iterations)
    for r in rows:
        lo, hi = r["success_ci95"]
        table.add_row(*([str(r["iteration"])] if iterations else []), r["label"],
                      f"{100 * r['success_rate']:.1f} [{100 * lo:.1f}, {100 * hi:.1f}]", str(r["episodes"]),
                      f"{r['mean_steps']:.1f}", _per_episode(r["env_steps"], r),
                      *([_per_episode(r.get("prm_calls"), r)] if prm_calls else []))
    return table


def paired_table(rows: Sequence[Row], title: str, caption: str, *, name: str = "evaluation",
                 iterations: bool = False) -> Table:
    """Each row against the baseline on what both ran: the difference in success points with its interval, the
    pairs won and lost, McNemar's p (— for a row with no pairs)."""
    table = _table(title, caption, name, ("pairs", "Δ [95% CI]", "won / lost", "p"), iterations)
    for r in rows:
        paired = bool(r["pairs"])
        table.add_row(*([str(r["iteration"])] if iterations else []), r["label"], str(r["pairs"]),
                      diff_text(r["diff"], r["diff_ci95"]) if paired else "—",
                      f"{r['b01']} / {r['b10']}" if paired else "—", f"{r['p_value']:.2g}" if paired else "—")
    return table


def comparison_tables(result: Comparison) -> list[Table]:
    """What `proctor compare` prints: the evaluations, then each after the first paired with it."""
    tables = [results_table(result.rows, "evaluations (the first is the baseline)",
                            "n: episodes; steps: mean steps per episode; env/ep: env steps per episode (search counts "
                            "its copies)")]
    if len(result.rows) > 1:
        tables.append(paired_table(
            result.rows[1:], f"paired with {result.rows[0]['label']} on the (task, sample) keys both ran",
            "Δ: success points against the baseline, 95% bootstrap interval resampling tasks; won / lost: pairs only "
            "this row won / only the baseline won; p: McNemar's exact test (two-sided)"))
    return tables

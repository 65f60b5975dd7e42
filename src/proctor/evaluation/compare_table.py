"""`proctor compare`'s tables: the evaluations side by side (the first is the baseline), then each later one paired
with the baseline. Rows are labelled by the evaluation's name, headers are short and names wrap rather than being
cut, so both tables read at 80 columns and stay narrow when piped."""

from __future__ import annotations

from rich.table import Table

from proctor.evaluation.compare import Comparison, diff_text

#: the widest the names' column gets: longer names wrap, so the tables stay under 100 columns
NAME_WIDTH = 30


def _table(title: str, caption: str, columns: tuple[str, ...]) -> Table:
    """A table whose first column (the evaluation's name) wraps and whose numbers never do."""
    table = Table(title=title, caption=caption, title_justify="left", caption_justify="left")
    table.add_column(columns[0], overflow="fold", min_width=10, max_width=NAME_WIDTH)
    for col in columns[1:]:
        table.add_column(col, justify="right", no_wrap=True)
    return table


def results_table(result: Comparison) -> Table:
    """One row per evaluation: success % with its 95% Wilson interval, episodes, mean steps, env steps per
    episode."""
    table = _table("evaluations (the first is the baseline)",
                   "n: episodes; steps: mean steps per episode; env/ep: env steps per episode (search counts its "
                   "copies)", ("evaluation", "success % [95% CI]", "n", "steps", "env/ep"))
    for r in result.rows:
        lo, hi = r["success_ci95"]
        env = f"{r['env_steps'] / r['episodes']:.1f}" if r["env_steps"] is not None and r["episodes"] else "—"
        table.add_row(r["label"], f"{100 * r['success_rate']:.1f} [{100 * lo:.1f}, {100 * hi:.1f}]",
                      str(r["episodes"]), f"{r['mean_steps']:.1f}", env)
    return table


def paired_table(result: Comparison) -> Table | None:
    """Each evaluation after the first against it on the (task, sample) keys both ran: the difference in success
    points with its interval, the pairs won and lost, McNemar's p; None with fewer than two rows."""
    if len(result.rows) < 2:
        return None
    table = _table(f"paired with {result.rows[0]['label']} on the (task, sample) keys both ran",
                   "Δ: success points against the baseline, 95% bootstrap interval resampling tasks; won / lost: "
                   "pairs only this row won / only the baseline won; p: McNemar's exact test (two-sided)",
                   ("evaluation", "pairs", "Δ [95% CI]", "won / lost", "p"))
    for r in result.rows[1:]:
        paired = bool(r["pairs"])
        table.add_row(r["label"], str(r["pairs"]), diff_text(r["diff"], r["diff_ci95"]) if paired else "—",
                      f"{r['b01']} / {r['b10']}" if paired else "—", f"{r['p_value']:.2g}" if paired else "—")
    return table


def comparison_tables(result: Comparison) -> list[Table]:
    """What `proctor compare` prints: the results, then the paired table."""
    paired = paired_table(result)
    return [results_table(result)] + ([paired] if paired is not None else [])

"""Static plots of evaluations (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any


def success_vs_n_png(rows: Sequence[dict[str, Any]], path: Path, title: str) -> Path:
    """Success rate against N (log₂ axis) with 95% Wilson intervals as error bars, as in AgentPRM's best-of-N
    figure. `rows`: dicts with `n`, `success_rate`, `success_ci95`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ns = [r["n"] for r in rows]
    rate = [100 * r["success_rate"] for r in rows]
    low = [100 * (r["success_rate"] - r["success_ci95"][0]) for r in rows]
    high = [100 * (r["success_ci95"][1] - r["success_rate"]) for r in rows]
    fig, ax = plt.subplots(figsize=(5.5, 3.6), dpi=120)
    ax.errorbar(ns, rate, yerr=[low, high], marker="o", capsize=4, color="#2563eb", linewidth=2)
    if len(ns) > 1:
        ax.set_xscale("log", base=2)
    ax.set_xticks(ns, [str(n) for n in ns])
    ax.set_xlabel("N")
    ax.set_ylabel("success % (95% Wilson CI)")
    ax.set_ylim(0, 100)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path

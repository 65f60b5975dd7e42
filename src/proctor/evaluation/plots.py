"""Static plots of evaluations (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any


def _figure():
    """A (figure, axes) pair of the size every proctor plot uses, on the Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=(5.5, 3.6), dpi=120)


def _save(fig: Any, ax: Any, path: Path, title: str) -> Path:
    """Title, grid, tight layout; write `path` (its folder created) and close the figure."""
    import matplotlib.pyplot as plt

    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def success_vs_n_png(rows: Sequence[dict[str, Any]], path: Path, title: str) -> Path:
    """Success rate against N (log₂ axis) with 95% Wilson intervals as error bars, as in AgentPRM's best-of-N
    figure. `rows`: dicts with `n`, `success_rate`, `success_ci95`."""
    ns = [r["n"] for r in rows]
    rate = [100 * r["success_rate"] for r in rows]
    low = [100 * (r["success_rate"] - r["success_ci95"][0]) for r in rows]
    high = [100 * (r["success_ci95"][1] - r["success_rate"]) for r in rows]
    fig, ax = _figure()
    ax.errorbar(ns, rate, yerr=[low, high], marker="o", capsize=4, color="#2563eb", linewidth=2)
    if len(ns) > 1:
        ax.set_xscale("log", base=2)
    ax.set_xticks(ns, [str(n) for n in ns])
    ax.set_xlabel("N")
    ax.set_ylabel("success % (95% Wilson CI)")
    ax.set_ylim(0, 100)
    return _save(fig, ax, path, title)


def monitor_png(rows: Sequence[dict[str, Any]], path: Path) -> Path:
    """The reward-hacking monitor (`proctor.pipeline.monitor`) by iteration: true success, the PRM's mean score
    of the policy's actions and their Monte-Carlo re-labels."""
    its = [r["iteration"] for r in rows]
    fig, ax = _figure()
    for key, label, color in (("success_rate", "test success", "#16a34a"),
                              ("prm_mean", "PRM score of the policy's actions", "#dc2626"),
                              ("mc_q_mean", "MC re-label Q̃ of those actions", "#2563eb")):
        ax.plot(its, [r[key] for r in rows], marker="o", label=label, color=color, linewidth=2)
    ax.set_xticks(its)
    ax.set_xlabel("iteration")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=8)
    return _save(fig, ax, path, "reward-hacking monitor")

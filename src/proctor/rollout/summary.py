"""The result table of a rollout run: success rate with its 95% Wilson interval, steps, invalid actions."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from rich.table import Table

from proctor.trajectory import TERMINATIONS, Trajectory


def wilson_interval(successes: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (Wilson 1927; Agresti & Coull 1998).

    With p̂ = successes / n:

        center = (p̂ + z²/(2n)) / (1 + z²/n)
        half   = z / (1 + z²/n) · sqrt(p̂(1 − p̂)/n + z²/(4n²))
        interval = [center − half, center + half]

    z = 1.96 gives the 95% interval. With n = 0 nothing is known and the interval is [0, 1].
    """
    if n < 0 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n, got successes={successes}, n={n}")
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    z2 = z * z
    denom = 1.0 + z2 / n
    center = (p + z2 / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return max(0.0, center - half), min(1.0, center + half)


@dataclass
class RolloutSummary:
    """Aggregate outcome of a set of trajectories."""

    episodes: int
    successes: int
    success_rate: float
    success_ci95: tuple[float, float]
    mean_steps: float
    mean_score: float
    invalid_action_rate: float
    steps: int
    terminations: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "episodes": self.episodes,
            "successes": self.successes,
            "success_rate": self.success_rate,
            "success_ci95": list(self.success_ci95),
            "mean_steps": self.mean_steps,
            "mean_score": self.mean_score,
            "invalid_action_rate": self.invalid_action_rate,
            "steps": self.steps,
            "terminations": dict(self.terminations),
        }


def summarize(trajectories: Iterable[Trajectory]) -> RolloutSummary:
    """Success rate (with Wilson 95% CI), mean steps and score, invalid-action rate over all steps,
    and the number of episodes per termination reason."""
    trajs = list(trajectories)
    n = len(trajs)
    wins = sum(t.success for t in trajs)
    steps = sum(len(t.steps) for t in trajs)
    invalid = sum(not s.valid for t in trajs for s in t.steps)
    counts = Counter(t.termination for t in trajs)
    return RolloutSummary(
        episodes=n,
        successes=wins,
        success_rate=wins / n if n else 0.0,
        success_ci95=wilson_interval(wins, n),
        mean_steps=steps / n if n else 0.0,
        mean_score=sum(t.score for t in trajs) / n if n else 0.0,
        invalid_action_rate=invalid / steps if steps else 0.0,
        steps=steps,
        terminations={k: counts.get(k, 0) for k in TERMINATIONS},
    )


def summary_table(summary: RolloutSummary, title: str = "rollout") -> Table:
    """The summary as a rich table."""
    table = Table(title=title, show_header=True)
    table.add_column("metric", style="bold")
    table.add_column("value", justify="right")
    lo, hi = summary.success_ci95
    table.add_row("episodes", str(summary.episodes))
    table.add_row("success rate", f"{summary.success_rate:.3f}  (95% CI {lo:.3f}–{hi:.3f})")
    table.add_row("mean steps", f"{summary.mean_steps:.2f}")
    table.add_row("mean score", f"{summary.mean_score:.3f}")
    table.add_row("invalid-action rate", f"{summary.invalid_action_rate:.3f}  ({summary.steps} steps)")
    for reason, count in summary.terminations.items():
        table.add_row(f"termination: {reason}", str(count))
    return table

"""Agents made of agents: `MixtureAgent` (a step's N samples split across policies, AgentPRM's mixture of
policies) and `SwitchAgent` (roll in with one policy, switch to another at a random step: the exploration
behind reset-distribution and Monte-Carlo completion)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence

from proctor.agents.base import Agent, Candidate, Prefix
from proctor.seeding import stable_rng


def allocate(n: int, weights: Sequence[float], u: float | None = None) -> list[int]:
    """Split `n` samples across components in proportion to `weights`, with the least variance.

    Quotas q_i = n·w_i / Σ_j w_j. Component i gets ⌊q_i⌋, and the r = n − Σ_i ⌊q_i⌋ remaining samples go
    by systematic sampling on the fractional parts f_i = q_i − ⌊q_i⌋ (Σ_i f_i = r): with u ∈ [0, 1), the
    points u, u+1, …, u+r−1 each give one sample to the component whose interval [F_{i−1}, F_i) of the
    cumulative sums F of f holds them. So component i gets an extra sample with probability exactly f_i:
    E[c_i] = q_i and ⌊q_i⌋ ≤ c_i ≤ ⌈q_i⌉ (only the remainder is random). `u=None`: deterministic largest
    remainder (the r largest f_i; ties to the earlier component).
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if not weights or any(w < 0 for w in weights) or sum(weights) <= 0:
        raise ValueError(f"weights must be non-negative with a positive sum, got {list(weights)}")
    total = float(sum(weights))
    quotas = [n * w / total for w in weights]
    counts = [math.floor(q) for q in quotas]
    fracs = [q - c for q, c in zip(quotas, counts, strict=True)]
    r = n - sum(counts)
    if r == 0:
        return counts
    if u is None:
        for i in sorted(range(len(fracs)), key=lambda i: (-fracs[i], i))[:r]:
            counts[i] += 1
        return counts
    if not 0 <= u < 1:
        raise ValueError(f"u must be in [0, 1), got {u}")
    last = max(i for i, f in enumerate(fracs) if f > 0)
    cum, i = 0.0, 0
    for k in range(r):
        point = u + k
        while i < last and point >= cum + fracs[i]:
            cum += fracs[i]
            i += 1
        counts[i] += 1
    return counts


class MixtureAgent(Agent):
    """Each prefix's n samples are split across `components` = [(agent, weight), ...] by `allocate`, the
    remainder randomised per (seed, task_id, sample, step) (`seed=None`: deterministic largest remainder).
    Candidates come in component order; `meta["component"]` is the index, `meta["agent"]` the agent's name."""

    def __init__(self, components: Sequence[tuple[Agent, float]], seed: int | None = 0):
        if not components:
            raise ValueError("MixtureAgent needs at least one (agent, weight) pair")
        self.agents = [a for a, _ in components]
        self.weights = [float(w) for _, w in components]
        allocate(1, self.weights)  # validates the weights
        self.seed = seed
        self.name = "mixture(" + ",".join(f"{a.name}:{w:g}" for a, w in zip(self.agents, self.weights,
                                                                              strict=True)) + ")"

    @property
    def needs_expert_hints(self) -> bool:
        """True when a component reads the env's privileged `info["expert_action"]`."""
        return any(a.needs_expert_hints for a in self.agents)

    def describe(self) -> str:
        parts = ", ".join(f"{w:g} × {a.describe()}" for a, w in zip(self.agents, self.weights, strict=True))
        return f"mixture of [{parts}] (seed={self.seed})"

    def counts(self, prefix: Prefix, n: int) -> list[int]:
        u = None if self.seed is None else stable_rng(self.seed, prefix.task_id, prefix.sample,
                                                       prefix.step_index).random()
        return allocate(n, self.weights, u)

    def act(self, prefixes: Sequence[Prefix], n: int = 1) -> list[list[Candidate]]:
        counts = [self.counts(p, n) for p in prefixes]
        got: dict[tuple[int, int], list[Candidate]] = {}
        for k, agent in enumerate(self.agents):
            by_count: dict[int, list[int]] = defaultdict(list)
            for i, c in enumerate(counts):
                if c[k] > 0:
                    by_count[c[k]].append(i)
            for c, idx in by_count.items():
                for i, cands in zip(idx, agent.act([prefixes[i] for i in idx], c), strict=True):
                    for cand in cands:
                        cand.meta.update(component=k, agent=agent.name)
                    got[(i, k)] = cands
        return [[c for k in range(len(self.agents)) for c in got.get((i, k), [])] for i in range(len(prefixes))]

    def reset(self, prefix: Prefix) -> None:
        for a in self.agents:
            a.reset(prefix)

    def close(self) -> None:
        for a in self.agents:
            a.close()


SwitchSteps = int | Sequence[int] | Mapping[int, float]


class SwitchAgent(Agent):
    """Acts with `roll_in` before the switch step k and with `roll_out` from step k on.

    k is drawn once per (task_id, sample) from `seed`: with `switch_prob` p, k ~ Geometric(p) on {0, 1, …}
    (P(k) = (1−p)^k·p: at each step, switch with probability p); with `switch_steps`, k is that step, or
    uniform over a list of steps, or drawn from a {step: weight} mapping. Every candidate records
    `meta["switch_step"]` = k and `meta["phase"]` ("roll_in" / "roll_out")."""

    def __init__(self, roll_in: Agent, roll_out: Agent, switch_prob: float | None = None,
                 switch_steps: SwitchSteps | None = None, seed: int = 0):
        if (switch_prob is None) == (switch_steps is None):
            raise ValueError("SwitchAgent needs exactly one of switch_prob and switch_steps")
        if switch_prob is not None and not 0 < switch_prob <= 1:
            raise ValueError(f"switch_prob must be in (0, 1], got {switch_prob}")
        if isinstance(switch_steps, Mapping):
            steps, weights = list(switch_steps), [float(w) for w in switch_steps.values()]
        elif switch_steps is not None:
            steps = [switch_steps] if isinstance(switch_steps, int) else list(switch_steps)
            weights = [1.0] * len(steps)
        else:
            steps, weights = [], []
        if switch_steps is not None and (not steps or any(s < 0 for s in steps) or any(w < 0 for w in weights)
                                         or sum(weights) <= 0):
            raise ValueError(f"switch_steps must be steps >= 0 with non-negative weights, got {switch_steps!r}")
        self.roll_in, self.roll_out = roll_in, roll_out
        self.switch_prob, self.seed = switch_prob, seed
        self._steps, self._weights = steps, weights
        self.name = f"switch({roll_in.name}->{roll_out.name})"

    @property
    def needs_expert_hints(self) -> bool:
        """True when either phase's agent reads the env's privileged `info["expert_action"]`."""
        return self.roll_in.needs_expert_hints or self.roll_out.needs_expert_hints

    def describe(self) -> str:
        how = (f"p={self.switch_prob:g} per step" if self.switch_prob is not None
               else f"steps {dict(zip(self._steps, self._weights, strict=True))}")
        return f"roll in with {self.roll_in.describe()}, switch ({how}, seed={self.seed}) to {self.roll_out.describe()}"

    def switch_step(self, task_id: str, sample: int) -> int:
        rng = stable_rng(self.seed, "switch", task_id, sample)
        if self.switch_prob is None:
            return rng.choices(self._steps, weights=self._weights)[0]
        if self.switch_prob == 1:
            return 0
        return math.floor(math.log1p(-rng.random()) / math.log1p(-self.switch_prob))

    def act(self, prefixes: Sequence[Prefix], n: int = 1) -> list[list[Candidate]]:
        ks = [self.switch_step(p.task_id, p.sample) for p in prefixes]
        out: list[list[Candidate]] = [[] for _ in prefixes]
        for phase, agent in (("roll_in", self.roll_in), ("roll_out", self.roll_out)):
            idx = [i for i, (p, k) in enumerate(zip(prefixes, ks, strict=True))
                   if (p.step_index < k) == (phase == "roll_in")]
            if not idx:
                continue
            for i, cands in zip(idx, agent.act([prefixes[i] for i in idx], n), strict=True):
                for c in cands:
                    c.meta.update(switch_step=ks[i], phase=phase)
                out[i] = cands
        return out

    def reset(self, prefix: Prefix) -> None:
        self.roll_in.reset(prefix)
        self.roll_out.reset(prefix)

    def close(self) -> None:
        self.roll_in.close()
        self.roll_out.close()

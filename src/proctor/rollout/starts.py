"""Where completions start: the action prefixes of stored trajectories, K completions each.

A completion is an ordinary episode whose first k steps are a source trajectory's (replayed in a fresh env
with the source's seed), then the agent's own; its `meta` records `prefix_of` (the source id) and
`prefix_len` (k), the layout `proctor.credit.completions` reads for Math-Shepherd labels (k = t + 1 for
step t), inverse-PRM transitions (the re-sampled action at s_k) and MC-Q from intermediate states.

Candidate starts (`CandidateConfig`): at a stored state s_t, ONE chosen action a (the expert's, the source's
own, or random admissible ones) is replayed after the first t steps, then the agent continues; `meta` adds
`candidate` = a (with `prefix_len` = t). `proctor.credit.candidates` turns their outcomes into MC estimates
of Q(s_t, a) for each candidate, the held-out evidence of `proctor prm eval`'s pairwise ranking accuracy.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from proctor.episode import STATE_INFO_KEYS, WorkItem, completion_sample
from proctor.seeding import stable_rng
from proctor.trajectory import Step, Trajectory

#: which prefix lengths k to start from: every k in 1..T, every k in 0..T-1 (the states), or a given list
PrefixLengths = Literal["steps", "states"] | list[int]


def prefix_lengths_of(traj: Trajectory, which: PrefixLengths) -> list[int]:
    """The prefix lengths k of `traj` to complete from (`steps`: 1..T, one per step t = k − 1, what
    Math-Shepherd labels; `states`: 0..T−1, every state the source acted in; a list: those k ≤ T)."""
    n = len(traj.steps)
    if which == "steps":
        return list(range(1, n + 1))
    if which == "states":
        return list(range(n))
    bad = [k for k in which if not 0 <= k <= n]
    if bad:
        raise ValueError(f"prefix lengths {bad} are outside 0..{n} for trajectory {traj.id}")
    return sorted(set(which))


def source_key(traj: Trajectory) -> str:
    """What a source is across runs: its (task, sample), not its id (a fresh uuid per run). Completion sample
    numbers and random draws derive from it, so the same seed gives the same completions."""
    return f"{traj.task_id}/{traj.sample}"


def sampled_prefix_lengths(traj: Trajectory, which: PrefixLengths, per_source: int | None, seed: int) -> list[int]:
    """`prefix_lengths_of(traj, which)`, or at most `per_source` of them drawn without replacement (the same
    draw for the same (seed, task, sample): a re-run draws the same states), in increasing order."""
    lengths = prefix_lengths_of(traj, which)
    if per_source is None or len(lengths) <= per_source:
        return lengths
    return sorted(stable_rng(seed, source_key(traj), "prefixes").sample(lengths, per_source))


def completion_items(sources: Iterable[Trajectory], which: PrefixLengths, completions: int,
                     candidates: CandidateConfig | None = None, per_source: int | None = None,
                     seed: int = 0) -> list[WorkItem]:
    """One `WorkItem` per (source, prefix length, completion index), source-major; with `candidates`, per
    (source, state, candidate action, completion index) (`candidate_items`). `per_source`: at most that many
    prefixes of each source, drawn with `seed` (`sampled_prefix_lengths`)."""
    if candidates is not None:
        return candidate_items(sources, which, completions, candidates, per_source, seed)
    if completions < 1:
        raise ValueError(f"completions must be >= 1, got {completions}")
    items = []
    for src in sources:
        for k in sampled_prefix_lengths(src, which, per_source, seed):
            for i in range(completions):
                items.append(WorkItem(src.task_id, completion_sample(source_key(src), k, i), src.seed,
                                      start=tuple(src.steps[:k]),
                                      meta=(("prefix_of", src.id), ("prefix_len", k))))
    return items


# -- candidate actions at stored states (MC estimates of Q(s_t, a) for several a) ---------------------------
class CandidateConfig(BaseModel):
    """Which actions to try at each chosen state s_t of a source (`StartConfig.candidates`): the env's
    expert action, the action the source took, and/or `random` other admissible actions (drawn without
    replacement, per (seed, the source's task and sample, t): reproducible across runs). Duplicates are tried
    once."""

    model_config = ConfigDict(extra="forbid")

    expert: bool = Field(default=True, description="the expert action (`info['expert_action']`: the source "
                                                   "was rolled out with expert hints)")
    taken: bool = Field(default=False, description="the source's own action a_t")
    random: int = Field(default=2, ge=0, description="other admissible actions drawn at random")
    seed: int = Field(default=0, ge=0, description="seeds the random actions' draw (with the source's task and "
                      "sample and t)")

    @model_validator(mode="after")
    def _some(self) -> CandidateConfig:
        if not (self.expert or self.taken or self.random):
            raise ValueError("no candidates: set expert, taken or random > 0")
        return self


def candidate_actions(traj: Trajectory, t: int, cfg: CandidateConfig) -> list[str]:
    """The candidate actions at state s_t of `traj` (expert first, then taken, then the random ones)."""
    if not 0 <= t < len(traj.steps):
        raise ValueError(f"trajectory {traj.id}: state {t} is outside 0..{len(traj.steps) - 1} (a candidate "
                         "start needs the stored state, i.e. a step t that was acted in)")
    info = traj.steps[t].info
    out: list[str] = []
    if cfg.expert:
        if "expert_action" not in info:
            raise ValueError(f"trajectory {traj.id} step {t}: field 'info.expert_action' is missing (roll the "
                             "source out with expert hints, e.g. env_kwargs expert_hints=true)")
        out.append(str(info["expert_action"]))
    if cfg.taken and traj.steps[t].action not in out:
        out.append(traj.steps[t].action)
    if cfg.random:
        others = sorted(set(map(str, info.get("admissible_actions") or ())) - set(out))
        out += stable_rng(cfg.seed, source_key(traj), t).sample(others, min(cfg.random, len(others)))
    return out


def candidate_sample(source_id: str, t: int, action: str, index: int) -> int:
    """The 31-bit sample number of completion `index` after candidate `action` at state t of a source:
    distinct per (state, candidate, completion), so resume tells them apart."""
    digest = hashlib.sha256(f"candidate/{source_id}/{t}/{action}/{index}".encode()).digest()
    return int.from_bytes(digest[:4], "big") >> 1


def candidate_step(traj: Trajectory, t: int, action: str) -> Step:
    """The replayed step that takes `action` at s_t: the source's observation and state info (admissible
    and expert actions) at t, `info["candidate"] = True`. Its reward and `done` are not observed (the env
    replays it with the prefix); outcome-based estimates read only the episode's end."""
    state = {k: v for k, v in traj.steps[t].info.items() if k in STATE_INFO_KEYS}
    return Step(observation=traj.steps[t].observation, action=action, info={**state, "candidate": True})


def candidate_items(sources: Iterable[Trajectory], which: PrefixLengths, completions: int,
                    cfg: CandidateConfig, per_source: int | None = None, seed: int = 0) -> list[WorkItem]:
    """One `WorkItem` per (source, state t, candidate a, completion index): replay the source's first t
    steps, then a, then the agent continues. `meta`: `prefix_of`, `prefix_len` = t, `candidate` = a (so
    `steps[t]` of the completion is the candidate step). `which`: the states t ('states' = 0..T−1, or a
    list of t < T; 'steps' is refused, its last prefix is a final state with nothing to act in)."""
    if completions < 1:
        raise ValueError(f"completions must be >= 1, got {completions}")
    if which == "steps":
        raise ValueError("candidate starts are states: use prefix_lengths 'states' or a list of t < T")
    items = []
    for src in sources:
        for t in sampled_prefix_lengths(src, which, per_source, seed):
            for a in candidate_actions(src, t, cfg):
                start = (*src.steps[:t], candidate_step(src, t, a))
                meta = (("prefix_of", src.id), ("prefix_len", t), ("candidate", a))
                items += [WorkItem(src.task_id, candidate_sample(source_key(src), t, a, i), src.seed, start=start,
                                   meta=meta)
                          for i in range(completions)]
    return items

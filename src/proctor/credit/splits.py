"""Train / validation / test splits by task, never by row (docs/methods.md §1.4).

Splitting rows (AgentPRM's released code) puts prefixes of the same game on both sides. Here every task
(env, task_id) goes to exactly one split: tasks are ordered by a seeded BLAKE2b hash of their name and cut
into consecutive blocks of sizes round(f·N), so the assignment is deterministic, independent of the input
order, and exact in its proportions. `check_no_leak` verifies a set of records.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from hashlib import blake2b

from proctor.trajectory import Trajectory

TaskKey = tuple[str, str]
#: the split names of `proctor.envs.SPLITS` (credit depends on the trajectory schema only)
SPLITS: tuple[str, ...] = ("train", "valid", "test")


class SplitLeakError(ValueError):
    """A task or a state appears in more than one split."""


def _rank(task: TaskKey, seed: int) -> bytes:
    return blake2b(f"{seed}\x00{task[0]}\x00{task[1]}".encode(), digest_size=16).digest()


def split_tasks(tasks: Iterable[TaskKey], fractions: Sequence[float] = (0.8, 0.1, 0.1), seed: int = 0,
                names: Sequence[str] = SPLITS) -> dict[TaskKey, str]:
    """Assign each distinct task to one split; block sizes round(f·N), the remainder to the last split."""
    if len(fractions) != len(names):
        raise ValueError(f"{len(fractions)} fractions for {len(names)} splits {tuple(names)}")
    if any(f < 0 for f in fractions) or abs(sum(fractions) - 1.0) > 1e-9:
        raise ValueError(f"split fractions must be >= 0 and sum to 1, got {tuple(fractions)}")
    ordered = sorted(set(tasks), key=lambda t: (_rank(t, seed), t))
    out: dict[TaskKey, str] = {}
    start, acc = 0, 0.0
    for i, (name, f) in enumerate(zip(names, fractions, strict=True)):
        acc += f
        end = len(ordered) if i == len(names) - 1 else round(acc * len(ordered))
        for t in ordered[start:end]:
            out[t] = name
        start = end
    return out


def with_splits(trajs: Iterable[Trajectory], assignment: Mapping[TaskKey, str]) -> list[Trajectory]:
    """Copies of `trajs` whose `split` is their task's split."""
    out = []
    for t in trajs:
        try:
            split = assignment[(t.env, t.task_id)]
        except KeyError:
            raise KeyError(f"trajectory {t.id!r}: task {(t.env, t.task_id)!r} has no split") from None
        out.append(t if t.split == split else t.model_copy(update={"split": split}))
    return out


def check_no_leak(records: Iterable) -> None:
    """Raise `SplitLeakError` if a task, or a state key, of the records appears in two splits."""
    seen_task: dict[TaskKey, str] = {}
    seen_state: dict[str, str] = {}
    for r in records:
        task = (r.env, r.task_id)
        if seen_task.setdefault(task, r.split) != r.split:
            raise SplitLeakError(f"task {task!r} is in splits {seen_task[task]!r} and {r.split!r} "
                                 f"(record of trajectory {r.trajectory_id!r})")
        key = getattr(r, "state_key", "")
        if key and seen_state.setdefault(key, r.split) != r.split:
            raise SplitLeakError(f"state {key} is in splits {seen_state[key]!r} and {r.split!r} "
                                 f"(record of trajectory {r.trajectory_id!r})")

"""ScienceWorld (Wang et al., 2022): 30 elementary-science tasks and their variations, in a JVM simulator.

Needs `pip install 'proctor[scienceworld]'` and Java >= 11 on PATH. A task id is "<task name>/<variation>"
("boil/12"); the splits train/valid/test are the package's train/dev/test variations of every task (7,207
variations in all: 3,592/1,796/1,819), listed by the simulator on first use and cached per process, and
ordered round robin over the tasks (so `--tasks 2` with `tasks=[a, b]` runs a variation of a and one of b).
`--step-timeout` also bounds `reset` in worker processes, and the first reset in a worker starts the JVM
(~2 s) and loads the task (seconds more with `expert_hints`, which generates the gold path): keep it at 30 s
or more.

- Score: the simulator's 0-100 (it drops to -100 and ends the episode on a fatal move, such as focusing on the
  wrong object). `info["score"]` = clip(score, 0, 100) / 100, `info["raw_score"]` the simulator's integer,
  reward = the increment of `info["score"]` (so an episode's rewards add up to its final `info["score"]`),
  `won` when the score reaches 100. The seed is unused: the variation determines the episode.
- Actions: free text; an unparsable one gets "No known action matches that input." (`valid` False); an
  ambiguous one gets a numbered list of readings, and the next action is the number of the one meant.
  `admissible_actions` are the simulator's valid action-object combinations (sorted; hundreds to thousands,
  0.1-1 s to compute on every step): `list_actions=False` skips them (the list is then None).
- Determinism: the simulator lists a room's objects (and numbers the readings of an ambiguous action) in the
  iteration order of Java hash sets, i.e. by the JVM's identity hash codes, which depend on everything the JVM
  did before: a reset or reload of the same variation can list the same objects in another order. With
  `deterministic=True` (default) the JVM runs with `-XX:hashCode=2` (every identity hash is 1, so sets
  iterate in insertion order) and an episode is a function of its variation and actions alone, in any JVM
  and after any history; this costs ~25% of the simulator's speed (measured on boil and grow-plant).
- Expert (`expert_hints=True`): the gold action sequence that the simulator generates at load
  (`generateGoldPath`, seconds for a few tasks, so only then); the next gold action while the actions so far
  follow it, None once they deviate.
- Cost: one env object = one simulator JVM (py4j), started on first use (~2 s), reused across resets (a
  task is reloaded only when the task or variation changes), shut down by `close()`. A JVM cannot be deep-
  copied, so `clone()` starts a second JVM and replays the actions.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

import scienceworld
from scienceworld.constants import ID2TASK

from proctor.envs.base import SPLITS, EnvError, StepOutcome, TextEnv
from proctor.envs.gold_path import next_on_path

#: the package's variation lists behind proctor's splits
SPLIT_QUERIES: dict[str, str] = {"train": "get_variations_train", "valid": "get_variations_dev",
                                 "test": "get_variations_test"}
INVALID_FEEDBACK = "No known action matches that input."
#: moves the JVM side may count before it ends an episode by itself (proctor's max_steps ends it first)
_JVM_STEP_LIMIT = 10**9
#: JVM options for `deterministic=True`: constant identity hash codes (see the module docstring)
DETERMINISTIC_JVM_OPTIONS = "-XX:+UnlockExperimentalVMOptions -XX:hashCode=2"
#: (task name, split) -> variations; the lists are fixed by the package, so one query per process
_VARIATIONS: dict[tuple[str, str], list[int]] = {}


def task_names() -> list[str]:
    """The 30 task names, in the package's order (1-1 "boil" ... 10-2 "mendelian-genetics-unknown-plant")."""
    return list(ID2TASK.values())


def parse_task_id(task_id: str) -> tuple[str, int]:
    """"boil/12" -> ("boil", 12); a clear ValueError for anything else."""
    name, sep, variation = task_id.rpartition("/")
    if not sep or not variation.isdigit():
        raise ValueError(f"scienceworld: task id {task_id!r} is not '<task name>/<variation>' "
                         "(e.g. 'boil/12')")
    if name not in task_names():
        raise ValueError(f"scienceworld: unknown task {name!r} in task id {task_id!r}; known: {task_names()}")
    return name, int(variation)


@contextmanager
def java_tool_options(options: str) -> Iterator[None]:
    """JAVA_TOOL_OPTIONS += `options` while a JVM launches (the package's launcher takes no JVM options)."""
    if not options:
        yield
        return
    before = os.environ.get("JAVA_TOOL_OPTIONS")
    os.environ["JAVA_TOOL_OPTIONS"] = f"{before} {options}" if before else options
    try:
        yield
    finally:
        if before is None:
            del os.environ["JAVA_TOOL_OPTIONS"]
        else:
            os.environ["JAVA_TOOL_OPTIONS"] = before


def normalized_score(raw: int) -> float:
    """info["score"] = clip(raw, 0, 100) / 100 for the simulator's integer score raw in [-100, 100]."""
    return min(max(raw, 0), 100) / 100


class ScienceWorldEnv(TextEnv):
    """ScienceWorld's tasks x variations; graded score, valid action-object combinations, gold-path expert."""

    name: ClassVar[str] = "scienceworld"
    copyable: ClassVar[bool] = False  # the simulator lives in a JVM: clone() replays

    def __init__(self, max_steps: int = 100, expert_hints: bool = False, tasks: list[str] | None = None,
                 simplifications: str = "", list_actions: bool = True, deterministic: bool = True):
        """`tasks`: the task names whose variations make the splits (default all 30); `simplifications`: the
        package's comma-separated list ("easy", "openDoors,teleportAction", ...); max_steps 100 is the
        package's own default step limit."""
        known = task_names()
        chosen = list(tasks) if tasks is not None else known
        unknown = [t for t in chosen if t not in known]
        if unknown or not chosen:
            raise ValueError(f"scienceworld: unknown or no task names {unknown or chosen}; known: {known}")
        super().__init__(max_steps=max_steps, expert_hints=expert_hints, tasks=tasks,
                         simplifications=simplifications, list_actions=list_actions,
                         deterministic=deterministic)
        self.tasks = chosen
        self.simplifications = simplifications
        self.list_actions = list_actions
        self.deterministic = deterministic
        self._sim: Any = None
        self._loaded: tuple[str, int] | None = None
        self._gold: list[str] = []
        self._raw_score = 0

    @property
    def sim(self) -> Any:
        """The package's `ScienceWorldEnv` (one JVM), started on first use."""
        if self._sim is None:
            with java_tool_options(DETERMINISTIC_JVM_OPTIONS if self.deterministic else ""):
                self._sim = scienceworld.ScienceWorldEnv("", envStepLimit=_JVM_STEP_LIMIT)
        return self._sim

    def variations(self, task: str, split: str) -> list[int]:
        """The variations of `task` in `split` (the package's train/dev/test lists)."""
        if split not in SPLIT_QUERIES:
            raise ValueError(f"scienceworld: unknown split {split!r}; known: {SPLITS}")
        if (task, split) not in _VARIATIONS:
            self.sim.load(task, 0, "")
            self._loaded = None
            for s, query in SPLIT_QUERIES.items():
                _VARIATIONS[(task, s)] = sorted(getattr(self.sim, query)())
        return list(_VARIATIONS[(task, split)])

    def task_ids(self, split: str) -> list[str]:
        """Round robin over the tasks (variation i of every task, then i + 1), so that the first N ids
        (`proctor rollout --tasks N`) cover min(N, number of tasks) different tasks."""
        per_task = [self.variations(task, split) for task in self.tasks]
        return [f"{task}/{vs[i]}" for i in range(max(map(len, per_task)))
                for task, vs in zip(self.tasks, per_task, strict=True) if i < len(vs)]

    def _reset(self, task_id: str, seed: int) -> tuple[str, dict[str, Any]]:
        task, variation = parse_task_id(task_id)
        if self._loaded != (task, variation):
            available = self.sim.get_max_variations(task)
            if variation >= available:
                raise ValueError(f"scienceworld: task {task!r} has variations 0..{available - 1}, "
                                 f"not {variation}")
            self._loaded = None
            self.sim.load(task, variation, self.simplifications, generateGoldPath=self.expert_hints)
            self._gold = list(self.sim.get_gold_action_sequence()) if self.expert_hints else []
            self._loaded = (task, variation)
        # the package's reset()/step() also build the valid-action list on every call: go to its simulator
        self.sim.server.reset()
        obs = self.sim.server.step("look around")
        self._raw_score = self._read_score()
        return obs, {"task": self.sim.get_task_description(), "task_name": task, "variation": variation,
                     "raw_score": self._raw_score, "score": normalized_score(self._raw_score)}

    def _read_score(self) -> int:
        return round(100 * self.sim.server.getScore())

    def _step(self, action: str) -> StepOutcome:
        if self._loaded is None:
            raise EnvError("scienceworld: step() before reset()")
        obs = self.sim.server.step(action)
        raw = self._read_score()
        reward = normalized_score(raw) - normalized_score(self._raw_score)
        self._raw_score = raw
        won = raw >= 100
        done = won or raw < 0 or bool(self.sim.server.getCompleted())
        valid = not obs.startswith(INVALID_FEEDBACK)
        return StepOutcome(obs, reward, terminated=done, won=won, valid=valid,
                           info={"raw_score": raw, "score": normalized_score(raw)})

    def admissible_actions(self) -> list[str] | None:
        if not self.list_actions:
            return None
        return sorted(set(self.sim.get_valid_action_object_combinations()))

    def gold_path(self) -> list[str]:
        """The loaded variation's gold action sequence (needs expert_hints=True; it may run past the win)."""
        if not self.expert_hints:
            raise EnvError("scienceworld: the gold path exists only in envs made with expert_hints=True")
        return list(self._gold)

    def expert_action(self) -> str | None:
        """The next gold action while the actions so far follow the gold path, else None."""
        return next_on_path(self._gold, self.actions) if self.expert_hints else None

    def close(self) -> None:
        if self._sim is not None:
            self._sim.close()
        self._sim, self._loaded, self._gold = None, None, []

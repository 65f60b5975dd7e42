"""`ArithmeticEnv`: multi-step word problems solved one step per action, with exact per-step labels.

Each action is one solution line ("48 / 2 = 24"); "Answer: 24" ends the episode with reward 1 if the
number is the answer, else 0 (earlier steps get reward 0). Every step carries its ground-truth label
(grammar and rules: `checker.py`), so a PRM's step accuracy can be measured exactly:

    valid                 the line parses as an equation or an answer (format validity; `StepResult.valid`)
    info["step_correct"]  the step is right and follows from the problem (or earlier correct steps)
    info["step_error"]    None, or the error kind: format, unknown_quantity, arithmetic, builds_on_error,
                          wrong_operation, off_path, wrong_answer

Observations: the problem with instructions first; then "" after each format-valid step (the env gives no
feedback that would leak the labels) and a format reminder after an invalid one.
Task ids are `arithmetic/s<seed>/<split>/<index>`; the problem is a deterministic function of the id
(each split draws from its own generator stream; the splits' problems are disjoint, which the tests
check); the episode seed does not change it.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, ClassVar

from proctor.envs.arithmetic.checker import Earlier, label_step, parse_step
from proctor.envs.arithmetic.checker import __doc__ as STEP_GRAMMAR
from proctor.envs.arithmetic.experts import next_line
from proctor.envs.arithmetic.expr import Number, Op, leaves, post_order, valid_values
from proctor.envs.arithmetic.problems import Problem, generate
from proctor.envs.base import SPLITS, EnvError, StepOutcome, TextEnv
from proctor.envs.registry import register

DEFAULT_NUM_TASKS: dict[str, int] = {"train": 5000, "valid": 500, "test": 500}
INSTRUCTIONS = (
    "Solve the problem step by step. Write one calculation per step, such as \"48 / 2 = 24\", using only "
    "numbers from the problem or from your earlier steps, and finish with \"Answer: <number>\"."
)
INVALID_STEP = "Invalid step: write one calculation such as \"48 / 2 = 24\", or \"Answer: <number>\"."
_TASK_ID = re.compile(r"^arithmetic/s(?P<seed>\d+)/(?P<split>\w+)/(?P<index>\d+)$")


def problem_for(task_id: str) -> Problem:
    """The problem of a task id (a pure function of the id)."""
    m = _TASK_ID.match(task_id)
    if not m or m["split"] not in SPLITS:
        raise ValueError(f"not an arithmetic task id: {task_id!r} (expected arithmetic/s<seed>/<split>/<index>, "
                         f"split one of {SPLITS})")
    return generate(random.Random(f"arithmetic:{m['seed']}:{m['split']}:{int(m['index'])}"))


@dataclass(frozen=True)
class TaskData:
    """What the checker needs about a problem, computed once per task id."""

    problem: Problem
    quantities: frozenset[Number]   # numbers stated in the text or implied by it ("half" = 2)
    valid: frozenset[Number]        # `expr.valid_values`
    reference: tuple[Op, ...]       # the reference solution's operations, children first


@lru_cache(maxsize=8192)
def task_data(task_id: str) -> TaskData:
    problem = problem_for(task_id)
    stated = {int(n) for n in re.findall(r"\d+", problem.text)}
    return TaskData(problem, frozenset(stated | set(leaves(problem.expr))), valid_values(problem.expr),
                    tuple(post_order(problem.expr)))


@register("arithmetic", "Stepwise arithmetic word problems with exact per-step validity labels (PRM800K-style)")
class ArithmeticEnv(TextEnv):
    """Stepwise arithmetic word problems with exact per-step validity labels (PRM800K-style)."""

    help_text: ClassVar[str] = (STEP_GRAMMAR or "").strip()

    def __init__(self, seed: int = 0, num_tasks: dict[str, int] | None = None, max_steps: int = 10,
                 expert_hints: bool = False):
        counts = {**DEFAULT_NUM_TASKS, **(num_tasks or {})}
        unknown = set(counts) - set(SPLITS)
        if unknown:
            raise ValueError(f"arithmetic: unknown split(s) in num_tasks: {sorted(unknown)}; known: {SPLITS}")
        super().__init__(max_steps=max_steps, expert_hints=expert_hints, seed=seed, num_tasks=counts)
        self.task_seed = int(seed)
        self.num_tasks = counts
        self.data: TaskData | None = None
        self.earlier: list[Earlier] = []

    def task_ids(self, split: str) -> list[str]:
        if split not in self.num_tasks:
            raise ValueError(f"arithmetic: unknown split {split!r}; known: {SPLITS}")
        return [f"arithmetic/s{self.task_seed}/{split}/{i:05d}" for i in range(self.num_tasks[split])]

    def _reset(self, task_id: str, seed: int) -> tuple[str, dict[str, Any]]:
        self.data = task_data(task_id)
        self.earlier = []
        problem = self.data.problem
        return f"{problem.text}\n\n{INSTRUCTIONS}", {"task": problem.text, "family": problem.family}

    def _step(self, action: str) -> StepOutcome:
        step = parse_step(action)
        if step is None:
            return StepOutcome(INVALID_STEP, 0.0, terminated=False, valid=False,
                               info={"step_correct": False, "step_error": "format"})
        data = self._data()
        label = label_step(step, data.quantities, data.valid, data.problem.expr.result, self.earlier)
        info = {"step_correct": label.correct, "step_error": label.error}
        if step.is_answer:
            return StepOutcome("", float(label.correct), terminated=True, won=label.correct, info=info)
        self.earlier.append(Earlier(step.value, label.correct))
        return StepOutcome("", 0.0, terminated=False, info=info)

    def expert_action(self) -> str | None:
        """The next step of the reference solution not yet computed by a correct step, else the answer."""
        data = self._data()
        return next_line(data.reference, {e.value for e in self.earlier if e.correct}, data.problem.expr.result)

    def _data(self) -> TaskData:
        if self.data is None:
            raise EnvError("arithmetic: step() before reset()")
        return self.data

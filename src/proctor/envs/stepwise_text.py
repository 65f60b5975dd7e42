"""`StepwiseTextEnv` (`stepwise`): plain text problems from a file, solved one reasoning step per action.

It makes stepwise text an environment, so everything proctor does over env steps works on it unchanged: an `hf`
agent generates one step per action, `proctor rollout` + `proctor targets -m mc-q` label steps, and per-step
best-of-N, beam search and DVTS (`proctor eval --search beam`) search over reasoning steps with a PRM
(sdiehl/prm's PRM-guided tree decoding, with every partial solution's candidates scored in one batched call).

The file (`path`): JSON lines, or one JSON list, one problem per row; errors name the file, row and field.
- `problem` (string, required; another field name with `problem_field`): the task text;
- `answer` (optional; `answer_field`): the final answer a solution must reach;
- `id` (optional): the task id is `stepwise/<id>`, else `stepwise/<row index>`;
- `split` (optional): `train`, `valid` or `test`; without it every row is a `test` problem.

Each action is one step. A step that states a final answer (`answer_pattern`: "The answer is X", "Answer: X"
or "\\boxed{X}") ends the episode: reward 1 if X equals the row's answer after normalisation (case, spaces,
`$`, a trailing period, thousands separators), else 0; `info["answer"]` records X. Without an answer in the row
the reward is 0 and the episode is a failure by definition (`info["answer_known"]` is False), so use such files
for search and scoring, not for success rates. Observations after a step are empty: the env gives no feedback.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from proctor.envs.base import SPLITS, EnvError, StepOutcome, TextEnv
from proctor.envs.registry import register

INSTRUCTIONS = "Solve the problem step by step, one step per reply, and end with \"The answer is <answer>\"."
ANSWER_PATTERN = r"(?:[Tt]he (?:final )?answer is|Answer:)\s*(?P<a>.+?)\s*$|\\boxed\{(?P<b>[^{}]*)\}"


def first_observation(problem: str) -> str:
    """What the env shows before the first step: the problem, then the instructions."""
    return f"{problem}\n\n{INSTRUCTIONS}"


def normalise_answer(text: str) -> str:
    """Lower case, no spaces or `$`, no trailing period, no thousands separators ("1,000" → "1000")."""
    out = re.sub(r"(?<=\d),(?=\d{3}\b)", "", text.strip().lower())
    return re.sub(r"[\s$]", "", out).rstrip(".")


def final_answer(step: str, pattern: str = ANSWER_PATTERN) -> str | None:
    """The final answer a step states, or None."""
    m = re.search(pattern, step.strip(), flags=re.MULTILINE)
    if m is None:
        return None
    groups = [g for g in m.groups() if g is not None]
    return groups[0] if groups else m.group(0)


@lru_cache(maxsize=16)
def load_problems(path: str, problem_field: str, answer_field: str) -> tuple[dict[str, Any], ...]:
    """The rows of a problems file as {id, split, problem, answer}, checked row by row."""
    file = Path(path)
    if not file.is_file():
        raise ValueError(f"stepwise: no problems file at {file}")
    text = file.read_text(encoding="utf-8")
    if text.lstrip().startswith("["):
        try:
            rows = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"{file}: not valid JSON ({e})") from None
    else:
        rows = []
        for i, line in enumerate(text.splitlines()):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise ValueError(f"{file}: line {i + 1}: not valid JSON ({e})") from None
    out, seen = [], set()
    for i, row in enumerate(rows):
        where = f"{file}: row {i}"
        if not isinstance(row, dict):
            raise ValueError(f"{where}: expected an object, got {type(row).__name__}")  # noqa: TRY004 (bad file)
        problem = row.get(problem_field)
        if not isinstance(problem, str) or not problem.strip():
            raise ValueError(f"{where}: field {problem_field!r} must be a non-empty string, got {problem!r}")
        answer = row.get(answer_field)
        if answer is not None and not isinstance(answer, str | int | float):
            raise ValueError(f"{where}: field {answer_field!r} must be a string or a number, got {answer!r}")
        split = row.get("split", "test")
        if split not in SPLITS:
            raise ValueError(f"{where}: field 'split' must be one of {SPLITS}, got {split!r}")
        task_id = f"stepwise/{row.get('id', i)}"
        if task_id in seen:
            raise ValueError(f"{where}: field 'id': {row.get('id')!r} is not unique")
        seen.add(task_id)
        out.append({"id": task_id, "split": split, "problem": problem.strip(),
                    "answer": None if answer is None else str(answer)})
    if not out:
        raise ValueError(f"{file}: no problems")
    return tuple(out)


@register("stepwise", "Plain text problems from a file (JSONL: problem, answer), one reasoning step per action")
class StepwiseTextEnv(TextEnv):
    """Plain text problems from a file, one reasoning step per action (see module docstring)."""

    copyable = False  # a copy replays the steps (cheap) rather than deep-copying every problem of the file

    def __init__(self, path: str, max_steps: int = 10, problem_field: str = "problem", answer_field: str = "answer",
                 answer_pattern: str = ANSWER_PATTERN, expert_hints: bool = False):
        super().__init__(max_steps=max_steps, expert_hints=expert_hints, path=str(path), problem_field=problem_field,
                         answer_field=answer_field, answer_pattern=answer_pattern)
        try:
            re.compile(answer_pattern)
        except re.error as e:
            raise ValueError(f"stepwise: answer_pattern {answer_pattern!r} is not a regular expression ({e})") from None
        self.pattern = answer_pattern
        self.rows = {r["id"]: r for r in load_problems(str(path), problem_field, answer_field)}
        self.row: dict[str, Any] | None = None

    def task_ids(self, split: str) -> list[str]:
        if split not in SPLITS:
            raise ValueError(f"stepwise: unknown split {split!r}; known: {SPLITS}")
        return [i for i, r in self.rows.items() if r["split"] == split]

    def _reset(self, task_id: str, seed: int) -> tuple[str, dict[str, Any]]:
        if task_id not in self.rows:
            raise EnvError(f"stepwise: no task {task_id!r} in {self._spec_kwargs['path']}")
        self.row = self.rows[task_id]
        return first_observation(self.row["problem"]), {"task": self.row["problem"]}

    def _step(self, action: str) -> StepOutcome:
        if self.row is None:
            raise EnvError("stepwise: step() before reset()")
        answer = final_answer(action, self.pattern)
        if answer is None:
            return StepOutcome("", 0.0, terminated=False)
        known = self.row["answer"] is not None
        won = known and normalise_answer(answer) == normalise_answer(self.row["answer"])
        return StepOutcome("", float(won), terminated=True, won=won, info={"answer": answer, "answer_known": known})

"""`TwentyQuestionsEnv`: ArCHer's twenty-questions dialogue task with a deterministic knowledge-base oracle.

The env thinks of an object; each turn the agent asks a yes/no question (grammar: `questions.py`) and the
oracle answers "Yes.", "No." or "Invalid question.". Asking "Is it a <object>?" about the secret object
(or one of its synonyms) wins. Rewards follow ArCHer: -1 per turn, 0 on the winning turn, at most 20
turns, so an episode's return is in -20..0 (-(turns - 1) when won, -20 when lost).
`info["score"]` is 1.0 if won else 0.0; `info["valid"]` is False for invalid questions.

Task ids are `twenty_questions/s<seed>/<split>/<index>`: the objects are shuffled with the env seed and
split 60/20/20 into train/valid/test, and the index names an object of that split. The episode seed does
not change anything (the oracle is deterministic).
"""

from __future__ import annotations

import random
import re
from functools import cache
from typing import Any, ClassVar

from proctor.envs.base import SPLITS, StepOutcome, TextEnv
from proctor.envs.registry import register
from proctor.envs.twenty_questions.expert import best_question, consistent_candidates
from proctor.envs.twenty_questions.knowledge import KBObject, load_objects
from proctor.envs.twenty_questions.questions import (
    canonical_questions,
    guess_question,
    parse_question,
    question_grammar,
)

SPLIT_FRACTIONS: dict[str, float] = {"train": 0.6, "valid": 0.2, "test": 0.2}
OPENING = (
    "I am thinking of an everyday object. Ask me yes/no questions to find out what it is; you have "
    "{turns} questions. Guess it by asking \"Is it a <object>?\"."
)
TASK = "Find the secret object by asking yes/no questions (twenty questions)."
YES, NO, INVALID = "Yes.", "No.", "Invalid question."
_TASK_ID = re.compile(r"^twenty_questions/s(?P<seed>\d+)/(?P<split>\w+)/(?P<index>\d+)$")


@cache
def split_objects(seed: int, split: str) -> tuple[KBObject, ...]:
    """The objects of a split: a seeded shuffle of the knowledge base cut 60/20/20 (disjoint)."""
    if split not in SPLIT_FRACTIONS:
        raise ValueError(f"twenty_questions: unknown split {split!r}; known: {SPLITS}")
    objects = list(load_objects())
    random.Random(f"twenty_questions:{seed}").shuffle(objects)
    n_train = round(SPLIT_FRACTIONS["train"] * len(objects))
    n_valid = round(SPLIT_FRACTIONS["valid"] * len(objects))
    bounds = {"train": (0, n_train), "valid": (n_train, n_train + n_valid), "test": (n_train + n_valid, None)}
    lo, hi = bounds[split]
    return tuple(objects[lo:hi])


def parse_task_id(task_id: str) -> tuple[int, str, int]:
    m = _TASK_ID.match(task_id)
    if not m:
        raise ValueError(f"not a twenty_questions task id: {task_id!r} "
                         "(expected twenty_questions/s<seed>/<split>/<index>)")
    seed, split, index = int(m["seed"]), m["split"], int(m["index"])
    n = len(split_objects(seed, split))
    if index >= n:
        raise ValueError(f"twenty_questions task id {task_id!r}: index {index} out of range (split has {n})")
    return seed, split, index


@register("twenty_questions", "ArCHer's twenty questions: find a secret object with yes/no questions")
class TwentyQuestionsEnv(TextEnv):
    """ArCHer's twenty questions: find a secret object with yes/no questions."""

    help_text: ClassVar[str] = question_grammar()

    def __init__(self, seed: int = 0, max_steps: int = 20, expert_hints: bool = False):
        super().__init__(max_steps=max_steps, expert_hints=expert_hints, seed=seed)
        self.task_seed = int(seed)
        self.secret: KBObject | None = None
        self.prior = 0
        self.dialogue: list[tuple[str, str]] = []

    def task_ids(self, split: str) -> list[str]:
        n = len(split_objects(self.task_seed, split))
        return [f"twenty_questions/s{self.task_seed}/{split}/{i:03d}" for i in range(n)]

    def _reset(self, task_id: str, seed: int) -> tuple[str, dict[str, Any]]:
        env_seed, split, index = parse_task_id(task_id)
        members = split_objects(env_seed, split)
        self.secret = members[index]
        self.prior = sum(1 << o.index for o in members)
        self.dialogue = []
        return OPENING.format(turns=self.max_steps), {"task": TASK}

    def _step(self, action: str) -> StepOutcome:
        assert self.secret is not None
        query = parse_question(action)
        if query is None:
            answer, won = INVALID, False
        else:
            yes = query.holds(self.secret)
            answer, won = (YES if yes else NO), (yes and query.op == "guess")
        self.dialogue.append((action, answer))
        return StepOutcome(answer, 0.0 if won else -1.0, terminated=won, won=won, valid=query is not None)

    @classmethod
    def candidate_actions(cls) -> list[str]:
        """The grammar's canonical questions (one per attribute) and a guess of every object: there is no
        admissible list (any question is allowed), so a random agent draws from these."""
        return [q for q, _ in canonical_questions()] + [guess_question(o.name) for o in load_objects()]

    def expert_action(self) -> str | None:
        """The information-gain question given the answers so far, with the objects of this task's split
        as the prior (privileged: it knows the task set, not the secret)."""
        return best_question(consistent_candidates(self.dialogue, self.prior))

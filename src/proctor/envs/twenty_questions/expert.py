"""The information-gain expert for twenty questions: a pure function of the dialogue so far.

The candidate set is every knowledge-base object (or every object of a prior set) consistent with the
answers received. With n candidates, a question that k of them answer "yes" has expected information gain
(answers are deterministic, so the gain is the entropy of the answer under a uniform prior over candidates)

    IG(q) = H(k / n),   H(p) = -p log2 p - (1 - p) log2 (1 - p),

which is maximal where min(k, n - k) is; the expert asks the canonical question with the largest
min(k, n - k) (ties: the first in `canonical_questions()` order), and guesses as soon as at most two
candidates are left (a guess then splits them as well as any question can, and may end the game).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

from proctor.envs.experts import register_expert
from proctor.envs.twenty_questions.knowledge import load_objects
from proctor.envs.twenty_questions.questions import (
    Query,
    canonical_questions,
    guess_question,
    normalize,
    parse_question,
)
from proctor.prompts.turns import Prefix


@cache
def query_mask(query: Query) -> int:
    """Bit i set iff object i of the knowledge base answers `query` with yes."""
    return sum(1 << o.index for o in load_objects() if query.holds(o))


def all_objects_mask() -> int:
    return (1 << len(load_objects())) - 1


def read_answer(text: str) -> bool | None:
    """True for a "Yes." answer, False for "No.", None for anything else (an invalid question)."""
    words = normalize(text).split()
    if words[:1] == ["yes"]:
        return True
    if words[:1] == ["no"]:
        return False
    return None


def consistent_candidates(dialogue: Sequence[tuple[str, str]], prior: int) -> int:
    """The objects of `prior` (a bit mask) consistent with every (question, answer) pair.

    If no object is consistent with all answers (answers from another oracle), the objects contradicting
    the fewest answers are returned instead, so the expert always has a move."""
    constraints = []
    for question, answer in dialogue:
        yes, query = read_answer(answer), parse_question(question)
        if yes is not None and query is not None:
            constraints.append((query_mask(query), yes))
    mask = prior
    for m, yes in constraints:
        mask &= m if yes else ~m
    if mask:
        return mask
    mistakes = {}
    for i in _bits(prior):
        mistakes[i] = sum(bool(m >> i & 1) != yes for m, yes in constraints)
    fewest = min(mistakes.values())
    return sum(1 << i for i, n in mistakes.items() if n == fewest)


def _bits(mask: int) -> list[int]:
    out, i = [], 0
    while mask:
        if mask & 1:
            out.append(i)
        mask >>= 1
        i += 1
    return out


@cache
def _question_masks() -> tuple[tuple[str, int], ...]:
    return tuple((text, query_mask(query)) for text, query in canonical_questions())


def best_question(candidates: int) -> str:
    """Guess when <= 2 candidates remain, else the canonical question maximising min(k, n - k)."""
    n = candidates.bit_count()
    if n <= 2:
        return guess_question(load_objects()[_bits(candidates)[0]].name)
    best_text, best_score, perfect = None, 0, n // 2
    for text, mask in _question_masks():
        k = (candidates & mask).bit_count()
        score = min(n - k, k)
        if score > best_score:
            best_text, best_score = text, score
            if score == perfect:
                break
    if best_text is None:  # candidates no question separates: guess them one by one
        return guess_question(load_objects()[_bits(candidates)[0]].name)
    return best_text


def dialogue_of(prefix: Prefix) -> list[tuple[str, str]]:
    """(question, answer) pairs of a prefix: the answer to step i is the next step's observation."""
    if not prefix.history:
        return []
    answers = [s.observation for s in prefix.history[1:]] + [prefix.observation]
    return [(s.action, a) for s, a in zip(prefix.history, answers, strict=True)]


@register_expert("twenty_questions", "infogain")
def infogain_expert(prefix: Prefix) -> str:
    """Information-gain questioning over the whole knowledge base (see module docstring)."""
    return best_question(consistent_candidates(dialogue_of(prefix), all_objects_mask()))

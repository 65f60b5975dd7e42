"""The step grammar and the step checker: every solution line gets an exact ground-truth validity label.

Grammar (one step per action; case-insensitive; `$` signs and thousands commas are ignored):

    [label:] <expression> = <number> [words]     e.g. "48 / 2 = 24", "Cost: 3 * 4 = 12 dollars"
    Answer: <number> [words]                     ends the episode (also "The answer is 24")

An expression uses numbers, + - * / (also x, ×, ÷, −) and parentheses. A line that fits neither form is
format-invalid (`valid` False, error "format").

A format-valid equation step is correct iff all of these hold, checked in this order (the first failure
names the error):
  1. every number it uses is a quantity of the problem or the result of an earlier step   "unknown_quantity"
  2. the equation is true                                                                 "arithmetic"
  3. its result is a valid intermediate of the problem (`expr.valid_values`)               else:
     - "builds_on_error" if it uses the result of an earlier wrong step,
     - "wrong_operation" if it is a single operation and another of + - * / on the same two numbers
       gives a valid intermediate,
     - "off_path" otherwise (e.g. a dropped or misused quantity).
An answer step is correct iff its number is the problem's answer ("wrong_answer" otherwise).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction

from proctor.envs.arithmetic.expr import OPS, Number, apply_op

STEP_ERRORS: tuple[str, ...] = (
    "format", "unknown_quantity", "arithmetic", "builds_on_error", "wrong_operation", "off_path", "wrong_answer",
)
_NUMBER = r"\d+(?:\.\d+)?"
_SIGNED = rf"-?{_NUMBER}"
_ANSWER = re.compile(rf"^\s*(?:the\s+)?(?:final\s+)?answer(?:\s+is)?\s*[:=]?\s*(?P<value>{_SIGNED})\s*[a-z .]*$",
                     re.IGNORECASE)
_EQUATION = re.compile(rf"^\s*(?:[^=:]*:)?\s*(?P<lhs>[0-9.()+\-*/x ]+?)\s*=\s*(?P<rhs>{_SIGNED})\s*[a-z .]*$",
                       re.IGNORECASE)
_TOKEN = re.compile(rf"\s*(?:(?P<num>{_NUMBER})|(?P<op>[-+*/])|(?P<paren>[()]))")


@dataclass(frozen=True)
class ParsedStep:
    """A format-valid line: an answer (`is_answer`) or an equation lhs = value."""

    is_answer: bool
    value: Number
    operands: tuple[Number, ...] = ()
    ops: tuple[str, ...] = ()
    lhs_value: Number | None = None   # None: the left side divides by zero


@dataclass(frozen=True)
class StepLabel:
    correct: bool
    error: str | None = None


def _clean(line: str) -> str:
    line = line.replace("$", "").replace("×", "*").replace("÷", "/").replace("−", "-").replace("–", "-")
    return re.sub(r"(?<=\d),(?=\d{3}\b)", "", line)


def _number(text: str) -> Number:
    """An exact number from its text: an int when whole."""
    if "." not in text:
        return int(text)
    q = Fraction(text)
    return q.numerator if q.denominator == 1 else q


class _Expression:
    """Recursive-descent evaluation of + - * / with parentheses over exact fractions."""

    def __init__(self, text: str):
        self.tokens: list[tuple[str, str]] = []
        pos, text = 0, re.sub(r"(?<=[\d)\s])[xX](?=[\s\d(])", "*", text)
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if not m or m.end() == pos:
                if text[pos:].strip():
                    raise ValueError(f"unexpected {text[pos:]!r}")
                break
            kind = m.lastgroup or ""
            self.tokens.append((kind, m.group(kind)))
            pos = m.end()
        self.i = 0
        self.operands: list[Number] = []
        self.ops: list[str] = []
        self.divided_by_zero = False

    def evaluate(self) -> Number:
        value = self._sum()
        if self.i != len(self.tokens):
            raise ValueError("trailing tokens")
        return value

    def _peek(self) -> tuple[str, str] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def _sum(self) -> Number:
        value = self._product()
        while (t := self._peek()) and t[0] == "op" and t[1] in "+-":
            self.i += 1
            value = self._combine(t[1], value, self._product())
        return value

    def _product(self) -> Number:
        value = self._atom()
        while (t := self._peek()) and t[0] == "op" and t[1] in "*/":
            self.i += 1
            value = self._combine(t[1], value, self._atom())
        return value

    def _combine(self, op: str, a: Number, b: Number) -> Number:
        self.ops.append(op)
        result = apply_op(op, a, b)
        if result is None:
            self.divided_by_zero = True
            return 0
        return result

    def _atom(self) -> Number:
        t = self._peek()
        if t is None:
            raise ValueError("expression ends early")
        self.i += 1
        if t[0] == "num":
            self.operands.append(_number(t[1]))
            return self.operands[-1]
        if t == ("op", "-") and self._peek() is not None and self._peek()[0] == "num":  # a negative number
            self.i += 1
            self.operands.append(-_number(self.tokens[self.i - 1][1]))
            return self.operands[-1]
        if t == ("paren", "("):
            value = self._sum()
            if self._peek() != ("paren", ")"):
                raise ValueError("missing )")
            self.i += 1
            return value
        raise ValueError(f"unexpected {t[1]!r}")


def parse_step(line: str) -> ParsedStep | None:
    """The parsed step, or None when the line fits neither form of the grammar (module docstring)."""
    line = _clean(line.strip())
    m = _ANSWER.match(line)
    if m:
        return ParsedStep(True, _number(m["value"]))
    m = _EQUATION.match(line)
    if not m:
        return None
    try:
        expression = _Expression(m["lhs"])
        lhs = expression.evaluate()
    except ValueError:
        return None
    return ParsedStep(False, _number(m["rhs"]), tuple(expression.operands), tuple(expression.ops),
                      None if expression.divided_by_zero else lhs)


@dataclass(frozen=True)
class Earlier:
    """The result of an earlier format-valid equation step and whether that step was correct."""

    value: Number
    correct: bool


def label_step(step: ParsedStep, quantities: frozenset[Number], valid: frozenset[Number],
               answer: Number, earlier: Iterable[Earlier]) -> StepLabel:
    """The ground-truth label of one parsed step (rules in the module docstring)."""
    if step.is_answer:
        return StepLabel(True) if step.value == answer else StepLabel(False, "wrong_answer")
    earlier = list(earlier)
    results = {e.value for e in earlier}
    if any(o not in quantities and o not in results for o in step.operands):
        return StepLabel(False, "unknown_quantity")
    if step.lhs_value is None or step.lhs_value != step.value:
        return StepLabel(False, "arithmetic")
    if step.value in valid:
        return StepLabel(True)
    good = quantities | {e.value for e in earlier if e.correct}
    if any(o not in good for o in step.operands):
        return StepLabel(False, "builds_on_error")
    if len(step.ops) == 1 and len(step.operands) == 2:
        a, b = step.operands
        for op in OPS:
            alt = apply_op(op, a, b)
            if op != step.ops[0] and alt is not None and alt in valid:
                return StepLabel(False, "wrong_operation")
    return StepLabel(False, "off_path")

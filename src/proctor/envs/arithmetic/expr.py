"""Expression trees of word-problem solutions: values, solution steps, and the set of valid intermediates."""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property

Number = int | Fraction  # exact; an int whenever the value is whole (ints hash and compare like Fractions)


def _div(a: Number, b: Number) -> Number:
    if isinstance(a, int) and isinstance(b, int) and a % b == 0:
        return a // b
    q = Fraction(a) / b
    return q.numerator if q.denominator == 1 else q


OPS: dict[str, Callable[[Number, Number], Number]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": _div,
}


@dataclass(frozen=True)
class Num:
    """A quantity stated in (or implied by) the problem text."""

    value: int

    @property
    def result(self) -> Number:
        return self.value


@dataclass(frozen=True)
class Op:
    """A binary operation on two sub-expressions."""

    op: str
    left: Expr
    right: Expr

    @cached_property
    def result(self) -> Number:
        return OPS[self.op](self.left.result, self.right.result)


Expr = Num | Op


def apply_op(op: str, a: Number, b: Number) -> Number | None:
    """a op b, or None for a division by zero."""
    if op == "/" and b == 0:
        return None
    return OPS[op](a, b)


def fmt(x: Number) -> str:
    """A number as text: 24, 2.5 for a terminating decimal, else rounded to 2 decimals (8.33)."""
    if x.denominator == 1:
        return str(x.numerator)
    d = x.denominator
    while d % 2 == 0:
        d //= 2
    while d % 5 == 0:
        d //= 5
    return f"{float(x):g}" if d == 1 else f"{float(x):.2f}"


def format_step(a: Number, op: str, b: Number, c: Number) -> str:
    return f"{fmt(a)} {op} {fmt(b)} = {fmt(c)}"


def leaves(e: Expr) -> list[int]:
    """The stated quantities an expression uses, left to right."""
    return [e.value] if isinstance(e, Num) else leaves(e.left) + leaves(e.right)


def post_order(e: Expr) -> list[Op]:
    """The operations of `e` children-first: the order a step-by-step solution computes them."""
    if isinstance(e, Num):
        return []
    return post_order(e.left) + post_order(e.right) + [e]


def solution_steps(e: Expr) -> list[str]:
    """The reference solution: one "a op b = c" line per operation, then "Answer: <value>"."""
    lines = [format_step(o.left.result, o.op, o.right.result, o.result) for o in post_order(e)]
    return lines + [f"Answer: {fmt(e.result)}"]


def _flatten(e: Expr, group: str, sign: int) -> list[tuple[int, Expr]]:
    """Terms (sign, sub-expression) of a +/- chain, or factors (exponent, sub-expression) of a * / chain."""
    plus, minus = ("+", "-") if group == "sum" else ("*", "/")
    if isinstance(e, Op) and e.op in (plus, minus):
        return _flatten(e.left, group, sign) + _flatten(e.right, group, sign if e.op == plus else -sign)
    return [(sign, e)]


def valid_values(e: Expr) -> frozenset[Number]:
    """Every value a correct step may produce: the values of all sub-expressions of `e`, plus partial
    combinations of the operands of an associative chain (any order of summing or multiplying is right).

    A +/- chain with signed terms t_1..t_k admits sum(S) and -sum(S) for every subset S of size >= 2
    (e.g. for 48 - 10 + 5 also 48 + 5 = 53 and 10 - 5 = 5); a * / chain with factors f_i^(+-1) admits
    prod(S) and 1/prod(S) (for 48 / 2 * 3 also 48 * 3 = 144). A step is correct (Math-Shepherd's sense:
    it can still lead to the right answer) iff it produces one of these values."""
    out: set[Number] = set()
    _collect(e, out)
    return frozenset(out)


def _collect(e: Expr, out: set[Number]) -> None:
    out.add(e.result)
    if isinstance(e, Num):
        return
    group = "sum" if e.op in "+-" else "product"
    parts = _flatten(e, group, 1)
    for _, sub in parts:
        _collect(sub, out)
    # every subset of the chain's operands, grown one operand at a time: (size, combined value)
    subsets: list[tuple[int, Number]] = []
    for sign, sub in parts:
        v = sub.result
        if group == "sum":
            term = v if sign > 0 else -v
            grown = [(n + 1, t + term) for n, t in subsets] + [(1, term)]
        elif sign > 0:
            grown = [(n + 1, t * v) for n, t in subsets] + [(1, v)]
        elif v == 0:
            grown = []
        else:
            grown = [(n + 1, _div(t, v)) for n, t in subsets] + [(1, _div(1, v))]
        subsets += grown
    for n, t in subsets:
        if n >= 2:
            out.add(t)
            if group == "sum":
                out.add(-t)
            elif t != 0:
                out.add(_div(1, t))

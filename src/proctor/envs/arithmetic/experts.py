"""Experts for the arithmetic env: an exact `solver` that reads the problem text, and a `noisy` solver that
makes realistic mistakes at a tunable per-step rate. Both are pure functions of the `Prefix`."""

from __future__ import annotations

import random
from collections.abc import Callable, Collection, Sequence

from proctor.envs.arithmetic.checker import parse_step
from proctor.envs.arithmetic.expr import OPS, Expr, Num, Number, Op, apply_op, fmt, format_step, post_order
from proctor.envs.arithmetic.problems import parse
from proctor.envs.experts import register_expert
from proctor.prompts.turns import Prefix

DEFAULT_NOISE_RATE = 0.3
MISTAKES: tuple[str, ...] = ("wrong_operation", "slip", "drop")


def next_line(ops: Sequence[Op], computed: Collection[Number], answer: Number) -> str:
    """The first operation (children first) whose result has not been computed yet, else the answer.

    Every earlier operation's result is then among `computed`, so the line only uses problem quantities
    and results already written: it is always a correct step."""
    for o in ops:
        if o.result not in computed:
            return format_step(o.left.result, o.op, o.right.result, o.result)
    return f"Answer: {fmt(answer)}"


def true_results(actions: Sequence[str]) -> set[Number]:
    """Results of the equation lines among `actions` whose arithmetic is right."""
    out = set()
    for a in actions:
        step = parse_step(a)
        if step is not None and not step.is_answer and step.lhs_value == step.value:
            out.add(step.value)
    return out


@register_expert("arithmetic", "solver")
def solver_expert(prefix: Prefix) -> str:
    """Solve from the problem text (`prefix.task`) alone: parse it, then write the next missing step."""
    expr = parse(prefix.task).expr
    return next_line(post_order(expr), true_results([s.action for s in prefix.history]), expr.result)


Ref = tuple[str, Number]   # ("num", value) or ("step", index of an earlier plan step)


def plan_of(expr: Expr) -> list[tuple[str, Ref, Ref]]:
    """The operations of `expr` children-first, each operand a stated number or an earlier step."""
    steps: list[tuple[str, Ref, Ref]] = []

    def visit(e: Expr) -> Ref:
        if isinstance(e, Num):
            return ("num", e.value)
        left, right = visit(e.left), visit(e.right)
        steps.append((e.op, left, right))
        return ("step", len(steps) - 1)

    visit(expr)
    return steps


def _noisy_turn(plan: list[tuple[str, Ref, Ref]], values: dict[int, Number], j: int, rng: random.Random,
                rate: float) -> tuple[str, int, int | None]:
    """One turn of the noisy solver from plan step j: (line, next plan step, plan step the line wrote).

    With probability `rate` it makes one mistake, chosen uniformly: a wrong operation on the right
    numbers, an arithmetic slip (result off by 1, 2 or 10), or a dropped quantity (the step is skipped and
    its running operand carried on unchanged; the next step is written instead)."""
    def value(ref: Ref) -> Number:
        return ref[1] if ref[0] == "num" else values[int(ref[1])]

    if j >= len(plan):
        return f"Answer: {fmt(values[len(plan) - 1])}", j, None
    op, left, right = plan[j]
    a, b = value(left), value(right)
    true = apply_op(op, a, b)
    if true is None:  # an earlier slip made a divisor 0: the solver writes 0, which the checker rejects
        true = 0
    mistake = rng.choice(MISTAKES) if rng.random() < rate else None
    if mistake == "drop":
        values[j] = b if right[0] == "step" and left[0] == "num" else a
        if j + 1 == len(plan):
            return f"Answer: {fmt(values[j])}", j + 1, None
        return _noisy_turn(plan, values, j + 1, rng, 0.0)
    result = true
    if mistake == "wrong_operation":
        alternatives = [o for o in OPS if o != op and (r := apply_op(o, a, b)) is not None
                        and r.denominator == 1 and r >= 0 and r != true]
        if alternatives:
            op = rng.choice(alternatives)
            result = OPS[op](a, b)
        else:
            mistake = "slip"
    if mistake == "slip":
        result = true + rng.choice([d for d in (-10, -2, -1, 1, 2, 10) if true + d > 0] or [10])
    values[j] = result
    return format_step(a, op, b, result), j + 1, j


def noisy_solver(rate: float = DEFAULT_NOISE_RATE) -> Callable[[Prefix], str]:
    """A solver that makes one mistake per step with probability `rate` (see `_noisy_turn`).

    Randomness comes from a hash of (task_id, sample, seed, turn), so the policy is a deterministic
    function of the prefix and different samples make different mistakes. Earlier results are read from
    the prefix's own lines, so it carries its (or another policy's) earlier mistakes forward."""
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"noise rate must be in [0, 1], got {rate}")

    def policy(prefix: Prefix) -> str:
        plan = plan_of(parse(prefix.task).expr)
        values: dict[int, Number] = {}
        j = 0
        for turn in range(len(prefix.history) + 1):
            rng = random.Random(f"noisy:{prefix.task_id}:{prefix.sample}:{prefix.seed}:{turn}")
            line, j, wrote = _noisy_turn(plan, values, j, rng, rate)
            if turn == len(prefix.history):
                return line
            written = parse_step(prefix.history[turn].action)
            if wrote is not None and written is not None and not written.is_answer:
                values[wrote] = written.value
        raise AssertionError("unreachable")  # pragma: no cover

    policy.__name__ = f"noisy_solver_{rate:g}"
    return policy


noisy_expert = register_expert("arithmetic", "noisy")(noisy_solver(DEFAULT_NOISE_RATE))

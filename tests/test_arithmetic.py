"""arithmetic: problem generation/parsing, the step checker's labels, the env protocol, the experts."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from proctor.agents.experts import ExpertAgent
from proctor.envs import EnvError, make
from proctor.envs.arithmetic.checker import Earlier, label_step, parse_step
from proctor.envs.arithmetic.env import INVALID_STEP, problem_for
from proctor.envs.arithmetic.experts import noisy_expert, noisy_solver, solver_expert
from proctor.envs.arithmetic.expr import Num, Op, leaves, post_order, solution_steps, valid_values
from proctor.envs.arithmetic.problems import ProblemParseError, generate, parse
from proctor.prompts.turns import Prefix
from proctor.trajectory import Step

PROBLEM = "Tom has 48 apples. He gives half of them to Maya. He buys 5 more apples. How many apples does Tom have now?"


def play(env, task_id, policy, sample=0):
    """One episode with a prefix policy; returns the steps (with their infos)."""
    obs, info = env.reset(task_id)
    history: list[Step] = []
    done = False
    while not done:
        action = policy(Prefix(env.name, task_id, env.task, obs, list(history), info, sample=sample))
        result = env.step(action)
        done, info = result.done, result.as_info()
        history.append(Step(observation=obs, action=action, reward=result.reward, done=done, info=info))
        obs = result.observation
    return history


# -- problems ------------------------------------------------------------------------------------------

def test_hand_written_problem_parses():
    problem = parse(PROBLEM)
    assert problem.expr == Op("+", Op("/", Num(48), Num(2)), Num(5))
    assert solution_steps(problem.expr) == ["48 / 2 = 24", "24 + 5 = 29", "Answer: 29"]


def test_generated_problems_parse_back_and_have_integer_intermediates():
    families, sizes = Counter(), Counter()
    for i in range(400):
        problem = generate(random.Random(f"test:{i}"))
        assert parse(problem.text).expr == problem.expr, problem.text
        ops = post_order(problem.expr)
        assert 2 <= len(ops) <= 5
        assert all(isinstance(o.result, int) and o.result >= 0 for o in ops), problem.text
        families[problem.family] += 1
        sizes[len(ops)] += 1
    assert set(families) == {"collection", "shopping", "savings", "factory", "travel"}
    assert set(sizes) == {2, 3, 4, 5}


def test_parse_rejects_text_outside_the_language():
    with pytest.raises(ProblemParseError, match="sentence 1"):
        parse("Tom owns a boat. How big is it?")
    with pytest.raises(ProblemParseError, match="sentence 2"):
        parse("Tom has 4 apples. He juggles them. How many apples does Tom have now?")


def test_valid_values_include_reorderings_of_chains():
    e = parse(PROBLEM).expr
    assert {48, 2, 5, 24, 29} <= valid_values(e)
    assert 53 not in valid_values(e)                       # 48 + 5 drops the halving
    chain = Op("+", Op("-", Num(48), Num(10)), Num(5))     # 48 - 10 + 5
    assert {38, 43, 53, 5} <= valid_values(chain)          # 48 + 5 = 53 and 10 - 5 = 5 are fine
    product = Op("*", Op("/", Num(48), Num(2)), Num(3))    # 48 / 2 * 3
    assert {24, 72, 144} <= valid_values(product)
    assert leaves(product) == [48, 2, 3]


# -- the step checker ----------------------------------------------------------------------------------

def _label(line, earlier=()):
    expr = parse(PROBLEM).expr
    step = parse_step(line)
    assert step is not None, line
    return label_step(step, frozenset(leaves(expr)) | {48, 5}, valid_values(expr), expr.result, earlier)


@pytest.mark.parametrize("line, correct, error", [
    ("48 / 2 = 24", True, None),                     # a correct step
    ("48 / 2 = 25", False, "arithmetic"),            # an arithmetic slip
    ("48 * 2 = 96", False, "wrong_operation"),       # the wrong operation on the right numbers
    ("48 / 3 = 16", False, "unknown_quantity"),      # a number that is not in the problem
    ("24 + 5 = 29", False, "unknown_quantity"),      # 24 was never computed
    ("48 + 5 = 53", False, "off_path"),              # right arithmetic, dropped the halving
    ("48 / 2 + 5 = 29", True, None),                 # two operations in one line
    ("Halving: 48 / 2 = $24 apples", True, None),    # label, $ and units are ignored
    ("Answer: 29", True, None),
    ("Answer: 30", False, "wrong_answer"),
])
def test_step_labels(line, correct, error):
    label = _label(line)
    assert (label.correct, label.error) == (correct, error)


def test_labels_after_earlier_steps():
    assert _label("24 + 5 = 29", [Earlier(24, True)]).correct
    assert _label("25 + 5 = 30", [Earlier(25, False)]).error == "builds_on_error"
    assert _label("96 - 5 = 91", [Earlier(96, False)]).error == "builds_on_error"


@pytest.mark.parametrize("line", ["hello", "48 / 2", "= 24", "48 / = 24", "Answer: many", "24 = 24 = 24"])
def test_format_invalid_lines(line):
    assert parse_step(line) is None


def test_operator_spellings():
    for line in ("48 / 2 = 24", "48/2=24", "48 ÷ 2 = 24", "(40 + 8) / 2 = 24"):
        step = parse_step(line)
        assert step is not None and step.lhs_value == 24 and step.value == 24, line
    assert parse_step("6 x 4 = 24").ops == ("*",)
    assert parse_step("5 / 0 = 0").lhs_value is None


# -- env protocol --------------------------------------------------------------------------------------

def test_env_labels_every_step_and_rewards_the_answer():
    env = make("arithmetic")
    task_id = env.task_ids("test")[0]
    obs, info = env.reset(task_id)
    assert info["task"] in obs
    first = solution_steps(env.data.problem.expr)[0]
    step = env.step("I think we should add")
    assert (step.observation, step.reward, step.done, step.valid, step.info["step_correct"],
            step.info["step_error"]) == (INVALID_STEP, 0.0, False, False, False, "format")
    step = env.step(first)
    assert (step.reward, step.done, step.valid, step.info["step_correct"], step.info["step_error"]) == (
        0.0, False, True, True, None)
    step = env.step(f"Answer: {env.data.problem.expr.result + 1}")
    assert (step.reward, step.terminated, step.won, step.info["step_correct"], step.info["step_error"]) == (
        0.0, True, False, False, "wrong_answer")
    with pytest.raises(EnvError):
        env.step("Answer: 1")


def test_truncation_after_max_steps():
    env = make("arithmetic", max_steps=3)
    env.reset(env.task_ids("train")[0])
    steps = [env.step("no idea") for _ in range(3)]
    assert env.done and steps[-1].truncated and not steps[-1].terminated and not steps[-1].won
    assert [s.truncated for s in steps] == [False, False, True]


def test_splits_are_disjoint_and_task_ids_deterministic():
    env = make("arithmetic", num_tasks={"train": 3000})
    texts = {s: {problem_for(t).text for t in env.task_ids(s)} for s in ("train", "valid", "test")}
    assert not texts["train"] & texts["test"] and not texts["train"] & texts["valid"]
    assert not texts["valid"] & texts["test"]
    assert problem_for("arithmetic/s0/test/00007") == problem_for("arithmetic/s0/test/00007")
    assert problem_for("arithmetic/s0/test/00007") != problem_for("arithmetic/s1/test/00007")
    with pytest.raises(ValueError, match="not an arithmetic task id"):
        env.reset("arithmetic/s0/bogus/00001")
    with pytest.raises(ValueError, match="unknown split"):
        make("arithmetic", num_tasks={"bogus": 3})


def test_determinism_clone_and_replay():
    env = make("arithmetic")
    task_id = env.task_ids("valid")[3]
    a = [s.action for s in play(env, task_id, noisy_solver(0.5))]
    b = [s.action for s in play(env, task_id, noisy_solver(0.5))]
    assert a == b
    env.reset(task_id)
    env.step(a[0])
    twin = env.clone()
    assert twin.step(a[1]) == env.step(a[1])
    _, info = make("arithmetic").replay(task_id, 0, a[:2])
    assert info["step_correct"] == env.earlier[1].correct


# -- experts -------------------------------------------------------------------------------------------

def test_solver_and_oracle_solve_every_problem_with_correct_steps():
    env = make("arithmetic", expert_hints=True)
    oracle = ExpertAgent("oracle")
    for task_id in env.task_ids("test")[:250]:
        for policy in (solver_expert, lambda p: oracle.act([p])[0][0].action):
            steps = play(env, task_id, policy)
            assert steps[-1].info["won"] and steps[-1].reward == 1.0
            assert all(s.info["step_correct"] for s in steps), [s.action for s in steps]


def test_solver_continues_correctly_after_a_mistake():
    env = make("arithmetic")
    task_id = env.task_ids("test")[1]
    env.reset(task_id)
    first = solution_steps(env.data.problem.expr)[0]
    wrong = first.rsplit("=", 1)[0] + f"= {env.data.problem.expr.result + 1000}"
    step = env.step(wrong)
    obs, info = step.observation, step.as_info()
    assert info["step_error"] == "arithmetic"
    prefix = Prefix("arithmetic", task_id, env.task, obs,
                    [Step(observation="", action=wrong, info=info)], info)
    assert solver_expert(prefix) == first


@pytest.mark.parametrize("rate", [0.1, 0.3])
def test_noisy_solver_error_rate_matches_the_configured_rate(rate):
    """Hazard of the first wrong step (env labels) per step taken while still correct.

    Correct answers are excluded from the steps at risk (the answer line carries no noise of its own);
    a mistake that happens to produce a valid value is not seen, so the estimate is slightly below."""
    env = make("arithmetic")
    policy = noisy_solver(rate)
    at_risk = first_errors = 0
    kinds: Counter[str] = Counter()
    for task_id in env.task_ids("valid")[:300]:
        for sample in range(2):
            for step in play(env, task_id, policy, sample):
                if step.action.startswith("Answer") and step.info["step_correct"]:
                    break
                at_risk += 1
                if not step.info["step_correct"]:
                    first_errors += 1
                    kinds[step.info["step_error"]] += 1
                    break
    assert abs(first_errors / at_risk - rate) < 0.05, (first_errors, at_risk)
    assert {"arithmetic", "wrong_operation", "off_path", "wrong_answer"} <= set(kinds)


def test_noisy_solver_is_a_deterministic_function_of_the_prefix():
    env = make("arithmetic")
    task_ids = env.task_ids("train")[:40]
    differs = 0
    for task_id in task_ids:
        runs = [[s.action for s in play(env, task_id, noisy_expert, sample)] for sample in (0, 0, 1)]
        assert runs[0] == runs[1]
        differs += runs[0] != runs[2]
    assert differs >= 10
    steps = play(env, task_ids[0], noisy_solver(0.0))
    assert steps[-1].info["won"] and all(s.info["step_correct"] for s in steps)
    with pytest.raises(ValueError, match="noise rate"):
        noisy_solver(1.5)

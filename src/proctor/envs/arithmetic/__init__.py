"""Stepwise arithmetic word problems (PRM800K / sdiehl-prm style): a seeded problem generator, the step
checker that labels every step exactly, the env, an exact `solver` expert and a `noisy` solver."""

from proctor.envs.arithmetic.checker import STEP_ERRORS, label_step, parse_step
from proctor.envs.arithmetic.env import ArithmeticEnv, problem_for
from proctor.envs.arithmetic.experts import DEFAULT_NOISE_RATE, noisy_solver, solver_expert
from proctor.envs.arithmetic.problems import generate, parse

__all__ = ["DEFAULT_NOISE_RATE", "STEP_ERRORS", "ArithmeticEnv", "generate", "label_step", "noisy_solver", "parse",
           "parse_step", "problem_for", "solver_expert"]

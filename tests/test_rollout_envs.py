"""A small real env and real agents for the rollout tests (imported by them, and by worker processes).

`guess`: find a secret number 0..9 (a function of task id and seed) with `guess k`; the env answers
higher/lower. Fault switches make it crash (raise), hang (sleep), or kill its worker process on chosen
tasks, or fail every reset while a file exists (`broken_while`: deleting it fixes the env without changing its
spec), and `step_delay` slows every step. `BisectAgent` is a deterministic binary-search player;
`SeededGuessAgent` plays a guess drawn from (seed, step), so two runs with the same seeds agree.
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import time
from collections.abc import Sequence
from typing import Any

from proctor.agents.base import Agent, AgentError, Candidate, Prefix
from proctor.envs.base import StepOutcome, TextEnv
from proctor.envs.experts import expert_kinds, register_expert
from proctor.envs.registry import entries, register


def secret_of(task_id: str, seed: int) -> int:
    return hashlib.sha256(f"{task_id}:{seed}".encode()).digest()[0] % 10


class GuessEnv(TextEnv):
    """Guess the secret number 0..9; `higher`/`lower` hints; `give up` ends the episode lost."""

    def __init__(self, max_steps: int = 6, n_tasks: int = 12, expert_hints: bool = False, crash_on: Sequence[str] = (),
                 hang_on: Sequence[str] = (), die_on: Sequence[str] = (), hang_s: float = 60.0,
                 step_delay: float = 0.0, broken_while: str | None = None):
        super().__init__(max_steps=max_steps, expert_hints=expert_hints, n_tasks=n_tasks, crash_on=list(crash_on),
                         hang_on=list(hang_on), die_on=list(die_on), hang_s=hang_s, step_delay=step_delay,
                         broken_while=broken_while)
        self.n_tasks = n_tasks
        self.crash_on, self.hang_on, self.die_on = set(crash_on), set(hang_on), set(die_on)
        self.hang_s, self.step_delay, self.broken_while = hang_s, step_delay, broken_while
        self.secret = -1

    def task_ids(self, split: str) -> list[str]:
        return [f"{split}-{i}" for i in range(self.n_tasks)]

    def _reset(self, task_id: str, seed: int) -> tuple[str, dict[str, Any]]:
        if self.broken_while and os.path.exists(self.broken_while):
            raise RuntimeError(f"broken while {self.broken_while} exists")
        self.secret = secret_of(task_id, seed)
        return "I picked a number from 0 to 9.", {"task": f"Find the number ({task_id})."}

    def _step(self, action: str) -> StepOutcome:
        time.sleep(self.step_delay)
        if self.task_id in self.crash_on:
            raise RuntimeError(f"boom on {self.task_id}")
        if self.task_id in self.hang_on:
            time.sleep(self.hang_s)
        if self.task_id in self.die_on:
            os._exit(3)
        if action == "give up":
            return StepOutcome(f"It was {self.secret}.", 0.0, terminated=True)
        m = re.fullmatch(r"guess (\d)", action.strip())
        if not m:
            return StepOutcome("Say `guess <digit>`.", 0.0, terminated=False, valid=False)
        k = int(m.group(1))
        if k == self.secret:
            return StepOutcome("Correct!", 1.0, terminated=True, won=True)
        return StepOutcome("higher" if k < self.secret else "lower", 0.0, terminated=False)

    def admissible_actions(self) -> list[str]:
        return [f"guess {k}" for k in range(10)]

    def expert_action(self) -> str:
        return f"guess {self.secret}"


if "guess" not in entries():
    register("guess")(GuessEnv)
if "quitter" not in expert_kinds("guess"):
    register_expert("guess", "quitter")(lambda prefix: "give up")


def bisect_action(prefix: Prefix) -> str:
    """Narrow [0, 9] by the hint that followed each past guess (the next step's observation)."""
    lo, hi = 0, 9
    replies = [s.observation for s in prefix.history[1:]] + [prefix.observation] if prefix.history else []
    for step, reply in zip(prefix.history, replies, strict=True):
        k = int(step.action.split()[1])
        if reply == "higher":
            lo = k + 1
        elif reply == "lower":
            hi = k - 1
    return f"guess {(lo + hi) // 2}"


class BisectAgent(Agent):
    """Binary search; records every batch size it was called with. `fail_on`: task ids that make `act`
    raise AgentError (for the whole batch they are in)."""

    name = "bisect"

    def __init__(self, fail_on: Sequence[str] = ()):
        self.fail_on = set(fail_on)
        self.batch_sizes: list[int] = []

    def act(self, prefixes: Sequence[Prefix], n: int = 1) -> list[list[Candidate]]:
        self.batch_sizes.append(len(prefixes))
        bad = [p.task_id for p in prefixes if p.task_id in self.fail_on]
        if bad:
            raise AgentError(f"model failed on {bad}")
        return [[Candidate(action=bisect_action(p), reason="halve the range", raw_output=bisect_action(p),
                           logprobs=[-0.5, -0.25])] * n for p in prefixes]


class SeededGuessAgent(Agent):
    """Guesses a digit drawn from (episode seed, step index), or babbles an unparsed action 1 time in 5."""

    name = "seeded-guess"

    def act(self, prefixes: Sequence[Prefix], n: int = 1) -> list[list[Candidate]]:
        out = []
        for p in prefixes:
            rng = random.Random(p.seed * 100 + p.step_index)
            if rng.random() < 0.2:
                out.append([Candidate(action="hmm", raw_output="hmm", parsed=False)] * n)
            else:
                out.append([Candidate(action=f"guess {rng.randrange(10)}")] * n)
        return out

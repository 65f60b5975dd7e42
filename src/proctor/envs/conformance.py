"""`check_env`: the conformance suite every proctor env passes, as a function you run on your own env.

    from proctor.envs import check_env
    check_env(MyEnv())            # raises EnvCheckError listing every broken rule, one line each

The rules (what the rollout engine, the workers, the stores and the trainers rely on):

1. `task_ids(split)` of the split is a non-empty list of distinct ids;
2. `reset(task_id, seed)` returns a non-empty observation and an info dict with the task text (`info["task"]`)
   and the first state's `admissible_actions` (a list of strings, or None);
3. `step(action)` returns a `StepResult` of the declared types, whose `info` has a numeric `score` and repeats
   none of the result's fields (`RESULT_FIELDS`);
4. the step contract, on every step played: `terminated` and `truncated` are never both true; `won` implies
   `terminated`; `done` (either of them) is `env.done`; the step that reaches `max_steps` without terminating
   is `truncated` (an env may also truncate earlier, by its own time limit: `StepOutcome.truncated`);
   `admissible_actions` is None once the episode is over;
5. determinism: an env built from its spec (`EnvSpec.of(env).make()`) replays the same actions from the same
   (task, seed) to the same observations and rewards;
6. `clone()` mid-episode is an independent copy whose next step equals the original's, and `replay` reaches
   the same observation;
7. a step after the episode ended raises `EnvError` ("finished episode");
8. the spec builds the env in a fresh process, which resets to the same first observation (what rollout
   workers do; `spawn=False` skips it). That process imports the calling script again, so a script calls
   `check_env` under `if __name__ == "__main__":`; a fresh process that exits without answering is reported at
   once, with that hint.
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import time
from collections.abc import Callable
from numbers import Real
from typing import Any

from proctor.envs.base import EnvError, StepResult, TextEnv
from proctor.envs.registry import EnvSpec

#: how long the fresh process may take to import the env's module, build the env and reset it
FRESH_PROCESS_TIMEOUT_S = 180.0

#: the `StepResult` fields a step's `info` must not repeat (`StepResult.as_info()` puts them in one dict)
RESULT_FIELDS = ("terminated", "truncated", "won", "valid", "admissible_actions")


class EnvCheckError(AssertionError):
    """The env breaks one or more rules of `check_env` (the message lists them, one per line)."""


def walk(env: TextEnv, state: dict[str, Any], n: int, check: Callable[[Any], None] | None = None) -> list[str]:
    """Up to `n` actions taken from the current state (`state`: its info, as reset reports it),
    deterministically: cycling through the admissible actions (else the expert's hint, else "look"); `check` is
    called with what each step returned, right after it."""
    out: list[str] = []
    adm, expert = state.get("admissible_actions"), state.get("expert_action")
    for i in range(n):
        if env.done:
            break
        action = adm[(3 * i + 1) % len(adm)] if adm else (expert or "look")
        out.append(action)
        result = env.step(action)
        if check is not None:
            check(result)
        if not isinstance(result, StepResult):
            break
        adm, expert = result.admissible_actions, result.info.get("expert_action")
    return out


def _observed(result: Any) -> tuple[Any, Any]:
    """What determinism compares of a step: its observation and reward."""
    return (result.observation, result.reward) if isinstance(result, StepResult) else (repr(result), None)


def _compared(result: Any) -> tuple[Any, ...]:
    """What clone equivalence compares of a step: all but the info."""
    if not isinstance(result, StepResult):
        return (repr(result),)
    return (result.observation, result.reward, result.terminated, result.truncated, result.won, result.valid,
            result.admissible_actions)


def _trace(env: TextEnv, task: str, seed: int, actions: list[str]) -> list[tuple[Any, Any]]:
    out = [(env.reset(task, seed)[0], None)]
    for a in actions:
        if env.done:
            break
        out.append(_observed(env.step(a)))
    return out


def _first_observation(spec: EnvSpec, task: str, seed: int, queue: Any) -> None:
    env = spec.make()
    obs, info = env.reset(task, seed)
    queue.put((obs, info["task"]))
    env.close()


def _is_actions(value: Any) -> bool:
    return value is None or (isinstance(value, list) and all(isinstance(a, str) for a in value))


class _Checker:
    def __init__(self, env: TextEnv, split: str, seed: int, n_actions: int):
        self.env, self.split, self.seed, self.n_actions = env, split, seed, n_actions
        self.problems: list[str] = []
        self.not_a_result = False  # a step returned something else: the later rules cannot be read

    def fail(self, rule: str, message: str) -> None:
        line = f"{type(self.env).__name__} ({self.env.name!r}): {rule}: {message}"
        if line not in self.problems:  # a rule broken on many steps is reported once
            self.problems.append(line)

    def reset_info(self, info: Any) -> None:
        if not isinstance(info, dict):
            self.fail("reset", f"info is a {type(info).__name__}, not a dict")
            return
        if "admissible_actions" not in info:
            self.fail("reset", "info lacks admissible_actions (the first state's, or None)")
        elif not _is_actions(info["admissible_actions"]):
            self.fail("reset", "info['admissible_actions'] is neither a list of strings nor None")

    def contract(self, result: Any) -> None:
        """Rules 3 and 4 for what a step returned, called right after the step."""
        env = self.env
        if not isinstance(result, StepResult):
            self.fail("step", f"returned a {type(result).__name__}, not a StepResult")
            self.not_a_result = True
            return
        flags = {"terminated": result.terminated, "truncated": result.truncated, "won": result.won,
                 "valid": result.valid}
        wrong = [name for name, ok in (
            ("observation", isinstance(result.observation, str)),
            ("reward", isinstance(result.reward, float)),
            *((name, isinstance(v, bool)) for name, v in flags.items()),
            ("admissible_actions", _is_actions(result.admissible_actions)),
            ("info", isinstance(result.info, dict)),
        ) if not ok]
        if wrong:
            self.fail("step", f"the result's {', '.join(wrong)} of the wrong type (declared: str observation, "
                      "float reward, bool flags, admissible_actions a list of strings or None, dict info)")
        if isinstance(result.info, dict):
            score = result.info.get("score")
            if not isinstance(score, Real) or isinstance(score, bool):
                self.fail("step", "info['score'] is missing or not a number")
            repeated = [k for k in RESULT_FIELDS if k in result.info]
            if repeated:
                self.fail("step", f"info repeats the result's field(s) {', '.join(repeated)}")
        if result.terminated and result.truncated:
            self.fail("terminated/truncated", "a step is both terminated and truncated")
        if result.won and not result.terminated:
            self.fail("won", "a step is won but not terminated (a win ends the episode)")
        if result.done != env.done:
            self.fail("done", f"the result's done (terminated or truncated) is {result.done}, env.done is "
                      f"{env.done}")
        if len(env.actions) >= env.max_steps and not (result.terminated or result.truncated):
            self.fail("max_steps", f"the step that reaches max_steps ({env.max_steps}) without terminating is not "
                      "truncated")
        if result.done and result.admissible_actions is not None:
            self.fail("admissible_actions", "admissible_actions is not None after the episode ended")

    def run(self, spawn: bool) -> None:
        env = self.env
        ids = env.task_ids(self.split)
        if not ids or len(set(ids)) != len(ids):
            self.fail("task_ids", f"split {self.split!r} has {len(ids)} ids, {len(set(ids))} distinct (need >= 1, "
                      "all distinct)")
            return
        task = ids[0]
        obs, info = env.reset(task, self.seed)
        if not (isinstance(obs, str) and obs):
            self.fail("reset", "the first observation is not a non-empty string")
        if not (isinstance(info, dict) and isinstance(info.get("task"), str) and info["task"]):
            self.fail("reset", "info['task'] (the task text) is missing or empty")
        self.reset_info(info)
        actions = walk(env, info if isinstance(info, dict) else {}, self.n_actions, self.contract)
        if self.not_a_result:
            return
        if not actions:
            self.fail("step", "the episode ended before any action")
            return
        try:
            twin = EnvSpec.of(env).make()
        except Exception as e:  # noqa: BLE001 - reported as the rule's failure
            self.fail("spec", f"EnvSpec.of(env).make() failed ({type(e).__name__}: {e}); register the env class "
                      "(`proctor.envs.register`) and pass every constructor argument to TextEnv.__init__")
            self.after_done(task)
            return
        try:
            self.determinism(twin, task, actions)
            self.clone(twin, task, actions)
        finally:
            twin.close()
        self.after_done(task)
        if spawn:
            self.in_fresh_process(task, obs, info.get("task") if isinstance(info, dict) else None)

    def determinism(self, twin: TextEnv, task: str, actions: list[str]) -> None:
        a, b = _trace(self.env, task, self.seed, actions), _trace(twin, task, self.seed, actions)
        if [t[0] for t in a] != [t[0] for t in b] or [t[1] for t in a[1:]] != [t[1] for t in b[1:]]:
            self.fail("determinism", f"two envs built from the same spec diverge on task {task!r}, seed "
                      f"{self.seed} and the same actions")

    def clone(self, twin: TextEnv, task: str, actions: list[str]) -> None:
        env = self.env
        env.reset(task, self.seed)
        env.step(actions[0])
        if env.done:
            return
        clone = env.clone()
        try:
            if clone.actions != env.actions or clone.task_id != env.task_id:
                self.fail("clone", "the clone's actions or task id differ from the original's")
            follow = walk(env.clone(), {"admissible_actions": env.admissible_actions()}, 1) or ["look"]
            if _compared(clone.step(follow[0])) != _compared(env.step(follow[0])):
                self.fail("clone", f"the clone's step {follow[0]!r} differs from the original's")
            if twin.replay(task, self.seed, env.actions)[0] != clone.replay(task, self.seed, env.actions)[0]:
                self.fail("replay", "replaying the same actions gives different observations")
        finally:
            clone.close()

    def after_done(self, task: str) -> None:
        env = self.env
        env.reset(task, self.seed)
        for _ in range(10_000):
            if env.done:
                break
            adm = env.admissible_actions()
            self.contract(env.step(adm[0] if adm else "look"))
        if not env.done:
            self.fail("max_steps", "the episode did not end within 10,000 steps")
            return
        try:
            env.step("look")
        except EnvError as e:
            if "finished episode" not in str(e):
                self.fail("after done", f"a step after the end raised EnvError without 'finished episode': {e}")
        else:
            self.fail("after done", "a step after the episode ended did not raise EnvError")

    def in_fresh_process(self, task: str, obs: str, task_text: Any) -> None:
        ctx = mp.get_context("spawn")
        answer = ctx.Queue()
        child = ctx.Process(target=_first_observation, args=(EnvSpec.of(self.env), task, self.seed, answer))
        child.start()
        try:
            got = _answer_of(child, answer, FRESH_PROCESS_TIMEOUT_S)
        except RuntimeError as e:
            child.kill()
            self.fail("spawn", f"the env built from its spec in a fresh process gave no first observation: {e}")
            return
        finally:
            child.join(30)
        if got != (obs, task_text):
            self.fail("spawn", "the env built in a fresh process resets to another first observation (is every "
                      "constructor argument in the spec, and the env registered on import of its module?)")


def _answer_of(child: Any, answer: Any, timeout: float) -> Any:
    """What `child` put on `answer`; a RuntimeError when it exits without answering or does not answer within
    `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return answer.get(timeout=0.2)
        except queue.Empty:
            pass
        if not child.is_alive():
            try:
                return answer.get(timeout=1.0)  # it answered as it exited
            except queue.Empty:
                raise RuntimeError(
                    f"it exited with code {child.exitcode} before answering (it imports the calling script again: "
                    'call check_env under `if __name__ == "__main__":` in a script)') from None
        if time.monotonic() > deadline:
            raise RuntimeError(f"no answer within {timeout:g} s")


def check_env(env: TextEnv, *, split: str = "test", seed: int = 3, n_actions: int = 5, spawn: bool = True) -> None:
    """Check `env` against proctor's env protocol (module docstring); `EnvCheckError` lists every broken rule.
    Plays from the first task of `split`, at `seed`, `n_actions` deterministic actions; `spawn` also builds it
    in a fresh process."""
    checker = _Checker(env, split, seed, n_actions)
    checker.run(spawn)
    if checker.problems:
        raise EnvCheckError("\n".join(checker.problems))

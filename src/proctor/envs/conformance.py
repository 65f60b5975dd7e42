"""`check_env`: the conformance suite every proctor env passes, as a function you run on your own env.

    from proctor.envs import check_env
    check_env(MyEnv())            # raises EnvCheckError listing every broken rule, one line each

The rules (what the rollout engine, the workers, the stores and the trainers rely on):

1. `task_ids(split)` of the split is a non-empty list of distinct ids;
2. `reset(task_id, seed)` returns a non-empty observation and an info dict with the task text (`info["task"]`)
   and the standard keys (`INFO_KEYS`);
3. `step(action)` returns (str, float, bool, dict) with the standard keys;
4. determinism: an env built from its spec (`EnvSpec.of(env).make()`) replays the same actions from the same
   (task, seed) to the same observations and rewards;
5. `clone()` mid-episode is an independent copy whose next step equals the original's, and `replay` reaches
   the same observation;
6. a step after the episode ended raises `EnvError` ("finished episode");
7. the spec builds the env in a fresh process, which resets to the same first observation (what rollout
   workers do; `spawn=False` skips it).
"""

from __future__ import annotations

import multiprocessing as mp
from typing import Any

from proctor.envs.base import EnvError, TextEnv
from proctor.envs.registry import EnvSpec

#: the info keys every reset and step carries
INFO_KEYS = ("valid", "won", "score", "truncated", "admissible_actions")


class EnvCheckError(AssertionError):
    """The env breaks one or more rules of `check_env` (the message lists them, one per line)."""


def walk(env: TextEnv, info: dict[str, Any], n: int) -> list[str]:
    """Up to `n` actions taken from the current state, deterministically: cycling through the admissible
    actions (else the expert's hint, else "look")."""
    out = []
    for i in range(n):
        if env.done:
            break
        adm = info.get("admissible_actions")
        action = adm[(3 * i + 1) % len(adm)] if adm else (info.get("expert_action") or "look")
        out.append(action)
        _, _, _, info = env.step(action)
    return out


def _trace(env: TextEnv, task: str, seed: int, actions: list[str]) -> list[tuple]:
    out = [env.reset(task, seed)]
    for a in actions:
        if env.done:
            break
        out.append(env.step(a))
    return out


def _first_observation(spec: EnvSpec, task: str, seed: int, queue: Any) -> None:
    env = spec.make()
    obs, info = env.reset(task, seed)
    queue.put((obs, info["task"]))
    env.close()


class _Checker:
    def __init__(self, env: TextEnv, split: str, seed: int, n_actions: int):
        self.env, self.split, self.seed, self.n_actions = env, split, seed, n_actions
        self.problems: list[str] = []

    def fail(self, rule: str, message: str) -> None:
        self.problems.append(f"{type(self.env).__name__} ({self.env.name!r}): {rule}: {message}")

    def keys(self, rule: str, info: Any) -> None:
        if not isinstance(info, dict):
            self.fail(rule, f"info is a {type(info).__name__}, not a dict")
            return
        missing = [k for k in INFO_KEYS if k not in info]
        if missing:
            self.fail(rule, f"info lacks {', '.join(missing)}")

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
        self.keys("reset", info)
        actions = walk(env, info if isinstance(info, dict) else {}, self.n_actions)
        if not actions:
            self.fail("step", "the episode ended before any action")
            return
        env.reset(task, self.seed)
        step = env.step(actions[0])
        types = (str, float, bool, dict)
        if len(step) != 4 or not all(isinstance(x, t) for x, t in zip(step, types, strict=False)):
            self.fail("step", f"returned {tuple(type(x).__name__ for x in step)}, not (str, float, bool, dict)")
        else:
            self.keys("step", step[3])
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
            if clone.step(follow[0])[:3] != env.step(follow[0])[:3]:
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
            env.step(adm[0] if adm else "look")
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
        queue = ctx.Queue()
        child = ctx.Process(target=_first_observation, args=(EnvSpec.of(self.env), task, self.seed, queue))
        child.start()
        try:
            got = queue.get(timeout=180)
        except Exception as e:  # noqa: BLE001 - reported as the rule's failure
            self.fail("spawn", f"the env built from its spec in a fresh process gave no first observation: {e!r}")
            child.kill()
            return
        finally:
            child.join(30)
        if got != (obs, task_text):
            self.fail("spawn", "the env built in a fresh process resets to another first observation (is every "
                      "constructor argument in the spec, and the env registered on import of its module?)")


def check_env(env: TextEnv, *, split: str = "test", seed: int = 3, n_actions: int = 5, spawn: bool = True) -> None:
    """Check `env` against proctor's env protocol (module docstring); `EnvCheckError` lists every broken rule.
    Plays from the first task of `split`, at `seed`, `n_actions` deterministic actions; `spawn` also builds it
    in a fresh process."""
    checker = _Checker(env, split, seed, n_actions)
    checker.run(spawn)
    if checker.problems:
        raise EnvCheckError("\n".join(checker.problems))

"""One conformance suite for every registered env that can be made here (built-ins, `shop`, and the
adapters whose extra is installed and whose data is present): the reset/step protocol, the step contract
(terminated vs truncated, won, admissible actions), determinism by seed, clone/replay equivalence, step after done, and building from the EnvSpec in a
fresh process (what rollout workers do)."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import tempfile
from pathlib import Path

import pytest

from proctor.envs import EnvCheckError, StepOutcome, StepResult, TextEnv, check_env, entries, make, register

ALFWORLD_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "alfworld" / "json_2.1.1"
#: generated TextWorld games, cached across sessions (deterministic; the folder names the textworld version)
TEXTWORLD_GAMES = Path(tempfile.gettempdir()) / "proctor-conformance-textworld"
DETECTIVE_GAME = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "archer" / "detective.z5"
#: env name -> (constructor kwargs, marks); adapters need their package, alfworld also its game files
CASES: dict[str, tuple[dict, list]] = {
    "household": ({}, []),
    "twenty_questions": ({}, []),
    "arithmetic": ({}, []),
    "shop": ({"num_tasks": {"test": 5}}, []),
    "stepwise": ({"path": "<problems_file>", "max_steps": 6}, []),  # the fixture's file of 3 problems
    "alfworld": ({"data_dir": str(ALFWORLD_DATA), "max_steps": 6}, [pytest.mark.extra, pytest.mark.data]),
    "textworld": ({"games_dir": str(TEXTWORLD_GAMES), "n_games": {"test": 1}, "world_size": 2, "nb_objects": 3,
                   "quest_length": 2, "max_steps": 6},
                  [pytest.mark.extra, pytest.mark.filterwarnings("ignore:Game .* is not fully supported")]),
    # one short task, gold-path actions, no valid-action lists (0.1-1 s a step); still five JVMs (env, twin,
    # two clones, the child process): ~50 s measured on a busy 2-core machine (load 8), hence slow
    "scienceworld": ({"tasks": ["lifespan-longest-lived"], "max_steps": 6, "list_actions": False,
                      "expert_hints": True}, [pytest.mark.extra, pytest.mark.slow]),
    "detective": ({"game_path": str(DETECTIVE_GAME), "max_steps": 6}, [pytest.mark.extra, pytest.mark.data]),
    # the WebShop client, against the built-in `shop` served with WebShop's protocol (the fixture's URL)
    "webshop": ({"base_url": "<shop_server>", "max_steps": 6}, []),
}
NEEDS: dict[str, tuple[str, object]] = {
    "alfworld": ("alfworld", ALFWORLD_DATA),
    "textworld": ("textworld", tempfile.gettempdir()),  # games are generated into TEXTWORLD_GAMES
    "scienceworld": ("scienceworld", None),  # no data: the package ships its simulator
    "detective": ("jericho", DETECTIVE_GAME),
}


def _params():
    for name, (kwargs, marks) in CASES.items():
        yield pytest.param(name, kwargs, marks=marks, id=name)


def _skip_if_unavailable(name: str) -> None:
    if name not in entries():
        pytest.skip(f"env {name!r} is not registered")
    if name in NEEDS:
        package, data = NEEDS[name]
        if importlib.util.find_spec(package) is None:
            pytest.skip(f"{name}: optional package {package!r} is not installed (pip install 'proctor[{package}]')")
        if data is not None and not os.path.exists(data):
            pytest.skip(f"{name}: data not found at {data}")


def test_every_shipped_env_has_a_conformance_case():
    shipped = [name for name, entry in entries().items()
               if (entry.target if isinstance(entry.target, str) else entry.target.__module__).startswith("proctor.")]
    assert set(shipped) <= set(CASES), f"envs without a conformance case: {sorted(set(shipped) - set(CASES))}"


@pytest.mark.parametrize("name,kwargs", list(_params()))
def test_env_conformance(name, kwargs, request):
    _skip_if_unavailable(name)
    if kwargs.get("base_url") == "<shop_server>":
        kwargs = {**kwargs, "base_url": request.getfixturevalue("shop_server")}
    if kwargs.get("path") == "<problems_file>":
        kwargs = {**kwargs, "path": str(request.getfixturevalue("problems_file"))}
    env = make(name, **kwargs)
    assert env.name == name
    check_env(env)
    env.close()


@register("broken-for-check")
class Broken(TextEnv):
    """A three-step env that breaks two rules: its observations depend on a process-wide counter (not on the
    seed), and a step after the end is accepted."""

    calls = 0

    def task_ids(self, split):
        return ["t0"]

    def _reset(self, task_id, seed):
        return "start", {"task": "do it"}

    def _step(self, action):
        Broken.calls += 1
        return StepOutcome(f"obs {Broken.calls}", 0.0, terminated=len(self.actions) >= 2)

    def step(self, action):
        if self.done:
            return StepResult("still here", 0.0, terminated=True, truncated=False, won=False, valid=True,
                              admissible_actions=None, info={"score": 0.0})
        return super().step(action)


def test_check_env_names_every_broken_rule():
    with pytest.raises(EnvCheckError) as err:
        check_env(Broken(max_steps=4), spawn=False)
    lines = str(err.value).splitlines()
    assert any("determinism" in line for line in lines)
    assert any("after done" in line for line in lines)
    assert all(line.startswith("Broken ('broken-for-check'): ") for line in lines)


@register("walk-for-check")
class Walk(TextEnv):
    """An env that passes every rule: two admissible actions, never ends before the step limit (3)."""

    def __init__(self, max_steps: int = 3, **kwargs):
        super().__init__(max_steps=max_steps, **kwargs)

    def task_ids(self, split):
        return ["t0"]

    def _reset(self, task_id, seed):
        return "start", {"task": "walk"}

    def admissible_actions(self):
        return ["left", "right"]

    def _step(self, action):
        return StepOutcome(f"after {len(self.actions) + 1} steps", 0.0, terminated=False)


@register("wins-without-ending")
class WinsWithoutEnding(Walk):
    """Reports a win that does not end the episode."""

    def _step(self, action):
        return StepOutcome("you win", 1.0, terminated=False, won=True)


@register("ends-twice")
class EndsTwice(Walk):
    """Reports the step limit as a termination and a truncation at once."""

    def step(self, action):
        result = super().step(action)
        return dataclasses.replace(result, terminated=True) if result.truncated else result


@register("lists-after-the-end")
class ListsAfterTheEnd(Walk):
    """Lists admissible actions after the episode ended."""

    def step(self, action):
        return dataclasses.replace(super().step(action), admissible_actions=["left", "right"])


@register("ignores-the-limit")
class IgnoresTheLimit(Walk):
    """Hides the truncation at the step limit (the env itself knows the episode is over)."""

    def step(self, action):
        return dataclasses.replace(super().step(action), truncated=False)


@register("repeats-fields")
class RepeatsFields(Walk):
    """Puts the result's fields in its info as well."""

    def _step(self, action):
        return StepOutcome("moved", 0.0, terminated=False, info={"valid": True, "won": False})


@register("old-protocol")
class OldProtocol(Walk):
    """Steps as before gymnasium 0.26: (observation, reward, done, info)."""

    def step(self, action):
        result = super().step(action)
        return result.observation, result.reward, result.done, result.as_info()


def test_a_conforming_env_passes():
    check_env(Walk(), spawn=False)


@pytest.mark.parametrize("env_class,lines", [
    (WinsWithoutEnding, ["won: a step is won but not terminated (a win ends the episode)"]),
    (EndsTwice, ["terminated/truncated: a step is both terminated and truncated"]),
    (ListsAfterTheEnd, ["admissible_actions: admissible_actions is not None after the episode ended"]),
    (IgnoresTheLimit, ["done: the result's done (terminated or truncated) is False, env.done is True",
                       "max_steps: the step that reaches max_steps (3) without terminating is not truncated"]),
    (RepeatsFields, ["step: info repeats the result's field(s) won, valid"]),
    (OldProtocol, ["step: returned a tuple, not a StepResult"]),
], ids=lambda v: v.__name__ if isinstance(v, type) else "")
def test_check_env_names_the_broken_step_rule(env_class, lines):
    with pytest.raises(EnvCheckError) as err:
        check_env(env_class(), spawn=False)
    prefix = f"{env_class.__name__} ({env_class.name!r}): "
    assert str(err.value).splitlines() == [prefix + line for line in lines]

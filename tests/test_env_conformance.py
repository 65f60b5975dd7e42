"""One conformance suite for every registered env that can be made here (built-ins, `shop`, and the
adapters whose extra is installed and whose data is present): the reset/step protocol, the standard info
keys, determinism by seed, clone/replay equivalence, step after done, and building from the EnvSpec in a
fresh process (what rollout workers do)."""

from __future__ import annotations

import importlib.util
import multiprocessing as mp
import os
import tempfile
from pathlib import Path

import pytest

from proctor.envs import EnvError, EnvSpec, entries, make

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
INFO_KEYS = ("valid", "won", "score", "truncated", "admissible_actions")


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


def _actions(env, info, n: int) -> list[str]:
    """A deterministic action sequence: cycling through admissible actions (or the expert's, or 'look')."""
    out = []
    obs_info = info
    for i in range(n):
        if env.done:
            break
        adm = obs_info.get("admissible_actions")
        action = adm[(3 * i + 1) % len(adm)] if adm else (obs_info.get("expert_action") or "look")
        out.append(action)
        _, _, _, obs_info = env.step(action)
    return out


def _run(env, task, seed, actions):
    trace = [env.reset(task, seed)]
    for a in actions:
        if env.done:
            break
        trace.append(env.step(a))
    return trace


def _make_in_child(spec: EnvSpec, task: str, seed: int, queue) -> None:
    env = spec.make()
    obs, info = env.reset(task, seed)
    queue.put((obs, info["task"]))
    env.close()


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
    test_ids = env.task_ids("test")
    assert test_ids and len(set(test_ids)) == len(test_ids)
    task = test_ids[0]

    obs, info = env.reset(task, seed=3)
    assert isinstance(obs, str) and obs and isinstance(info["task"], str) and info["task"]
    for key in INFO_KEYS:
        assert key in info, key
    actions = _actions(env, info, 5)
    assert actions
    step = env.step(actions[0]) if not env.done else None
    if step is not None:
        assert isinstance(step[0], str) and isinstance(step[1], float) and isinstance(step[2], bool)
        for key in INFO_KEYS:
            assert key in step[3], key

    # determinism: a second env built from the spec replays to the same observations and rewards
    twin = EnvSpec.of(env).make()
    a_trace, b_trace = _run(env, task, 3, actions), _run(twin, task, 3, actions)
    assert [t[0] for t in a_trace] == [t[0] for t in b_trace]
    assert [t[1] for t in a_trace[1:]] == [t[1] for t in b_trace[1:]]

    # clone / replay equivalence mid-episode
    env.reset(task, 3)
    env.step(actions[0])
    if not env.done:
        clone = env.clone()
        assert clone.actions == env.actions and clone.task_id == env.task_id
        follow = _actions(env.clone(), {"admissible_actions": env.admissible_actions()}, 1) or ["look"]
        assert clone.step(follow[0])[:3] == env.step(follow[0])[:3]
        replayed_obs, _ = twin.replay(task, 3, env.actions)
        assert replayed_obs == clone.replay(task, 3, env.actions)[0]
        clone.close()

    # step after done raises
    env.reset(task, 3)
    while not env.done:
        adm = env.admissible_actions()
        env.step(adm[0] if adm else "look")
    assert env.done
    with pytest.raises(EnvError, match="finished episode"):
        env.step("look")

    # the spec builds the env in a fresh process (as rollout workers do)
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    child = ctx.Process(target=_make_in_child, args=(EnvSpec.of(env), task, 3, queue))
    child.start()
    child_obs, child_task = queue.get(timeout=120)
    child.join(30)
    assert child.exitcode == 0
    assert (child_obs, child_task) == (obs, info["task"])
    env.close()
    twin.close()

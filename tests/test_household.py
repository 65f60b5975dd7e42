"""The household env: text and grammar, goal conditions of the six task types, determinism, clone, replay."""

from __future__ import annotations

import random

import pytest

from proctor.envs import EnvError, StepResult, make
from proctor.envs.household import HouseholdEnv, TaskSpec
from proctor.envs.household.grammar import listing, parse_listing
from proctor.envs.household.world import World


def hand_made(spec: TaskSpec, max_steps: int = 30) -> HouseholdEnv:
    """An env whose world is replaced by a small known room (after a normal reset)."""
    env = make("household", max_steps=max_steps, expert_hints=True)
    env.reset(env.task_ids("test")[0])
    receptacles = [
        "countertop 1",
        "countertop 2",
        "drawer 1",
        "fridge 1",
        "microwave 1",
        "sidetable 1",
        "sinkbasin 1",
    ]
    contents = {r: [] for r in receptacles}
    contents["countertop 1"] = ["apple 1", "knife 2"]
    contents["drawer 1"] = ["apple 2"]
    contents["sidetable 1"] = ["desklamp 1"]
    env.world = World(
        room="kitchen",
        receptacles=receptacles,
        contents=contents,
        is_open={"drawer 1": False, "fridge 1": False, "microwave 1": False},
        flags={"apple 1": set(), "apple 2": set(), "knife 2": set()},
    )
    env.spec_task = spec
    return env


def run(env: HouseholdEnv, actions: list[str]) -> StepResult:
    out = None
    for a in actions:
        out = env.step(a)
    assert out is not None
    return out


def test_registered_with_help_and_splits() -> None:
    env = make("household")
    assert isinstance(env, HouseholdEnv) and env.name == "household"
    assert "go to" in HouseholdEnv.help_text and "heat" in HouseholdEnv.help_text
    assert env.splits() == ("train", "valid", "test", "test_composition")
    assert len(env.task_ids("train")) == 2000 and len(env.task_ids("test_composition")) == 200
    assert env.task_ids("test")[17] == "household/s0/test/00017"
    assert make("household", num_tasks={"test": 5}).task_ids("test")[-1] == "household/s0/test/00004"
    with pytest.raises(ValueError, match="unknown split"):
        env.task_ids("dev")
    with pytest.raises(ValueError, match="unknown split"):
        make("household", num_tasks={"dev": 3})
    with pytest.raises(ValueError, match="not a household task id"):
        env.reset("test/17")


def test_initial_observation_is_alfworld_like() -> None:
    env = make("household")
    obs, info = env.reset(env.task_ids("test")[0])
    head, task = obs.split("\n\nYour task is to: ")
    assert head.startswith("You are in the middle of a room. Looking quickly around you, you see a ")
    assert task == info["task"]
    receptacles = parse_listing(head)
    assert receptacles == env.world.receptacles
    assert sorted(info["admissible_actions"]) == info["admissible_actions"]
    assert set(info["admissible_actions"]) == {f"go to {r}" for r in receptacles} | {"inventory", "look"}


def test_listing_matches_alfworld() -> None:
    assert listing([]) == "nothing"
    assert listing(["apple 1"]) == "a apple 1"
    assert listing(["apple 1", "knife 2"]) == "a apple 1, and a knife 2"
    assert listing(["a 1", "b 2", "c 3"]) == "a a 1, a b 2, and a c 3"
    assert parse_listing("On the countertop 1, you see a apple 1, and a knife 2.") == ["apple 1", "knife 2"]


def test_observations_and_invalid_actions() -> None:
    env = hand_made(TaskSpec("pick_and_place", "apple", "fridge"))
    step = env.step("go to countertop 1")
    assert step.observation == "You arrive at countertop 1. On the countertop 1, you see a apple 1, and a knife 2."
    assert (step.reward, step.done, step.valid) == (0.0, False, True)
    assert "take apple 1 from countertop 1" in step.admissible_actions
    assert "open countertop 1" not in step.admissible_actions
    step = env.step("take apple 1 from countertop 1")
    assert step.observation == "You pick up the apple 1 from the countertop 1."
    step = env.step("take knife 2 from countertop 1")  # hands full
    assert (step.observation, step.valid) == ("Nothing happens.", False)
    assert env.step("inventory").observation == "You are carrying: a apple 1."
    assert env.step("examine apple 1").observation == "This is a normal apple 1."
    step = env.step("go to drawer 1")
    assert step.observation == "You arrive at drawer 1. The drawer 1 is closed."
    assert "open drawer 1" in step.admissible_actions
    assert not any(a.startswith("move") for a in step.admissible_actions)
    assert env.step("move apple 1 to drawer 1").observation == "Nothing happens."  # closed
    step = env.step("open drawer 1")
    assert step.observation == "You open the drawer 1. The drawer 1 is open. In it, you see a apple 2."
    assert "move apple 1 to drawer 1" in step.admissible_actions and "close drawer 1" in step.admissible_actions
    assert env.step("close drawer 1").observation == "You close the drawer 1."
    assert env.step("go to fridge 1").observation == "You arrive at fridge 1. The fridge 1 is closed."
    for bad in [
        "open countertop 1",
        "take apple 2 from drawer 1",
        "dance",
        "go to fridge 9",
        "use desklamp 1",
    ]:
        step = env.step(bad)
        assert (step.observation, step.reward, step.done, step.valid) == ("Nothing happens.", 0.0, False, False), bad
    assert env.step("look").observation == "You are facing the fridge 1. Next to it, you see nothing."
    assert env.world.holding == "apple 1" and env.world.contents["drawer 1"] == ["apple 2"]


@pytest.mark.parametrize(
    "phrasing", ["move apple 1 to fridge 1", "put apple 1 in fridge 1", "put apple 1 in/on fridge 1"]
)
def test_pick_and_place_accepts_both_grammars(phrasing: str) -> None:
    env = hand_made(TaskSpec("pick_and_place", "apple", "fridge"))
    run(env, ["go to countertop 1", "take apple 1 from countertop 1", "go to fridge 1", "open fridge 1"])
    step = env.step(phrasing)
    assert step.observation == "You move the apple 1 to the fridge 1."
    assert (step.reward, step.terminated, step.won, step.info["score"]) == (1.0, True, True, 1.0)
    with pytest.raises(EnvError, match="finished episode"):
        env.step("look")


@pytest.mark.parametrize(
    ("kind", "appliance", "flag"),
    [("heat", "microwave 1", "hot"), ("cool", "fridge 1", "cool"), ("clean", "sinkbasin 1", "clean")],
)
def test_transform_must_happen_before_placing(kind: str, appliance: str, flag: str) -> None:
    env = hand_made(TaskSpec(kind, "apple", "countertop"))
    fetch = ["go to drawer 1", "open drawer 1", "take apple 2 from drawer 1"]
    step = run(env, [*fetch, "go to countertop 2", "move apple 2 to countertop 2"])
    assert (step.reward, step.done) == (0.0, False)  # placed but not transformed
    step = run(env, ["take apple 2 from countertop 2", f"{kind} apple 2 with countertop 2"])
    assert (step.reward, step.done, step.valid) == (0.0, False, False)  # wrong appliance is not valid
    assert f"{kind} apple 2 with {appliance}" in env.step(f"go to {appliance}").admissible_actions
    assert env.step(f"{kind} apple 2 with {appliance}").observation == f"You {kind} the apple 2 using the {appliance}."
    assert env.step("examine apple 2").observation == f"This is a {flag} apple 2."
    step = run(env, ["go to countertop 2", "move apple 2 to countertop 2"])
    assert (step.reward, step.terminated, step.won) == (1.0, True, True)


def test_heating_undoes_cooling() -> None:
    env = hand_made(TaskSpec("cool", "apple", "countertop"))
    run(
        env,
        [
            "go to countertop 1",
            "take apple 1 from countertop 1",
            "go to fridge 1",
            "cool apple 1 with fridge 1",
        ],
    )
    run(env, ["go to microwave 1", "heat apple 1 with microwave 1"])
    assert env.world.flags["apple 1"] == {"hot"}
    step = run(env, ["go to countertop 2", "move apple 1 to countertop 2"])
    assert (step.reward, step.done) == (0.0, False)


def test_pick_two_needs_both_in_the_same_receptacle() -> None:
    env = hand_made(TaskSpec("pick_two", "apple", "countertop"))
    env.world.contents["countertop 1"].remove("apple 1")
    env.world.contents["fridge 1"].append("apple 1")
    run(env, ["go to fridge 1", "open fridge 1", "take apple 1 from fridge 1", "go to countertop 1"])
    step = env.step("move apple 1 to countertop 1")
    assert (step.reward, step.done) == (0.0, False)  # one is not two
    run(env, ["go to drawer 1", "open drawer 1", "take apple 2 from drawer 1", "go to countertop 2"])
    step = env.step("move apple 2 to countertop 2")
    assert (step.reward, step.done) == (0.0, False)  # two, but in different countertops
    step = run(env, ["take apple 2 from countertop 2", "go to countertop 1", "move apple 2 to countertop 1"])
    assert (step.reward, step.terminated, step.won) == (1.0, True, True)


def test_examine_needs_object_in_hand_at_the_lit_lamp() -> None:
    env = hand_made(TaskSpec("examine", "apple", "desklamp"))
    step = env.step("go to sidetable 1")
    assert step.observation == "You arrive at sidetable 1. On the sidetable 1, you see a desklamp 1."
    assert "take desklamp 1 from sidetable 1" not in step.admissible_actions
    step = env.step("use desklamp 1")
    assert (step.observation, step.reward, step.done) == ("You turn on the desklamp 1.", 0.0, False)  # nothing in hand
    run(env, ["go to countertop 1", "take apple 1 from countertop 1"])
    assert env.done is False  # lamp is on, but not here
    step = env.step("go to sidetable 1")
    assert (step.reward, step.terminated, step.won) == (1.0, True, True)


def test_max_steps_truncates() -> None:
    env = make("household", max_steps=3)
    env.reset(env.task_ids("test")[0])
    assert env.step("look").done is False and env.step("look").done is False
    step = env.step("look")
    assert (step.reward, step.terminated, step.truncated, step.won) == (0.0, False, True, False)
    assert step.done and step.admissible_actions is None


def random_episode(env: HouseholdEnv, task_id: str, rng: random.Random, steps: int) -> list[tuple]:
    obs, info = env.reset(task_id, seed=3)
    out: list[tuple] = [(obs, info["admissible_actions"])]
    admissible = info["admissible_actions"]
    for _ in range(steps):
        if env.done:
            break
        step = env.step(rng.choice(admissible + ["open drawer 1"]))
        out.append((step.observation, step.reward, step.done, step.valid, step.admissible_actions))
        admissible = step.admissible_actions
    return out


def test_deterministic_episodes() -> None:
    a, b = make("household"), make("household", seed=0)
    for tid in a.task_ids("valid")[:20]:
        assert random_episode(a, tid, random.Random(1), 25) == random_episode(b, tid, random.Random(1), 25)
    # the reset seed does not change the episode: the task id fixes it
    assert a.reset(a.task_ids("valid")[0], seed=0)[0] == a.reset(a.task_ids("valid")[0], seed=99)[0]
    # another construction seed gives other tasks, and its ids regenerate the same way in any env
    other = make("household", seed=1)
    tid = other.task_ids("test")[0]
    assert tid == "household/s1/test/00000" and other.reset(tid)[0] != a.reset(a.task_ids("test")[0])[0]
    assert a.reset(tid)[0] == other.reset(tid)[0]


def test_clone_is_independent() -> None:
    env = make("household", expert_hints=True)
    env.reset(env.task_ids("test")[3])
    for _ in range(3):
        env.step(env.expert_action())
    twin = env.clone()
    before = (env.world, list(env.actions), env.admissible_actions())
    twin_actions = []
    while not twin.done:
        twin_actions.append(twin.expert_action())
        twin.step(twin_actions[-1])
    assert (env.world, env.actions, env.admissible_actions()) == before and not env.done
    for a in twin_actions:  # the original, stepped the same way, ends where the clone ended
        last = env.step(a)
    assert last.won and env.world == twin.world


def test_replay_reproduces_states() -> None:
    env = make("household")
    rng = random.Random(5)
    for tid in env.task_ids("train")[:10]:
        obs, info = env.reset(tid)
        admissible = info["admissible_actions"]
        for _ in range(12):
            if env.done:
                break
            step = env.step(rng.choice(admissible))
            obs, admissible = step.observation, step.admissible_actions
        fresh = make("household")
        r_obs, r_info = fresh.replay(tid, 0, env.actions)
        assert (r_obs, r_info["admissible_actions"]) == (obs, admissible)
        assert fresh.world == env.world


def test_every_admissible_action_is_valid() -> None:
    env = make("household")
    rng = random.Random(2)
    checked = 0
    for tid in env.task_ids("valid")[:6]:
        _, info = env.reset(tid)
        admissible = info["admissible_actions"]
        while not env.done:
            for a in admissible:
                assert env.clone().step(a).valid, (tid, env.actions, a)
                checked += 1
            admissible = env.step(rng.choice(admissible)).admissible_actions
    assert checked > 1000

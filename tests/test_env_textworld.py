"""The TextWorld adapter on games generated here (small ones: 2 rooms, 3 objects, quests of 2 actions), cached
in one folder for the session; the walkthrough expert through the adapter and through the rollout engine."""

from __future__ import annotations

import shutil

import pytest

from proctor.envs import EnvError, EnvSpec, make

pytestmark = [pytest.mark.extra, pytest.mark.filterwarnings("ignore:Game .* is not fully supported")]  # jericho
pytest.importorskip("textworld", reason="needs the textworld extra: pip install 'proctor[textworld]'")

SMALL = {"world_size": 2, "nb_objects": 3, "quest_length": 2}
COUNTS = {"train": 2, "valid": 2, "test": 3}


@pytest.fixture(scope="session")
def games_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("textworld_games")


@pytest.fixture
def env(games_dir):
    env = make("textworld", games_dir=str(games_dir), n_games=COUNTS, expert_hints=True, **SMALL)
    yield env
    env.close()


def test_task_ids_and_generation_seeds():
    from proctor.envs.textworld_games import generation_seeds

    env = make("textworld", seed=7, n_games={"train": 3, "test": 2})
    assert env.task_ids("train") == ["textworld/s7/train/0000", "textworld/s7/train/0001", "textworld/s7/train/0002"]
    assert env.task_ids("valid") == [] and env.task_ids("test") == ["textworld/s7/test/0000", "textworld/s7/test/0001"]
    assert make("textworld", seed=7, n_games={"train": 3, "test": 2}).task_ids("train") == env.task_ids("train")
    # sha256("0/test/0") starts ccb43b7a6408e0f8: its four 16-bit words are the map/objects/quest/grammar seeds
    assert generation_seeds(0, "test", 0) == {"map": 0xCCB4, "objects": 0x3B7A, "quest": 0x6408, "grammar": 0xE0F8}
    per_split = {s: {tuple(generation_seeds(0, s, i).values()) for i in range(500)} for s in ("train", "valid", "test")}
    assert all(len(v) == 500 for v in per_split.values())
    assert not (per_split["train"] & per_split["valid"] or per_split["train"] & per_split["test"]
                or per_split["valid"] & per_split["test"])
    assert generation_seeds(1, "test", 0) != generation_seeds(0, "test", 0)
    # game i's file does not depend on how many games a split has
    assert make("textworld", seed=7, n_games=9).game_path("textworld/s7/train/0001") == env.game_path(
        "textworld/s7/train/0001")
    with pytest.raises(ValueError, match="unknown split"):
        env.task_ids("dev")
    with pytest.raises(KeyError, match="not in this env's task set"):
        env.game_path("textworld/s8/train/0000")
    with pytest.raises(KeyError, match="not in this env's task set"):
        env.game_path("textworld/s7/test/0002")
    with pytest.raises(ValueError, match="n_games"):
        make("textworld", n_games={"dev": 3})


def test_clean_feedback_and_zmachine_seed():
    from proctor.envs.textworld_games import clean_feedback, zmachine_seed

    raw = ("\n\n   ________  __\n  |  \\/  $$ |\n\nGet the key.\n\n-= Attic =-\nYou are in an attic.\n\n\n\n"
           "      *** The End ***\n\nWould you like to RESTART, RESTORE a saved game, QUIT or UNDO the last command?\n"
           ">                     -= Attic =-0/2   \n")
    assert clean_feedback(raw) == "Get the key.\n\n-= Attic =-\nYou are in an attic.\n\n*** The End ***"
    assert clean_feedback("\nYou take the key.\n\n>   -= Attic =-1/3") == "You take the key."
    assert [zmachine_seed(s) for s in (0, 1, 2**31 - 2, 2**31 - 1)] == [1, 2, 2**31 - 1, 1]


def test_walkthrough_wins_generated_games(env, games_dir):
    for task_id in env.task_ids("test"):
        obs, info = env.reset(task_id, seed=0)
        walkthrough = env.walkthrough(task_id)
        assert 1 <= len(walkthrough) <= 4
        assert "TextWorld" in obs and "$$" not in obs and not obs.endswith(">")
        assert info["task"] in obs and info["max_points"] == 1
        total = 0.0
        admissible = info["admissible_actions"]
        for k, command in enumerate(walkthrough):
            assert info["expert_action"] == command  # on the walkthrough path the expert is the walkthrough
            assert command in admissible
            step = env.step(command)
            total += step.reward
            info, admissible = step.info, step.admissible_actions
            assert step.valid and step.done == (k == len(walkthrough) - 1)
        assert step.won and step.terminated and not info["lost"] and info["score"] == 1.0 and info["points"] == 1
        assert total == 1.0 and "*** The End ***" in step.observation and "RESTART" not in step.observation
        assert env.game_path(task_id).with_suffix(".json").is_file()
    # the games are cached: a new env finds them and does not recompile
    path = env.game_path(env.task_ids("test")[0])
    mtime = path.stat().st_mtime_ns
    twin = make("textworld", games_dir=str(games_dir), n_games=COUNTS, **SMALL)
    twin.reset(env.task_ids("test")[0])
    assert path.stat().st_mtime_ns == mtime and path.parent.parent.name == "s0"
    twin.close()


def test_splits_are_different_games_and_generation_is_deterministic(env, tmp_path):
    texts = {s: env.ensure_game(env.task_ids(s)[0]).with_suffix(".json").read_text() for s in ("train", "valid")}
    texts["test"] = env.ensure_game(env.task_ids("test")[0]).with_suffix(".json").read_text()
    assert len(set(texts.values())) == 3
    fresh = make("textworld", games_dir=str(tmp_path), n_games=COUNTS, **SMALL)
    again = fresh.ensure_game(fresh.task_ids("train")[0])
    assert again != env.game_path(env.task_ids("train")[0])
    assert again.with_suffix(".json").read_text() == texts["train"]
    assert again.read_bytes() == env.game_path(env.task_ids("train")[0]).read_bytes()
    assert not list(again.parent.glob(".generating-*"))


def test_invalid_actions_detours_and_step_limit(env, games_dir):
    # a game whose walkthrough does not start by leaving the room (so leaving it is a detour)
    task_id = next(t for t in env.task_ids("test") if not env.walkthrough(t)[0].startswith("go "))
    _, info = env.reset(task_id)
    admissible = info["admissible_actions"]
    step = env.step("dance wildly")
    assert step.observation == "That's not a verb I recognise." and not step.valid and step.reward == 0.0
    assert not step.done and step.admissible_actions == admissible and step.info["score"] == 0.0
    assert env.step("  LOOK ").valid  # admissible up to case and spacing
    # a detour through another room: the expert first walks back, then finishes the quest
    walkthrough = env.walkthrough(task_id)
    detour = next(c for c in admissible if c.startswith("go "))
    step = env.step(detour)
    assert step.valid and step.info["expert_action"].startswith("go ") and step.info["expert_action"] != detour
    while not env.done:
        step = env.step(step.info["expert_action"])
    assert step.won and len(env.actions) == 3 + 1 + len(walkthrough)
    short = make("textworld", games_dir=str(games_dir), n_games=COUNTS, max_steps=2, **SMALL)
    short.reset(task_id)
    short.step("look")
    step = short.step("look")
    assert step.done and step.truncated and not step.terminated and not step.won
    short.close()


def test_own_game_files(env, tmp_path):
    own = tmp_path / "own"
    own.mkdir()
    for i, task_id in enumerate(env.task_ids("test")[:2]):
        src = env.ensure_game(task_id)
        shutil.copy(src, own / f"game{i}.z8")
        shutil.copy(src.with_suffix(".json"), own / f"game{i}.json")
    mine = make("textworld", game_files=str(own), expert_hints=True)
    assert mine.task_ids("test") == ["textworld/files/test/game0", "textworld/files/test/game1"]
    assert mine.task_ids("train") == []
    _, info = mine.reset("textworld/files/test/game1")
    while not mine.done:
        step = mine.step(info["expert_action"])
        info = step.info
    assert step.won
    mine.close()
    (own / "train").mkdir()
    shutil.copy(own / "game0.z8", own / "train" / "lonely.z8")
    with pytest.raises(FileNotFoundError, match="lonely.z8 have no .json"):
        make("textworld", game_files=str(own)).task_ids("train")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        make("textworld", game_files=str(tmp_path / "nope"))


def test_generation_failure_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("INFORM_HOME", str(tmp_path / "no-inform7"))  # the Inform 7 compiler cannot be found
    env = make("textworld", games_dir=str(tmp_path / "games"), n_games=1, **SMALL)
    task_id = env.task_ids("test")[0]
    with pytest.raises(EnvError, match=r"could not generate textworld/s0/test/0000 \(world_size=2.*seeds="):
        env.reset(task_id)
    assert not env.game_path(task_id).exists() and not list(env.game_path(task_id).parent.glob(".generating-*"))


def test_rollout_with_the_walkthrough_expert_in_two_workers(env, games_dir, tmp_path):
    from proctor.agents.experts import ExpertAgent
    from proctor.rollout import rollout

    tasks = env.task_ids("test")
    env.generate(["test"], progress=False)
    spec = EnvSpec("textworld", {"games_dir": str(games_dir), "n_games": COUNTS, **SMALL})
    store = rollout(spec, ExpertAgent("oracle"), tasks, tmp_path / "runs", batch_size=2, workers=2, progress=False)
    trajs = sorted(store, key=lambda t: t.task_id)
    assert [t.task_id for t in trajs] == tasks
    assert all(t.success and t.score == 1.0 and t.termination == "success" for t in trajs)
    assert [[s.action for s in t.steps] for t in trajs] == [env.walkthrough(t) for t in tasks]
    assert all(t.steps[-1].reward == 1.0 and t.steps[0].info["admissible_actions"] for t in trajs)

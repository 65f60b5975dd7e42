"""The ALFWorld adapter on the shared json_2.1.1 games, and ALFWorld's handcoded expert through the rollout engine."""

from __future__ import annotations

import pytest

from proctor.envs import EnvSpec, make

pytestmark = [pytest.mark.extra, pytest.mark.data]
HEAT_MUG = "valid_unseen/pick_heat_then_place_in_recep-Mug-None-Cabinet-10/trial_T20190909_021247_306737"


@pytest.fixture
def data_dir(shared_data):
    pytest.importorskip("alfworld", reason="needs the alfworld extra: pip install 'proctor[alfworld]'")
    path = shared_data / "alfworld" / "json_2.1.1"
    if not path.is_dir():
        pytest.skip(f"ALFWorld games not found at {path}")
    return path


def test_splits_and_task_types(data_dir):
    from proctor.envs.alfworld import TASK_TYPES, task_type

    env = make("alfworld", data_dir=data_dir)
    ids = {s: env.task_ids(s) for s in ("train", "valid", "test")}
    assert {s: len(v) for s, v in ids.items()} == {"train": 881, "valid": 140, "test": 134}
    assert all(t.startswith("valid_unseen/") for t in ids["test"])
    assert {task_type(t) for t in ids["test"]} == set(TASK_TYPES)
    with pytest.raises(ValueError, match="unknown split"):
        env.task_ids("dev")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        make("alfworld", data_dir=data_dir / "nope")


def test_episode_text_actions_and_grammars(data_dir):
    env = make("alfworld", data_dir=data_dir, max_steps=30)
    obs, info = env.reset(HEAT_MUG)
    assert obs.startswith("You are in the middle of a room.") and "Welcome" not in obs
    assert info["task"] == "put a hot mug in cabinet." and info["task_type"] == "pick_heat_then_place_in_recep"
    assert "go to countertop 1" in info["admissible_actions"]
    obs, reward, done, info = env.step("fly to the moon")
    assert obs == "Nothing happens." and info["valid"] is False and reward == 0.0 and not done
    for a in ["go to countertop 1", "take mug 1 from countertop 1", "go to cabinet 1"]:
        obs, _, _, info = env.step(a)
    assert "move mug 1 to cabinet 1" in info["admissible_actions"]  # the installed ALFWorld's grammar
    old = make("alfworld", data_dir=data_dir, grammar="game")
    old.replay(HEAT_MUG, 0, ["go to countertop 1", "take mug 1 from countertop 1", "go to cabinet 1"])
    assert "put mug 1 in/on cabinet 1" in old.admissible_actions()  # the game file's own grammar
    env.close()
    old.close()


def test_handcoded_expert_solves_a_game(data_dir):
    env = make("alfworld", data_dir=data_dir, max_steps=30, expert_hints=True)
    _, info = env.reset(env.task_ids("test")[0])
    while not env.done:
        _, reward, _, info = env.step(info["expert_action"])
    assert info["won"] and reward == 1.0 and info["score"] == 1.0 and len(env.actions) < 30


@pytest.mark.slow
def test_expert_wins_90_percent_of_20_unseen_games(data_dir, tmp_path):
    """~100 s on one core: 20 valid_unseen games (every 6th), 50 steps (ALFWorld's eval limit), 2 workers."""
    from proctor.agents.experts import ExpertAgent
    from proctor.rollout import rollout

    spec = EnvSpec("alfworld", {"data_dir": str(data_dir), "max_steps": 50})
    tasks = spec.make().task_ids("test")[::6][:20]
    store = rollout(spec, ExpertAgent("oracle"), tasks, tmp_path / "runs", batch_size=4, workers=2, progress=False)
    trajs = list(store)
    assert len(trajs) == 20 and not [t.error for t in trajs if t.termination == "env_error"]
    assert sum(t.success for t in trajs) >= 18

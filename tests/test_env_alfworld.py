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
    step = env.step("fly to the moon")
    assert step.observation == "Nothing happens." and step.valid is False and step.reward == 0.0 and not step.done
    for a in ["go to countertop 1", "take mug 1 from countertop 1", "go to cabinet 1"]:
        step = env.step(a)
    assert "move mug 1 to cabinet 1" in step.admissible_actions  # the installed ALFWorld's grammar
    old = make("alfworld", data_dir=data_dir, grammar="game")
    old.replay(HEAT_MUG, 0, ["go to countertop 1", "take mug 1 from countertop 1", "go to cabinet 1"])
    assert "put mug 1 in/on cabinet 1" in old.admissible_actions()  # the game file's own grammar
    env.close()
    old.close()


def test_handcoded_expert_solves_a_game(data_dir):
    env = make("alfworld", data_dir=data_dir, max_steps=30, expert_hints=True)
    _, info = env.reset(env.task_ids("test")[0])
    while not env.done:
        step = env.step(info["expert_action"])
        info = step.info
    assert step.won and step.terminated and step.reward == 1.0 and info["score"] == 1.0 and len(env.actions) < 30


#: a pick_two game that ALFWorld's expert lost (50 steps) while it heard "move" instead of "put"
PICK_TWO_PILLOW = "valid_unseen/pick_two_obj_and_place-Pillow-None-Sofa-219/trial_T20190907_163327_486300"


def test_expert_command_says_put_for_move():
    from proctor.envs.alfworld import expert_command

    assert expert_command("move pillow 1 to sofa 1") == "put pillow 1 in/on sofa 1"
    assert expert_command("move soapbar 2 to garbagecan 1") == "put soapbar 2 in/on garbagecan 1"
    assert expert_command("go to sofa 1") == "go to sofa 1"
    assert expert_command("put pillow 1 in/on sofa 1") == "put pillow 1 in/on sofa 1"


def test_expert_tracks_what_it_put_down_on_a_pick_two_game(data_dir):
    env = make("alfworld", data_dir=data_dir, max_steps=50, expert_hints=True)
    _, info = env.reset(PICK_TWO_PILLOW)
    while not env.done:
        step = env.step(info["expert_action"])
        info = step.info
    assert step.won and len(env.actions) <= 15, env.actions
    assert sum(a.startswith("move pillow") for a in env.actions) == 2
    env.close()


def test_a_killed_worker_leaves_no_temporary_folders(data_dir, tmp_path):
    """The re-grammared game is built in memory: nothing under TMPDIR to leave behind when SIGKILLed."""
    import os
    import signal
    import subprocess
    import sys

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    script = (f"from proctor.envs import make\nenv = make('alfworld', data_dir={str(data_dir)!r}, "
              f"expert_hints=True)\nenv.reset({HEAT_MUG!r})\nprint('ready', flush=True)\nimport time\n"
              "time.sleep(600)\n")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "TMPDIR": str(tmp)})
    try:
        assert proc.stdout.readline().strip() == "ready"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert not list(tmp.glob("proctor-alfworld-*"))


@pytest.mark.slow
def test_expert_wins_every_task_type_of_unseen_games(data_dir, tmp_path):
    """~70 s on 2 cores: every 5th valid_unseen game of each of the six task types from the 5th (24 games),
    50 steps (ALFWorld's eval limit), 2 workers. Over all 134 games the expert wins 132 (README)."""
    from collections import Counter

    from proctor.agents.experts import ExpertAgent
    from proctor.envs.alfworld import TASK_TYPES, task_type
    from proctor.rollout import rollout

    spec = EnvSpec("alfworld", {"data_dir": str(data_dir), "max_steps": 50})
    ids = spec.make().task_ids("test")
    tasks = [t for kind in TASK_TYPES for t in [i for i in ids if task_type(i) == kind][4::5]]
    assert Counter(task_type(t) for t in tasks) == {"look_at_obj_in_light": 3, "pick_and_place_simple": 4,
                                                    "pick_clean_then_place_in_recep": 6,
                                                    "pick_heat_then_place_in_recep": 4,
                                                    "pick_cool_then_place_in_recep": 4, "pick_two_obj_and_place": 3}
    store = rollout(spec, ExpertAgent("oracle"), tasks, tmp_path / "runs", batch_size=4, workers=2, progress=False)
    trajs = list(store)
    assert len(trajs) == 24 and not [t.error for t in trajs if t.termination == "env_error"]
    lost = [t.task_id for t in trajs if not t.success]
    assert len(lost) <= 1, lost

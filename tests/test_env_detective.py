"""The Detective adapter (ArCHer's text adventure through Jericho): ArCHer's observation, score-increment
rewards, the walkthrough expert to the full score, determinism, and worker-process rollouts."""

from __future__ import annotations

import pytest

pytest.importorskip("jericho", reason="needs the jericho extra: pip install 'proctor[jericho]'")

from proctor.envs import make
from proctor.envs.detective import default_game_path

pytestmark = pytest.mark.extra
#: the walkthrough's first 8 moves and the points each scores
OPENING = ["TAKE PAPER", "READ PAPER", "DROP PAPER", "INVENTORY", "W", "TAKE GUN", "E", "N"]
OPENING_REWARDS = [10.0, 0.0, 0.0, 0.0, 0.0, 10.0, 0.0, 0.0]


@pytest.fixture
def game_path(shared_data):
    path = shared_data / "archer" / "detective.z5"
    if not path.is_file():
        pytest.skip(f"Detective game file not found at {path}")
    return path


def test_missing_game_file_names_the_path(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match=str(tmp_path / "nope.z5")):
        make("detective", game_path=tmp_path / "nope.z5")
    monkeypatch.setenv("PROCTOR_DATA", str(tmp_path))
    assert default_game_path() == tmp_path / "archer" / "detective.z5"
    with pytest.raises(FileNotFoundError, match="PROCTOR_DATA"):
        make("detective")


@pytest.mark.data
def test_archer_observation_rewards_and_invalid_actions(game_path):
    env = make("detective", game_path=game_path, expert_hints=True)
    assert env.task_ids("train") == env.task_ids("test") == ["detective"]
    obs, info = env.reset("detective", 0)
    assert info["admissible_actions"] == ["east", "north", "take paper", "west"]
    look, _, rest = obs.partition("You are carrying nothing.")
    assert look.lstrip().startswith("<< Chief's office >>") and "Detective\nBy Matt Barringer." in rest
    assert obs.endswith("[Your score has just gone up by ten points.]\n"
                        "['east', 'north', 'take paper', 'west']")
    assert info["raw_score"] == 10 and info["score"] == pytest.approx(10 / 360)
    assert info["expert_action"] == "TAKE PAPER"
    step = env.step("fly to the moon")
    assert "That's not a verb I recognise." in step.observation and not step.valid and step.reward == 0.0
    assert not step.done and step.info["expert_action"] is None  # off the walkthrough
    step = env.step("take paper\nand some text after the first line")
    assert step.reward == 10.0 and step.info["raw_score"] == 20 and step.valid
    with pytest.raises(ValueError, match="only task is 'detective'"):
        env.reset("zork1")
    env.close()


@pytest.mark.data
@pytest.mark.slow
def test_walkthrough_reaches_the_full_score_in_50_steps(game_path):
    """~40 s on a busy 2-core machine: Jericho's valid-action search in each of the 51 states."""
    env = make("detective", game_path=game_path, expert_hints=True)
    _, info = env.reset("detective")
    rewards = []
    while not env.done:
        step = env.step(info["expert_action"])
        info = step.info
        rewards.append(step.reward)
    # the winning move is the 50th, the step limit: a termination, not a truncation
    assert step.won and step.terminated and not step.truncated and len(env.actions) == env.max_steps == 50
    assert info["raw_score"] == 360 and info["score"] == 1.0
    assert sum(rewards) == 350.0  # the other 10 points come with the opening scene
    assert rewards[:8] == OPENING_REWARDS and rewards[-1] == 100.0
    env.close()


@pytest.mark.data
def test_same_seed_same_episode_across_instances_and_clones(game_path):
    a, b = make("detective", game_path=game_path), make("detective", game_path=game_path)
    traces = []
    for env in (a, b):
        trace = [env.reset("detective", 11)]
        trace += [env.step(action) for action in OPENING[:5]]
        traces.append(trace)
    assert traces[0] == traces[1]
    clone = a.clone()
    assert clone.actions == OPENING[:5] and clone.step("TAKE GUN") == a.step("TAKE GUN")
    for env in (a, b, clone):
        env.close()


@pytest.mark.data
def test_walkthrough_expert_in_worker_processes(game_path, tmp_path):
    from proctor.agents.experts import ExpertAgent
    from proctor.envs import EnvSpec
    from proctor.rollout import rollout

    spec = EnvSpec("detective", {"game_path": str(game_path), "max_steps": 8})
    store = rollout(spec, ExpertAgent("oracle"), ["detective"], tmp_path / "runs", samples_per_task=2,
                    batch_size=2, workers=2, progress=False)
    trajs = list(store)
    assert len(trajs) == 2 and all(t.termination == "max_steps" for t in trajs), [t.error for t in trajs]
    for t in trajs:
        assert [s.action for s in t.steps] == OPENING and [s.reward for s in t.steps] == OPENING_REWARDS
        assert t.score == pytest.approx(30 / 360) and not t.success


@pytest.mark.parametrize("command", [["play", "detective"], ["rollout", "--env", "detective", "--agent", "expert",
                                                             "--no-progress", "--workers", "2"]])
def test_cli_without_the_game_file_says_so_in_one_line(tmp_path, monkeypatch, command):
    """No traceback: one line that names the file looked for and PROCTOR_DATA."""
    from typer.testing import CliRunner

    from proctor.cli import app

    monkeypatch.setenv("PROCTOR_DATA", str(tmp_path))
    args = command + (["--out", str(tmp_path / "runs")] if command[0] == "rollout" else [])
    res = CliRunner().invoke(app, args, input="")
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output and (res.exception is None or isinstance(res.exception, SystemExit))
    text = "".join(res.output.split())  # the console wraps long lines
    assert f"gamefile{tmp_path / 'archer' / 'detective.z5'}notfound" in text and "PROCTOR_DATA" in text

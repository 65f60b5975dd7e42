"""The ScienceWorld adapter on the installed simulator: splits, gold paths to a score of 100, the score/reward
convention, invalid and ambiguous actions, determinism, and the gold-path expert in rollout workers."""

from __future__ import annotations

import pytest

pytest.importorskip("scienceworld", reason="needs the extra: pip install 'proctor[scienceworld]'")

from proctor.envs import make
from proctor.envs.scienceworld import INVALID_FEEDBACK, parse_task_id, task_names

pytestmark = pytest.mark.extra
#: four short gold paths (3-9 moves to the win), all test-split variations
SHORT_TASKS = ("lifespan-longest-lived/93", "find-non-living-thing/225",
               "chemistry-mix-paint-secondary-color/27", "power-component/15")


@pytest.fixture(scope="module")
def env():
    """One simulator JVM for the module: expert hints on, no valid-action lists (fast steps)."""
    e = make("scienceworld", expert_hints=True, list_actions=False, max_steps=30)
    yield e
    e.close()


def test_splits_of_a_few_tasks_are_disjoint():
    env = make("scienceworld", tasks=["boil", "lifespan-longest-lived", "find-non-living-thing"])
    ids = {s: env.task_ids(s) for s in ("train", "valid", "test")}
    assert not set(ids["train"]) & set(ids["valid"]) and not set(ids["train"]) & set(ids["test"])
    assert not set(ids["valid"]) & set(ids["test"])
    boil = {s: [parse_task_id(t)[1] for t in v if t.startswith("boil/")] for s, v in ids.items()}
    assert boil == {"train": list(range(14)), "valid": list(range(14, 21)), "test": list(range(21, 30))}
    assert SHORT_TASKS[0] in ids["test"] and SHORT_TASKS[1] in ids["test"]
    with pytest.raises(ValueError, match="unknown split"):
        env.task_ids("dev")
    env.close()


def test_first_task_ids_cover_every_chosen_task():
    """`proctor rollout --tasks 2 --env-arg 'tasks=[a, b]'` runs one variation of a and one of b."""
    chosen = ["lifespan-longest-lived", "find-non-living-thing"]
    env = make("scienceworld", tasks=chosen)
    ids = env.task_ids("test")
    assert [parse_task_id(t)[0] for t in ids[:4]] == chosen * 2
    per_task = {name: [t for t in ids if t.startswith(name + "/")] for name in chosen}
    assert sorted(ids) == sorted(per_task[chosen[0]] + per_task[chosen[1]])  # every variation, once
    assert [parse_task_id(t)[1] for t in per_task[chosen[0]]] == env.variations(chosen[0], "test")
    env.close()


@pytest.mark.slow
def test_splits_of_all_30_tasks(env):
    """~20 s: the simulator loads each of the 30 tasks once to list its variations."""
    ids = {s: env.task_ids(s) for s in ("train", "valid", "test")}
    assert {s: len(v) for s, v in ids.items()} == {"train": 3592, "valid": 1796, "test": 1819}
    assert len(set().union(*ids.values())) == 3592 + 1796 + 1819
    assert {parse_task_id(t)[0] for t in ids["test"]} == set(task_names()) and len(task_names()) == 30
    assert set(SHORT_TASKS) <= set(ids["test"])


def test_bad_task_ids_and_arguments(env):
    for bad in ("boil", "boil/x", "no-such-task/1"):
        with pytest.raises(ValueError, match="scienceworld"):
            env.reset(bad)
    with pytest.raises(ValueError, match="variations 0..29, not 30"):
        env.reset("boil/30")
    with pytest.raises(ValueError, match="unknown or no task names"):
        make("scienceworld", tasks=["boiling"])


@pytest.mark.parametrize("task_id", SHORT_TASKS)
def test_gold_path_reaches_score_100(env, task_id):
    _, info = env.reset(task_id)
    gold = env.gold_path()
    start = info["score"]  # some tasks start with sub-goals met (chemistry-mix-paint-secondary-color: 20)
    assert start == info["raw_score"] / 100 < 1 and info["expert_action"] == gold[0]
    rewards = []
    while not env.done:
        step = env.step(info["expert_action"])
        info = step.info
        rewards.append(step.reward)
    assert step.won and info["raw_score"] == 100 and info["score"] == 1.0 and not step.truncated
    assert sum(rewards) == pytest.approx(1.0 - start) and min(rewards) >= 0
    assert env.actions == gold[: len(env.actions)]


def test_partial_credit_invalid_and_fatal_moves():
    env = make("scienceworld", expert_hints=True, tasks=["lifespan-longest-lived"], max_steps=10)
    _, info = env.reset("lifespan-longest-lived/93")
    adm = info["admissible_actions"]
    assert adm == sorted(adm) and "open door to outside" in adm and "focus on crocodile" not in adm
    step = env.step("fly to the moon")
    assert step.observation == INVALID_FEEDBACK and not step.valid and step.reward == 0.0 and not step.done
    assert step.info["expert_action"] is None  # deviated from the gold path
    for action, raw in (("open door to outside", 0), ("go to outside", 50)):
        step = env.step(action)
        assert step.info["raw_score"] == raw and step.reward == raw / 100 and not step.done
    assert "focus on crocodile" in step.admissible_actions
    step = env.step("focus on door")  # ambiguous: the next action picks a reading by number
    assert step.observation.startswith("Ambiguous request") and "0:\tfocus on door between" in step.observation
    assert not step.done
    step = env.step("0")  # focusing on a door is the fatal move of this task
    assert step.observation.startswith("You focus on the door") and step.terminated and not step.won
    assert step.info["raw_score"] == -100 and step.info["score"] == 0.0 and step.reward == -0.5
    env.close()


def test_deterministic_across_resets_seeds_and_simulators(env):
    """The same variation and actions give the same text after any history of the JVM, whatever the seed."""
    task = "chemistry-mix-paint-secondary-color/27"  # its room lists three wood cups, in hash-set order
    actions = ["look around", "open cupboard", "look at table", "pick up yellow paint", "mix bowl"]
    runs = []
    for other_task, seed in ((SHORT_TASKS[1], 0), (None, 7)):
        if other_task:
            env.reset(other_task)
        trace = [env.reset(task, seed)[0]]
        trace += [(step.observation, step.reward) for step in map(env.step, actions)]
        runs.append(trace)
    fresh = make("scienceworld", list_actions=False)
    obs = fresh.replay(task, 3, actions[:-1])[0]
    last = fresh.step(actions[-1])
    trace = [obs, (last.observation, last.reward)]
    fresh.close()
    assert runs[0] == runs[1]
    assert trace == [runs[0][-2][0], runs[0][-1]]
    assert "a wood cup (containing red paint)" in runs[0][0]


@pytest.mark.slow
def test_gold_path_expert_in_worker_processes(tmp_path):
    """~30 s: two worker processes, one simulator JVM each, play the oracle (gold path) expert."""
    from proctor.agents.experts import ExpertAgent
    from proctor.envs import EnvSpec
    from proctor.rollout import rollout

    spec = EnvSpec("scienceworld", {"list_actions": False, "max_steps": 20})
    tasks = list(SHORT_TASKS[:2])
    store = rollout(spec, ExpertAgent("oracle"), tasks, tmp_path / "runs", batch_size=2, workers=2,
                    progress=False)
    trajs = sorted(store, key=lambda t: t.task_id)
    assert [t.task_id for t in trajs] == sorted(tasks)
    assert all(t.success and t.score == 1.0 and t.termination == "success" for t in trajs), \
        [t.error for t in trajs]
    assert [t.steps[-1].action for t in trajs] == ["move object to orange box", "focus on crocodile"]

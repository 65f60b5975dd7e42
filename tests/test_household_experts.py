"""Household task sets and experts: split disjointness, composition hold-out, expert success rates."""

from __future__ import annotations

import itertools
import random
import statistics

import pytest

from proctor.agents.experts import ExpertAgent
from proctor.envs import make
from proctor.envs.experts import expert_kinds
from proctor.envs.household import TASK_TYPES, TaskSpec, held_out_pairs, parse_task
from proctor.envs.household.tasks import all_specs, generate, task_text
from proctor.prompts.turns import Prefix
from proctor.trajectory import Step


def rollout(
    kind: str, split: str, n: int, max_steps: int = 30, random_prefix: int = 0
) -> list[tuple[bool, int]]:
    """(won, steps) of expert `kind` on the first `n` tasks of `split`, after `random_prefix` random actions."""
    env = make("household", max_steps=max_steps, expert_hints=kind == "oracle")
    agent = ExpertAgent(kind)
    rng = random.Random(0)
    out = []
    for tid in env.task_ids(split)[:n]:
        obs, info = env.reset(tid)
        history: list[Step] = []
        while not env.done:
            prefix = Prefix("household", tid, env.task, obs, history, info)
            if len(history) < random_prefix:
                action = rng.choice(info["admissible_actions"])
            else:
                [[candidate]] = agent.act([prefix])
                action = candidate.action
            result = env.step(action)
            history.append(Step(observation=obs, action=action, info=info))
            obs, info = result.observation, result.as_info()
        out.append((bool(info["won"]), len(env.actions)))
    return out


def fingerprint(task_id: str) -> tuple:
    _, text, world = generate(task_id)
    return text, tuple(world.receptacles), tuple(tuple(world.contents[r]) for r in world.receptacles)


def test_task_texts_parse_back() -> None:
    specs = all_specs()
    assert {s.kind for s in specs} == set(TASK_TYPES)
    for spec in specs:
        for variant in (0, 1):
            assert parse_task(task_text(spec, variant)) == spec
    assert task_text(TaskSpec("pick_and_place", "apple", "fridge"), 1) == "put some apple in fridge."
    assert task_text(TaskSpec("examine", "book", "desklamp"), 0) == "look at book under the desklamp."
    with pytest.raises(ValueError, match="not a household task text"):
        parse_task("make coffee.")


def test_splits_are_disjoint() -> None:
    env = make("household")
    ids = {s: env.task_ids(s) for s in env.splits()}
    for a, b in itertools.combinations(ids.values(), 2):
        assert not set(a) & set(b)
    train = {fingerprint(t) for t in ids["train"]}
    assert len(train) == len(ids["train"])  # no duplicate episodes inside train either
    for split in ("valid", "test", "test_composition"):
        assert not train & {fingerprint(t) for t in ids[split]}, split
    assert {generate(t)[0].kind for t in ids["test"]} == set(TASK_TYPES)


def test_composition_split_holds_out_object_target_pairs() -> None:
    env = make("household")
    held = held_out_pairs(0)
    assert held == held_out_pairs(0) and held != held_out_pairs(1)
    seen = [generate(t)[0] for s in ("train", "valid", "test") for t in env.task_ids(s)]
    composition = [generate(t)[0] for t in env.task_ids("test_composition")]
    seen_pairs = {(s.obj, s.target) for s in seen}
    comp_pairs = {(s.obj, s.target) for s in composition}
    assert comp_pairs <= held and not comp_pairs & seen_pairs
    assert not seen_pairs & held
    # the parts are familiar, only the combinations are new; and every task type is covered
    assert {o for o, _ in comp_pairs} <= {s.obj for s in seen}
    assert {t for _, t in comp_pairs} <= {s.target for s in seen}
    assert {s.kind for s in composition} == set(TASK_TYPES)
    assert len(comp_pairs) >= 20


def test_expert_kinds_registered() -> None:
    assert expert_kinds("household") == ["oracle", "search"]


@pytest.mark.parametrize(("kind", "threshold"), [("oracle", 0.99), ("search", 0.95)])
@pytest.mark.parametrize("split", ["test", "test_composition"])
def test_expert_success(kind: str, threshold: float, split: str) -> None:
    results = rollout(kind, split, 200)
    success = sum(w for w, _ in results) / len(results)
    assert success >= threshold, (kind, split, success)


def test_search_expert_needs_realistic_episode_lengths() -> None:
    lengths = [n for won, n in rollout("search", "valid", 200) if won]
    oracle = [n for won, n in rollout("oracle", "valid", 200) if won]
    assert 10 <= statistics.mean(lengths) <= 25
    assert statistics.mean(oracle) < statistics.mean(lengths)  # searching costs steps
    assert max(lengths) > 20 and min(lengths) <= 6


@pytest.mark.parametrize("kind", ["oracle", "search"])
def test_experts_recover_after_random_actions(kind: str) -> None:
    results = rollout(kind, "valid", 60, max_steps=60, random_prefix=8)
    assert sum(w for w, _ in results) / len(results) >= 0.95


def test_search_expert_is_a_pure_function_of_the_text() -> None:
    env = make("household", expert_hints=True)
    policy = ExpertAgent("search").policy_for("household")
    obs, info = env.reset(env.task_ids("test")[1])
    history: list[Step] = []
    for _ in range(5):
        action = policy(Prefix("household", env.task_id, env.task, obs, history, info))
        again = policy(
            Prefix("household", env.task_id, env.task, obs, list(history), {})
        )  # no privileged info
        assert action == again
        result = env.step(action)
        history.append(Step(observation=obs, action=action, info=info))
        obs, info = result.observation, result.as_info()

"""The TextEnv base class: step limit, standard info keys, replay, clone, expert hints, registry errors."""

from __future__ import annotations

import pytest

from proctor.envs.base import EnvError, TextEnv
from proctor.envs.registry import EnvEntry, EnvSpec, make


class Counter(TextEnv):
    """Reach the target number by saying 'up' or 'down'."""

    name = "counter"

    def __init__(self, max_steps: int = 5, copyable: bool = True, **kw):
        super().__init__(max_steps=max_steps, copyable=copyable, **kw)
        self.copyable = copyable
        self.value = 0
        self.target = 0

    def task_ids(self, split):
        return [f"{split}-{i}" for i in range(3)]

    def _reset(self, task_id, seed):
        self.value, self.target = 0, int(task_id.split("-")[1]) + 1 + seed
        return f"at {self.value}", {"task": f"reach {self.target}"}

    def _step(self, action):
        if action not in ("up", "down"):
            return "Nothing happens.", 0.0, False, {"valid": False}
        self.value += 1 if action == "up" else -1
        won = self.value == self.target
        return f"at {self.value}", float(won), won, {"won": won}

    def admissible_actions(self):
        return ["down", "up"]

    def expert_action(self):
        return "up" if self.value < self.target else "down"


def test_reset_and_step_report_standard_info():
    env = Counter()
    obs, info = env.reset("test-1", seed=0)
    assert obs == "at 0" and info["task"] == "reach 2"
    assert info["admissible_actions"] == ["down", "up"] and info["valid"] and not info["won"]
    obs, r, done, info = env.step("jump")
    assert (obs, r, done, info["valid"]) == ("Nothing happens.", 0.0, False, False)
    env.step("up")
    obs, r, done, info = env.step("up")
    assert (r, done, info["won"], info["score"], info["truncated"]) == (1.0, True, True, 1.0, False)
    assert info["admissible_actions"] is None
    with pytest.raises(EnvError, match="finished episode"):
        env.step("up")


def test_step_limit_truncates():
    env = Counter(max_steps=2)
    env.reset("test-2", seed=0)
    env.step("down")
    _, _, done, info = env.step("down")
    assert done and info["truncated"] and not info["won"]


@pytest.mark.parametrize("copyable", [True, False])
def test_clone_is_independent_and_equal(copyable):
    env = Counter(copyable=copyable)
    env.reset("test-2", seed=1)
    env.step("up")
    twin = env.clone()
    assert twin is not env and twin.value == 1 and twin.actions == ["up"]
    twin.step("up")
    assert env.value == 1 and twin.value == 2


def test_replay_reproduces_state_and_rejects_overlong_prefix():
    env = Counter()
    obs, _ = env.replay("test-1", 0, ["up", "jump"])
    assert obs == "Nothing happens." and env.value == 1 and env.actions == ["up", "jump"]
    with pytest.raises(EnvError, match="ended after 2 of 3 actions"):
        env.replay("test-1", 0, ["up", "up", "up"])


def test_expert_hints_in_info():
    env = Counter(expert_hints=True)
    _, info = env.reset("test-0", seed=0)
    assert info["expert_action"] == "up"
    assert "expert_action" not in Counter().reset("test-0", 0)[1]


def test_spec_rebuilds_same_env_kwargs():
    env = Counter(max_steps=7)
    assert env.spec_kwargs["max_steps"] == 7
    assert EnvSpec.of(env) == EnvSpec("counter", env.spec_kwargs)


def test_registry_errors_name_the_problem():
    with pytest.raises(KeyError, match="unknown environment 'nope'"):
        make("nope")
    entry = EnvEntry("fake", "proctor_missing_module:Env", "fakeextra", "")
    with pytest.raises(ImportError, match=r"pip install 'proctor\[fakeextra\]'"):
        entry.factory()

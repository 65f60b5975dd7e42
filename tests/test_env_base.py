"""The TextEnv base class: the StepResult of a step (terminated vs truncated at the step limit, admissible actions,
the default score), replay, clone, expert hints, registry errors."""

from __future__ import annotations

import pytest

from proctor.envs.base import EnvError, StepOutcome, StepResult, TextEnv
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
        if action == "give up":  # ends the episode, not won, with a partial score of its own
            return StepOutcome("You give up.", 0.0, terminated=True, info={"score": 0.25})
        if action == "out of time":  # the env's own time limit
            return StepOutcome("Time is up.", 0.0, terminated=False, truncated=True)
        if action not in ("up", "down"):
            return StepOutcome("Nothing happens.", 0.0, terminated=False, valid=False)
        self.value += 1 if action == "up" else -1
        won = self.value == self.target
        return StepOutcome(f"at {self.value}", float(won), terminated=won, won=won)

    def admissible_actions(self):
        return ["down", "up"]

    def expert_action(self):
        return "up" if self.value < self.target else "down"


def test_reset_reports_the_task_and_the_first_state():
    env = Counter()
    obs, info = env.reset("test-1", seed=0)
    assert (obs, info) == ("at 0", {"task": "reach 2", "admissible_actions": ["down", "up"]})
    assert not env.done and env.actions == []


def test_step_returns_a_step_result():
    env = Counter()
    env.reset("test-1", seed=0)  # target 2
    assert env.step("jump") == StepResult("Nothing happens.", 0.0, terminated=False, truncated=False, won=False,
                                          valid=False, admissible_actions=["down", "up"], info={"score": 0.0})
    assert env.step("up") == StepResult("at 1", 0.0, terminated=False, truncated=False, won=False, valid=True,
                                        admissible_actions=["down", "up"], info={"score": 0.0})
    last = env.step("up")
    assert last == StepResult("at 2", 1.0, terminated=True, truncated=False, won=True, valid=True,
                              admissible_actions=None, info={"score": 1.0})  # none: the episode is over
    assert last.done and env.done and env.actions == ["jump", "up", "up"]
    assert last.as_info() == {"score": 1.0, "valid": True, "won": True, "truncated": False,
                              "admissible_actions": None}
    with pytest.raises(EnvError, match="finished episode"):
        env.step("up")


def test_the_step_that_reaches_the_limit_truncates_unless_it_terminates():
    env = Counter(max_steps=2)
    env.reset("test-2", seed=0)  # target 3: out of reach in 2 steps
    first = env.step("down")
    assert (first.terminated, first.truncated, first.done) == (False, False, False)
    second = env.step("down")
    assert (second.terminated, second.truncated, second.done, second.won) == (False, True, True, False)
    assert second.admissible_actions is None and second.info == {"score": 0.0} and env.done

    env.reset("test-1", seed=0)  # target 2: reached by the second, last allowed step
    env.step("up")
    last = env.step("up")
    assert (last.terminated, last.truncated, last.done, last.won) == (True, False, True, True)


def test_an_env_may_truncate_before_the_limit_and_a_termination_is_never_a_truncation():
    env = Counter(max_steps=5)
    env.reset("test-2", seed=0)
    cut = env.step("out of time")
    assert (cut.terminated, cut.truncated, cut.done, cut.admissible_actions) == (False, True, True, None)


def test_score_defaults_to_the_win_and_an_env_score_is_kept():
    env = Counter()
    env.reset("test-2", seed=0)
    end = env.step("give up")
    assert (end.terminated, end.won, end.info["score"]) == (True, False, 0.25)


@pytest.mark.parametrize("terminated,truncated,done", [(False, False, False), (True, False, True),
                                                        (False, True, True)])
def test_done_is_terminated_or_truncated(terminated, truncated, done):
    result = StepResult("o", 0.0, terminated=terminated, truncated=truncated, won=False, valid=True,
                        admissible_actions=None, info={})
    assert result.done is done


def test_a_step_hook_must_return_a_step_outcome():
    class Legacy(Counter):
        def _step(self, action):
            return "at 1", 0.0, False, {}

    env = Legacy()
    env.reset("test-1", 0)
    with pytest.raises(EnvError, match=r"returned a tuple, not a StepOutcome; return StepOutcome\(observation, reward, terminated"):
        env.step("up")


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
    obs, info = env.replay("test-1", 0, ["up", "jump"])
    assert obs == "Nothing happens." and env.value == 1 and env.actions == ["up", "jump"]
    assert info == {"score": 0.0, "valid": False, "won": False, "truncated": False,
                    "admissible_actions": ["down", "up"]}  # the last step's result as one dict
    assert env.replay("test-1", 0, []) == env.reset("test-1", 0)
    with pytest.raises(EnvError, match="ended after 2 of 3 actions"):
        env.replay("test-1", 0, ["up", "up", "up"])


def test_expert_hints_in_info():
    env = Counter(expert_hints=True)
    _, info = env.reset("test-1", seed=0)
    assert info["expert_action"] == "up"
    assert env.step("down").info == {"score": 0.0, "expert_action": "up"}  # at -1
    env.step("up")
    env.step("up")
    assert env.step("up").info == {"score": 1.0}  # no hint once the episode is over
    assert "expert_action" not in Counter().reset("test-0", 0)[1]


def test_spec_rebuilds_same_env_kwargs():
    env = Counter(max_steps=7)
    assert env.spec_kwargs["max_steps"] == 7
    assert EnvSpec.of(env) == EnvSpec("counter", env.spec_kwargs)


def test_registry_errors_name_the_problem():
    with pytest.raises(KeyError, match="unknown environment 'nope'"):
        make("nope")
    entry = EnvEntry("fake", "proctor_missing_module:Env", "fakeextra", "")
    with pytest.raises(ImportError, match=r"needs the optional extra 'fakeextra' .*: pip install -e \"\.\[fakeextra\]\"$"):
        entry.factory()

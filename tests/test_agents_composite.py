"""RandomAgent, ReplayAgent, MixtureAgent (allocation numbers), SwitchAgent (switch steps), the factory."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from proctor.agents import (
    Agent,
    AgentError,
    Candidate,
    ExpertAgent,
    MixtureAgent,
    Prefix,
    RandomAgent,
    ReplayAgent,
    SwitchAgent,
    allocate,
    make_agent,
)
from proctor.agents.composite import SwitchSteps
from proctor.store import TrajectoryStore
from proctor.trajectory import Step, Trajectory

ACTIONS = ["north", "south", "east", "west", "look"]


def _prefix(task="t", sample=0, step=0, actions=ACTIONS, obs=None) -> Prefix:
    history = [Step(observation=f"o{i}", action="look") for i in range(step)]
    return Prefix(env="toy", task_id=task, task="go", observation=obs or f"o{step}", history=history,
                  info={"admissible_actions": actions}, sample=sample)


class _Const(Agent):
    """Always answers `action`; counts how it was called."""

    def __init__(self, action: str):
        self.action, self.name, self.calls = action, action, []

    def act(self, prefixes, n=1):
        self.calls.append((len(prefixes), n))
        return [[Candidate(action=self.action) for _ in range(n)] for _ in prefixes]


# -- RandomAgent -------------------------------------------------------------------------------------

def test_random_agent_is_uniform_and_deterministic():
    agent = RandomAgent(seed=1)
    a = agent.act([_prefix("t", 0, 2), _prefix("t", 1, 2)], n=4)
    assert a == agent.act([_prefix("t", 0, 2), _prefix("t", 1, 2)], n=4)
    assert a[0] == RandomAgent(seed=1).act([_prefix("t", 0, 2)], n=4)[0]  # batch-independent
    assert all(c.action in ACTIONS for cands in a for c in cands)
    counts = Counter(c.action for s in range(400) for c in agent.act([_prefix("t", s, 0)])[0])
    assert set(counts) == set(ACTIONS) and max(counts.values()) - min(counts.values()) < 50  # ~80 each
    assert [c.action for c in RandomAgent(seed=2).act([_prefix("t", 0, 2)], n=8)[0]] != \
        [c.action for c in agent.act([_prefix("t", 0, 2)], n=8)[0]]  # another seed, other draws


def test_random_agent_needs_admissible_actions_or_a_fallback():
    with pytest.raises(AgentError, match="fallback_actions"):
        RandomAgent().act([_prefix(actions=None)])
    cands = RandomAgent(fallback_actions=["wait"]).act([_prefix(actions=None)], n=2)[0]
    assert [c.action for c in cands] == ["wait", "wait"]


# -- ReplayAgent -------------------------------------------------------------------------------------

def _traj(task: str, sample: int, actions: list[str]) -> Trajectory:
    steps = [Step(observation=f"o{i}", action=a, reason=f"r{i}", logprobs=[-0.5]) for i, a in enumerate(actions)]
    return Trajectory(id=f"{task}-{sample}", env="toy", task_id=task, sample=sample, task="go", split="train",
                      seed=0, agent="expert:oracle", steps=steps, success=False, score=0.0,
                      termination="failure")


def test_replay_agent_replays_by_task_and_sample(tmp_path):
    with TrajectoryStore(tmp_path / "s") as store:
        store.extend([_traj("t", 0, ["a", "b"]), _traj("t", 1, ["c", "d"])])
    for source in (TrajectoryStore.open(tmp_path / "s"), make_agent("replay", source=str(tmp_path / "s"))):
        agent = source if isinstance(source, ReplayAgent) else ReplayAgent(source)
        out = agent.act([_prefix("t", 1, 1), _prefix("t", 0, 0)], n=2)
        assert [[c.action for c in cands] for cands in out] == [["d", "d"], ["a", "a"]]
        assert (out[0][0].reason, out[0][0].logprobs, out[0][0].meta) == ("r1", [-0.5], {"replayed": "t-1"})
        assert "expert:oracle" in agent.describe()


def test_replay_agent_errors():
    agent = ReplayAgent([_traj("t", 0, ["a"])])
    with pytest.raises(AgentError, match="no stored trajectory"):
        agent.act([_prefix("t", 3, 0)])
    with pytest.raises(AgentError, match="has 1 steps; asked for step 1"):
        agent.act([_prefix("t", 0, 1)])
    with pytest.raises(AgentError, match="observation differs"):
        agent.act([_prefix("t", 0, 0, obs="something else")])
    assert ReplayAgent([_traj("t", 0, ["a"])], check_observations=False).act(
        [_prefix("t", 0, 0, obs="x")])[0][0].action == "a"
    with pytest.raises(ValueError, match="two trajectories"):
        ReplayAgent([_traj("t", 0, ["a"]), _traj("t", 0, ["b"])])


# -- allocation and MixtureAgent ---------------------------------------------------------------------

@pytest.mark.parametrize(
    ("n", "weights", "expected"),
    [
        (8, [1, 1], [4, 4]),
        (10, [0.5, 0.3, 0.2], [5, 3, 2]),
        (7, [1, 1], [4, 3]),  # quotas 3.5/3.5: tie goes to the first
        (5, [3, 1, 1], [3, 1, 1]),  # quotas 3/1/1
        (4, [1, 1, 1], [2, 1, 1]),  # quotas 1.33 each: one extra, to the first
        (6, [2, 1, 0], [4, 2, 0]),
        (1, [0.2, 0.8], [0, 1]),  # largest remainder
        (0, [1, 2], [0, 0]),
    ],
)
def test_allocate_largest_remainder(n, weights, expected):
    assert allocate(n, weights) == expected


def test_allocate_systematic_remainder_by_hand():
    # n=5, w=(1,1,1): quotas 5/3 each, floors (1,1,1), fractions (2/3,2/3,2/3), r=2; points u, u+1.
    assert allocate(5, [1, 1, 1], u=0.1) == [2, 2, 1]  # 0.1 in [0,2/3), 1.1 in [2/3,4/3)
    assert allocate(5, [1, 1, 1], u=0.5) == [2, 1, 2]  # 0.5 in [0,2/3), 1.5 in [4/3,2)
    assert allocate(5, [1, 1, 1], u=0.9) == [1, 2, 2]  # 0.9 in [2/3,4/3), 1.9 in [4/3,2)
    # n=3, w=(0.5, 0.25, 0.25): quotas 1.5, .75, .75; floors (1,0,0); r=2 over fractions .5,.75,.75
    # intervals [0,.5), [.5,1.25), [1.25,2)
    assert allocate(3, [0.5, 0.25, 0.25], u=0.4) == [2, 0, 1]  # 0.4 in [0,.5), 1.4 in [1.25,2)
    assert allocate(3, [0.5, 0.25, 0.25], u=0.8) == [1, 1, 1]  # 0.8 in [.5,1.25), 1.8 in [1.25,2)


def test_allocate_is_unbiased_with_bounded_spread():
    weights = [0.5, 0.3, 0.2]
    n, grid = 7, 1000
    totals = [0, 0, 0]
    for j in range(grid):
        c = allocate(n, weights, u=(j + 0.5) / grid)
        assert sum(c) == n
        for i, w in enumerate(weights):
            assert math.floor(n * w) <= c[i] <= math.ceil(n * w)
            totals[i] += c[i]
    assert [t / grid for t in totals] == pytest.approx([n * w for w in weights], abs=2e-3)


def test_allocate_rejects_bad_weights():
    with pytest.raises(ValueError, match="weights"):
        allocate(3, [0, 0])
    with pytest.raises(ValueError, match="weights"):
        allocate(3, [1, -1])


def test_mixture_splits_samples_and_batches_calls():
    a, b = _Const("A"), _Const("B")
    mix = MixtureAgent([(a, 3), (b, 1)], seed=None)
    out = mix.act([_prefix("t", s) for s in range(3)], n=4)
    assert [[c.action for c in cands] for cands in out] == [["A", "A", "A", "B"]] * 3
    assert out[0][3].meta == {"component": 1, "agent": "B"}
    assert a.calls == [(3, 3)] and b.calls == [(3, 1)]  # one batched call per agent and count


def test_mixture_single_sample_follows_the_weights():
    a, b = _Const("A"), _Const("B")
    mix = MixtureAgent([(a, 0.25), (b, 0.75)], seed=4)
    picks = [mix.act([_prefix("t", s)])[0][0].action for s in range(800)]
    assert picks.count("A") == pytest.approx(200, abs=40)
    assert picks == [mix.act([_prefix("t", s)])[0][0].action for s in range(800)]  # deterministic
    assert "0.25 × A" in mix.describe()


# -- SwitchAgent -------------------------------------------------------------------------------------

def test_switch_agent_switches_at_the_drawn_step():
    inn, out_ = _Const("IN"), _Const("OUT")
    sw = SwitchAgent(inn, out_, switch_steps=[1, 3], seed=0)
    for sample in range(6):
        k = sw.switch_step("t", sample)
        assert k in (1, 3)
        acts = [sw.act([_prefix("t", sample, step)])[0][0] for step in range(5)]
        assert [c.action for c in acts] == ["IN"] * k + ["OUT"] * (5 - k)
        assert {c.meta["switch_step"] for c in acts} == {k}
        assert [c.meta["phase"] for c in acts] == ["roll_in"] * k + ["roll_out"] * (5 - k)
    assert {sw.switch_step("t", s) for s in range(40)} == {1, 3}


def test_switch_agent_batches_by_phase():
    inn, out_ = _Const("IN"), _Const("OUT")
    sw = SwitchAgent(inn, out_, switch_steps=2, seed=0)
    res = sw.act([_prefix("t", 0, 0), _prefix("t", 1, 3), _prefix("u", 0, 1)], n=2)
    assert [[c.action for c in cands] for cands in res] == [["IN", "IN"], ["OUT", "OUT"], ["IN", "IN"]]
    assert inn.calls == [(2, 2)] and out_.calls == [(1, 2)]


@pytest.mark.parametrize("p", [0.2, 0.5])
def test_switch_prob_gives_a_geometric_switch_step(p):
    sw = SwitchAgent(_Const("IN"), _Const("OUT"), switch_prob=p, seed=1)
    ks = [sw.switch_step(f"t{i}", 0) for i in range(4000)]
    assert sum(ks) / len(ks) == pytest.approx((1 - p) / p, rel=0.08)  # mean of Geometric on {0,1,...}
    assert ks.count(0) / len(ks) == pytest.approx(p, abs=0.03)
    assert SwitchAgent(_Const("IN"), _Const("OUT"), switch_prob=1.0).switch_step("t", 0) == 0


@pytest.mark.parametrize("steps", [{0: 1.0, 4: 3.0}])
def test_switch_steps_mapping_is_weighted(steps: SwitchSteps):
    sw = SwitchAgent(_Const("IN"), _Const("OUT"), switch_steps=steps, seed=2)
    ks = Counter(sw.switch_step("t", s) for s in range(2000))
    assert set(ks) == {0, 4} and ks[4] / 2000 == pytest.approx(0.75, abs=0.04)


def test_switch_agent_argument_errors():
    with pytest.raises(ValueError, match="exactly one"):
        SwitchAgent(_Const("a"), _Const("b"))
    with pytest.raises(ValueError, match="exactly one"):
        SwitchAgent(_Const("a"), _Const("b"), switch_prob=0.5, switch_steps=1)
    with pytest.raises(ValueError, match="switch_prob"):
        SwitchAgent(_Const("a"), _Const("b"), switch_prob=0.0)
    with pytest.raises(ValueError, match="switch_steps"):
        SwitchAgent(_Const("a"), _Const("b"), switch_steps=[-1])


# -- registry ----------------------------------------------------------------------------------------

def test_make_agent_kinds_and_errors():
    assert isinstance(make_agent("expert", expert="oracle"), ExpertAgent)
    agent = make_agent("random", seed=5, fallback_actions=["x"])
    assert isinstance(agent, RandomAgent) and agent.seed == 5
    with pytest.raises(ValueError, match="unknown agent kind 'robot'"):
        make_agent("robot")
    with pytest.raises(ValueError, match="field 'temperature': Extra inputs"):
        make_agent("random", temperature=1.0)


def test_nested_configs_build_composites():
    mix = make_agent({"kind": "mixture", "seed": None, "components": [
        {"agent": {"kind": "expert", "expert": "search"}, "weight": 3}, {"agent": "random", "weight": 1}]})
    assert isinstance(mix, MixtureAgent) and mix.weights == [3.0, 1.0] and mix.seed is None
    assert [a.name for a in mix.agents] == ["expert:search", "random"]
    eps = make_agent("epsilon", epsilon=0.25, seed=2)
    assert isinstance(eps, MixtureAgent) and eps.weights == [0.75, 0.25] and eps.needs_expert_hints
    switch = make_agent({"kind": "switch", "roll_in": "random", "roll_out": {"kind": "expert"}, "switch_prob": 0.5})
    assert isinstance(switch, SwitchAgent) and switch.needs_expert_hints
    with pytest.raises(ValueError, match="exactly one of switch_prob and switch_steps"):
        make_agent({"kind": "switch", "roll_in": "random", "roll_out": "random"})
    with pytest.raises(ValueError, match="field 'components.0.weight'"):
        make_agent({"kind": "mixture", "components": [{"agent": "random", "weight": -1}]})


def test_composites_ask_for_expert_hints_when_a_component_needs_them():
    from proctor.agents import ExpertAgent, MixtureAgent, RandomAgent, SwitchAgent

    assert MixtureAgent([(ExpertAgent("oracle"), 0.7), (RandomAgent(), 0.3)]).needs_expert_hints
    assert not MixtureAgent([(RandomAgent(), 1.0)]).needs_expert_hints
    assert SwitchAgent(RandomAgent(), ExpertAgent("oracle"), switch_prob=0.5).needs_expert_hints
    assert not SwitchAgent(RandomAgent(), ExpertAgent("search"), switch_prob=0.5).needs_expert_hints

"""One conformance suite for every registered search method (like tests/test_env_conformance.py for envs), with
a real tiny PRM and scripted policies on `household`, `arithmetic` and `stepwise` (plain text problems, one
reasoning step per action):

- valid trajectories: one per (task, sample), each re-played action by action in a fresh env gives the same
  observations, final observation and outcome (every candidate ran in a faithful env copy);
- budgets recorded on `Trajectory.meta["budget"]`, consistent with what the method did;
- determinism by seed (two runs, same trajectories and scores), and resume (a re-run adds nothing);
- a PRM trained here to prefer one known action ("look") makes every method pick it;
plus the agent kind `best-of-n` inside the rollout engine, cross-worker forks (replay), and config errors.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence

import pytest
import torch

import proctor.search  # noqa: F401  (registers the search methods and the agent kind best-of-n)
from proctor.agents.base import Agent, Candidate, Prefix
from proctor.agents.registry import KINDS, AgentSpec, agent_config, make_agent, register_agent
from proctor.envs import make
from proctor.episode import Episode, WorkItem, play
from proctor.prm.model import ProcessRewardModel
from proctor.prm.scoring import PRMScorer
from proctor.rollout import RolloutConfig, run_rollout
from proctor.search import BeamConfig, SearchRunConfig, get_search, run_search, search_config, search_methods
from proctor.seeding import stable_rng
from proctor.store import TrajectoryStore

SCRIPTED = "search-test-look-among-random"
PREFERRED = "look"


class LookAmongRandom(Agent):
    """n draws of uniform admissible actions other than "look", with "look" put at one seeded position (n ≥ 2):
    the known action is always proposed, and not always first."""

    name = "look-among-random"

    def act(self, prefixes: Sequence[Prefix], n: int = 1) -> list[list[Candidate]]:
        out = []
        for p in prefixes:
            rng = stable_rng("scripted", p.task_id, p.sample, p.step_index)
            others = [a for a in p.admissible_actions if a != PREFERRED]
            draws = [rng.choice(others) for _ in range(n)]
            if n >= 2 and PREFERRED in p.admissible_actions:
                draws[rng.randrange(n)] = PREFERRED
            out.append([Candidate(a, raw_output=a) for a in draws])
        return out


@register_agent(SCRIPTED)
class LookAmongRandomConfig(AgentSpec):
    """Test policy: random admissible actions with "look" among them."""

    kind: str = SCRIPTED

    def build(self) -> Agent:
        return LookAmongRandom()


TEXT_STEPS = "search-test-text-steps"
STEPS = ("Let me think.", "First, add the numbers.", "3 + 4 = 7.", "The answer is 7.", "The answer is 8.")


class TextSteps(Agent):
    """n seeded draws of reasoning steps, some of which state an answer (which ends a `stepwise` episode)."""

    name = "text-steps"

    def act(self, prefixes: Sequence[Prefix], n: int = 1) -> list[list[Candidate]]:
        out = []
        for p in prefixes:
            rng = stable_rng("text-steps", p.task_id, p.sample, p.step_index)
            out.append([Candidate(a, raw_output=a) for a in rng.choices(STEPS, weights=(4, 4, 4, 1, 1), k=n)])
        return out


@register_agent(TEXT_STEPS)
class TextStepsConfig(AgentSpec):
    """Test policy: reasoning steps for the `stepwise` env."""

    kind: str = TEXT_STEPS

    def build(self) -> Agent:
        return TextSteps()


ARITHMETIC_AGENT = {"kind": "mixture", "components": [{"agent": {"kind": "expert", "expert": "solver"}, "weight": 1},
                                                      {"agent": {"kind": "expert", "expert": "noisy"}, "weight": 1}]}
ENVS = {
    "household": ({"max_steps": 6}, {"kind": SCRIPTED}),
    "arithmetic": ({"max_steps": 6}, ARITHMETIC_AGENT),
    "stepwise": ({"path": "<problems_file>", "max_steps": 6}, {"kind": TEXT_STEPS}),
}


def env_kwargs(env: str, request) -> dict:
    """ENVS' constructor arguments of `env`, the `stepwise` problems file taken from its fixture."""
    kwargs = dict(ENVS[env][0])
    if kwargs.get("path") == "<problems_file>":
        kwargs["path"] = str(request.getfixturevalue("problems_file"))
    return kwargs


def method_config(method: str, agent: dict, prm: str, aggregation: str = "last") -> dict:
    if method == "step-best-of-n":
        return {"method": method, "agent": agent, "prm": prm, "n": 4}
    if method == "trajectory-best-of-n":
        return {"method": method, "agent": agent, "prm": prm, "n": 3, "aggregation": aggregation}
    return {"method": method, "agent": agent, "prm": prm, "beams": 2, "expansions": 2, "aggregation": aggregation}


METHODS = ("step-best-of-n", "trajectory-best-of-n", "beam", "dvts")


def test_every_registered_method_is_in_this_suite():
    assert set(search_methods()) == set(METHODS)


def household_states(split: str, n_tasks: int, depth: int, seed: int) -> list[Prefix]:
    rng, env, out = random.Random(seed), make("household"), []
    for tid in env.task_ids(split)[:n_tasks]:
        obs, info = env.reset(tid, 0)
        ep = Episode.begin("household", WorkItem(tid, 0, 0), obs, info)
        for _ in range(depth):
            out.append(ep.prefix())
            a = rng.choice(ep.info["admissible_actions"])
            ep.record(Candidate(a), env.step(a))
    return out


@pytest.fixture(scope="module")
def look_prm(tiny_model_dir, tmp_path_factory) -> str:
    """A real tiny PRM trained (BCE at the step marker, 80 AdamW steps on household states of the train split,
    the last 40 prefix tokens) to score "look" 1 and any other action 0; checked on test-split states."""
    torch.manual_seed(0)
    prm = ProcessRewardModel.build(tiny_model_dir, "scalar", dtype="float32")
    scorer = PRMScorer(prm)
    rng = random.Random(1)
    rows = []
    for p in household_states("train", 8, 4, 0):
        actions = [PREFERRED] + rng.sample([a for a in p.admissible_actions if a != PREFERRED], 3)
        prefix, suffixes = scorer.encode_candidates(p, actions)
        rows += [(prefix[-40:] + s, float(a == PREFERRED)) for a, s in zip(actions, suffixes, strict=True)]
    opt = torch.optim.AdamW(prm.parameters(), lr=3e-3)
    prm.train()
    for _ in range(80):
        batch = rng.sample(rows, 32)
        width = max(len(x) for x, _ in batch)
        ids = torch.full((len(batch), width), scorer.pad_id)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for i, (x, _) in enumerate(batch):
            ids[i, : len(x)], mask[i, : len(x)] = torch.tensor(x), 1
        logits = prm(ids, attention_mask=mask).logits[torch.arange(len(batch)), mask.sum(1) - 1]
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, torch.tensor([y for _, y in batch]))
        opt.zero_grad()
        loss.backward()
        opt.step()
    prm.eval()
    states = household_states("test", 4, 6, 5)
    for p, row in zip(states, scorer.score_action_groups(states, [p.admissible_actions for p in states]),
                      strict=True):
        look = row[p.admissible_actions.index(PREFERRED)]
        assert look > 0.9 and max(s for a, s in zip(p.admissible_actions, row, strict=True) if a != PREFERRED) < 0.1
    path = tmp_path_factory.mktemp("look_prm") / "prm"
    prm.save_pretrained(path)
    return str(path)


def run(method: str, env: str, prm: str, out, *, seed: int = 0, tasks: int = 2, aggregation: str = "last",
        kwargs: dict | None = None, **kw) -> list:
    cfg = SearchRunConfig(env=env, env_kwargs=ENVS[env][0] if kwargs is None else kwargs, tasks=tasks, out=out, seed=seed, batch=2, progress=False,
                          search=method_config(method, ENVS[env][1], prm, aggregation), **kw)
    result = run_search(cfg)
    return sorted(result.store.load(), key=lambda t: t.key)


def assert_replays(traj, env_kwargs: dict) -> None:
    """Re-play the trajectory's actions in a fresh env: same observations, final observation and outcome."""
    env = make(traj.env, **env_kwargs)
    obs, _ = env.reset(traj.task_id, traj.seed)
    for t, step in enumerate(traj.steps):
        assert step.observation == obs, f"{traj.id} step {t}: the observation differs from a fresh replay"
        result = env.step(step.action)
        obs = result.observation
        assert step.done == result.done and step.truncated == result.truncated
    assert traj.final_observation == obs and env.done
    assert traj.success == result.won
    assert traj.termination in ("success", "failure", "max_steps")


@pytest.mark.parametrize("env", list(ENVS))
@pytest.mark.parametrize("method", METHODS)
def test_valid_trajectories_budgets_determinism_and_resume(method, env, look_prm, tmp_path, request):
    kwargs = env_kwargs(env, request)
    trajs = run(method, env, look_prm, tmp_path / "a", kwargs=kwargs)
    assert [t.key for t in trajs] == [(tid, 0) for tid in sorted({t.task_id for t in trajs})] and len(trajs) == 2
    for t in trajs:
        assert_replays(t, kwargs)
        assert all(0.0 <= s.info["candidate_meta"]["prm_score"] <= 1.0 for s in t.steps)
        b = t.meta["budget"]
        assert set(b) == {"env_steps", "replayed_steps", "forks", "candidates", "generated_tokens", "prm_calls"}
        steps = len(t.steps)
        if method == "step-best-of-n":
            assert (b["env_steps"], b["candidates"], b["forks"]) == (steps, 4 * steps, 0)
            assert steps <= b["prm_calls"] <= 4 * steps
            assert all(sum(c["count"] for c in s.info["candidate_meta"]["candidates"]) == 4 for s in t.steps)
        elif method == "trajectory-best-of-n":
            attempts = t.meta["search"]["attempts"]
            assert len(attempts) == 3 and t.meta["search"]["chosen"] in {a["id"] for a in attempts}
            assert b["env_steps"] == b["prm_calls"] == sum(a["steps"] for a in attempts) >= steps
        else:
            # root: 4 candidates; then <= 2 nodes x 2 candidates a round; every distinct candidate runs in a fork
            # of its parent except the first, which takes the parent's env
            # (`stepwise`: a beam that answers early finishes before the rounds end)
            rounds = t.meta["search"]["rounds"]
            assert steps <= rounds and steps <= b["env_steps"] == b["prm_calls"] <= 4 * rounds
            assert b["candidates"] >= b["env_steps"] and b["forks"] >= b["env_steps"] - 1 - 2 * (rounds - 1)
            if make(env, **kwargs).copyable:  # in-process clones (`stepwise` replays the parent's steps instead)
                assert b["replayed_steps"] == 0
            assert t.meta["search"]["finished"] >= 1
    again = run(method, env, look_prm, tmp_path / "b", kwargs=kwargs)
    assert [(t.actions, [s.info["candidate_meta"]["prm_score"] for s in t.steps], t.meta["budget"]) for t in trajs] \
        == [(t.actions, [s.info["candidate_meta"]["prm_score"] for s in t.steps], t.meta["budget"]) for t in again]
    assert run(method, env, look_prm, tmp_path / "a", kwargs=kwargs) and len(TrajectoryStore.open(tmp_path / "a").load()) == 2


@pytest.mark.parametrize("method", ["step-best-of-n", "beam", "dvts"])
def test_a_prm_that_prefers_a_known_action_makes_the_search_pick_it(method, look_prm, tmp_path):
    trajs = run(method, "household", look_prm, tmp_path, aggregation="min")
    for t in trajs:
        assert t.actions == [PREFERRED] * len(t.steps) and len(t.steps) == 6
    # the known action was not simply the first proposal
    firsts = [s.info["candidate_meta"]["candidates"][0]["action"] for t in trajs for s in t.steps]
    assert any(a != PREFERRED for a in firsts)


def test_trajectory_best_of_n_keeps_the_attempt_the_prm_prefers(look_prm, tmp_path):
    """Three stored attempts per task (random, all-"look", random): the rerank keeps the all-"look" one."""
    env = make("household", max_steps=4)
    tasks = env.task_ids("test")[:2]
    with TrajectoryStore(tmp_path / "attempts") as store:
        for tid in tasks:
            for k in range(3):
                rng = random.Random(f"{tid}/{k}")

                def act(p: Prefix, k=k, rng=rng) -> Candidate:
                    return Candidate(PREFERRED if k == 1 else rng.choice([a for a in p.admissible_actions
                                                                          if a != PREFERRED]))

                store.append(play(env, WorkItem(tid, k, 7 + k), act, split="test"))
    for aggregation in ("min", "mean", "prod", "last"):
        cfg = SearchRunConfig(env="household", env_kwargs={"max_steps": 4}, tasks=list(tasks), progress=False,
                              out=tmp_path / aggregation, search={"method": "trajectory-best-of-n",
                                                                  "source": str(tmp_path / "attempts"), "n": 3,
                                                                  "prm": look_prm, "aggregation": aggregation})
        for t in run_search(cfg).store.load():
            assert t.actions == [PREFERRED] * 4 and t.seed == 8, aggregation
            aggs = [a["aggregate"] for a in t.meta["search"]["attempts"]]
            assert aggs[1] == max(aggs) > 0.9 > max(aggs[0], aggs[2])


def test_best_of_n_agent_kind_runs_in_the_rollout_engine(look_prm, tmp_path):
    agent = {"kind": "best-of-n", "agent": {"kind": SCRIPTED}, "prm": look_prm, "n": 3, "prm_batch": 4}
    assert make_agent(agent).describe().startswith("per-step best-of-3 of [")
    result = run_rollout(RolloutConfig(env="household", env_kwargs={"max_steps": 5}, agent=agent, split="test",
                                       tasks=3, batch=3, out=tmp_path / "r", progress=False))
    for t in result.store.load():
        assert t.actions == [PREFERRED] * 5
        for s in t.steps:
            meta = s.info["candidate_meta"]
            assert meta["prm_score"] == max(c["score"] for c in meta["candidates"]) > 0.9
            assert meta["budget"]["candidates"] == 3 and meta["budget"]["prm_calls"] == len(meta["candidates"])


def test_forks_across_worker_processes_replay_and_give_the_same_search(look_prm, tmp_path):
    local = run("beam", "household", look_prm, tmp_path / "local", tasks=1)
    hosted = run("beam", "household", look_prm, tmp_path / "hosted", tasks=1, workers=2)
    assert [t.actions for t in local] == [t.actions for t in hosted]
    assert hosted[0].meta["budget"]["replayed_steps"] > 0 == local[0].meta["budget"]["replayed_steps"]
    assert_replays(hosted[0], ENVS["household"][0])


def test_bad_configs_fail_early_with_the_field_named(look_prm, tmp_path):
    with pytest.raises(ValueError, match="unknown search method 'greedy'"):
        search_config({"method": "greedy"})
    with pytest.raises(ValueError, match="search method 'beam'.*beams: Input should be greater than or equal to 1"):
        search_config({"method": "beam", "agent": "random", "prm": look_prm, "beams": 0})
    with pytest.raises(ValueError, match="no PRM folder there"):
        search_config({"method": "dvts", "agent": "random", "prm": str(tmp_path / "missing")})
    with pytest.raises(ValueError, match="exactly one of agent"):
        search_config({"method": "trajectory-best-of-n", "prm": look_prm})
    with pytest.raises(ValueError, match="field 'prm'"):
        make_agent({"kind": "best-of-n", "agent": "random", "prm": str(tmp_path / "missing")})


def test_the_best_of_n_agent_and_method_share_one_vocabulary_and_the_old_one_loads_with_a_note(look_prm, caplog):
    """The agent kind `best-of-n` and the method `step-best-of-n` name the same things alike (`agent`, `prm_batch`,
    as every PRM-guided method); the agent's earlier `base` and `batch` load, each with one line naming the new."""
    agent_fields = set(KINDS["best-of-n"].model_fields) - {"kind"}
    assert agent_fields == set(get_search("step-best-of-n").config.model_fields) - {"method"}
    assert {"agent", "prm_batch"} <= agent_fields and {"prm", "prm_batch"} <= set(BeamConfig.model_fields)
    with caplog.at_level(logging.WARNING, logger="proctor.renames"):
        old = agent_config({"kind": "best-of-n", "base": {"kind": SCRIPTED}, "prm": look_prm, "batch": 4})
    assert old == agent_config({"kind": "best-of-n", "agent": {"kind": SCRIPTED}, "prm": look_prm, "prm_batch": 4})
    assert [r.getMessage().split(" (")[0] for r in caplog.records] == [
        "best-of-n agent: base: now `agent`", "best-of-n agent: batch: now `prm_batch`"]
    with pytest.raises(ValueError, match="batch and prm_batch both given"):
        agent_config({"kind": "best-of-n", "agent": "random", "prm": look_prm, "batch": 4, "prm_batch": 8})


def test_a_search_store_identity_names_every_field_of_its_agent(look_prm):
    """A resumed search must match its store's identity (`describe`): a nested agent counts with all its fields,
    not only those of the base agent config it is declared as."""
    warm, cold = ({"method": "beam", "prm": look_prm, "agent": {"kind": "epsilon", "epsilon": e}} for e in (0.2, 0.9))
    assert '"epsilon": 0.2' in search_config(warm).describe()
    assert search_config(warm).describe() != search_config(cold).describe()

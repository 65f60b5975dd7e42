"""Candidate starts (a stored state s_t plus one chosen action, then the policy) through the rollout engine, and
their MC-Q estimates (`proctor.credit.candidates`) checked against hand-computed numbers."""

from __future__ import annotations

import pytest

from proctor.credit.candidates import by_state, candidate_q
from proctor.credit.montecarlo import MCConfig
from proctor.credit.outcome import CreditError
from proctor.credit.registry import Sources, run_method
from proctor.rollout import RolloutConfig, run_rollout
from proctor.rollout.starts import (
    CandidateConfig,
    candidate_actions,
    candidate_items,
    completion_items,
    sampled_prefix_lengths,
)
from proctor.trajectory import Step, Trajectory

ADMISSIBLE = ["go to a", "go to b", "go to c", "look", "inventory"]


def source(n_steps: int = 3) -> Trajectory:
    steps = [Step(observation=f"o{i}", action=f"go to {'abc'[i % 3]}",
                  info={"admissible_actions": ADMISSIBLE, "expert_action": "go to b", "valid": True})
             for i in range(n_steps)]
    return Trajectory(id="src", env="household", task_id="t", sample=0, task="x", split="test", seed=7,
                      agent="p", steps=steps, success=False, score=0.0, termination="failure")


def test_candidate_actions_expert_taken_then_random_without_duplicates():
    src = source()
    cfg = CandidateConfig(expert=True, taken=True, random=2, seed=3)
    acts = candidate_actions(src, 1, cfg)  # step 1 took "go to b" == the expert's action: listed once
    assert acts[0] == "go to b" and len(acts) == 3 == len(set(acts))
    assert set(acts[1:]) <= set(ADMISSIBLE) - {"go to b"}
    assert candidate_actions(src, 1, cfg) == acts, "the random draw is a function of (seed, source, t)"
    assert candidate_actions(src, 0, CandidateConfig(expert=False, taken=True, random=0)) == ["go to a"]
    assert len(candidate_actions(src, 0, CandidateConfig(random=10))) == len(ADMISSIBLE)  # all there are
    src.steps[2].info.pop("expert_action")
    with pytest.raises(ValueError, match=r"step 2: field 'info.expert_action'"):
        candidate_actions(src, 2, cfg)
    with pytest.raises(ValueError, match="outside 0..2"):
        candidate_actions(src, 3, cfg)
    with pytest.raises(ValueError, match="no candidates"):
        CandidateConfig(expert=False, taken=False, random=0)


def test_candidate_items_replay_the_state_then_the_candidate():
    src = source()
    cfg = CandidateConfig(expert=True, random=1)
    items = candidate_items([src], [0, 2], 3, cfg)
    assert items == completion_items([src], [0, 2], 3, cfg)
    assert len(items) == 2 * 2 * 3  # 2 states × (expert + 1 random) × 3 completions
    assert len({it.key for it in items}) == len(items), "every completion is its own (task, sample)"
    for it in items:
        meta = dict(it.meta)
        t, a = meta["prefix_len"], meta["candidate"]
        assert meta["prefix_of"] == "src" and it.seed == 7 and it.task_id == "t"
        assert list(it.start[:t]) == src.steps[:t] and len(it.start) == t + 1
        cand = it.start[t]
        assert cand.action == a and cand.observation == src.steps[t].observation
        assert cand.info == {"admissible_actions": ADMISSIBLE, "expert_action": "go to b", "candidate": True}
    with pytest.raises(ValueError, match="candidate starts are states"):
        candidate_items([src], "steps", 1, cfg)


def test_per_source_draws_that_many_states_the_same_way_each_time():
    src = source(n_steps=6)
    drawn = sampled_prefix_lengths(src, "states", 2, seed=1)
    assert len(drawn) == 2 and drawn == sorted(drawn) and set(drawn) <= set(range(6))
    assert sampled_prefix_lengths(src, "states", 2, seed=1) == drawn
    assert sampled_prefix_lengths(src, "states", 9, seed=1) == list(range(6))  # fewer than asked: all of them
    assert sampled_prefix_lengths(src, "states", None, seed=1) == list(range(6))
    assert {tuple(sampled_prefix_lengths(src, "states", 2, seed=s)) for s in range(20)} != {tuple(drawn)}
    items = candidate_items([src], "states", 1, CandidateConfig(expert=True, random=0), per_source=2, seed=1)
    assert sorted({dict(it.meta)["prefix_len"] for it in items}) == drawn
    assert len(completion_items([src], "steps", 2, per_source=3, seed=0)) == 3 * 2


def test_starts_depend_on_the_source_task_and_sample_not_its_id():
    """A re-run stores the same episodes under fresh ids: its completions and draws must not change."""
    a, b = source(n_steps=6), source(n_steps=6)
    b.id = "another-run-id"
    cfg = CandidateConfig(expert=False, random=2, seed=3)
    assert candidate_actions(a, 2, cfg) == candidate_actions(b, 2, cfg)
    assert sampled_prefix_lengths(a, "states", 2, seed=1) == sampled_prefix_lengths(b, "states", 2, seed=1)

    def keys(src):
        return [(it.task_id, it.sample) for it in candidate_items([src], "states", 2, cfg, per_source=2, seed=1)]

    assert keys(a) == keys(b)
    assert [it.sample for it in completion_items([a], "steps", 2)] == \
        [it.sample for it in completion_items([b], "steps", 2)]


def test_run_rollout_with_candidate_starts_and_resume(tmp_path):
    env = {"max_steps": 10}
    policy = {"kind": "epsilon", "epsilon": 0.5, "seed": 1}
    src = run_rollout(RolloutConfig(env="household", out=tmp_path / "src", tasks=2, progress=False, agent=policy,
                                    env_kwargs=env))
    sources = {t.id: t for t in src.store}
    start = {"source": tmp_path / "src", "prefix_lengths": [0, 1], "completions": 2,
             "candidates": {"expert": True, "random": 1}}
    res = run_rollout(RolloutConfig(env="household", out=tmp_path / "c", progress=False, env_kwargs=env,
                                    agent=policy, start=start))
    comps = res.store.load()
    assert len(comps) == 2 * 2 * 2 * 2  # sources × states × candidates × completions
    for c in comps:
        s, t, a = sources[c.meta["prefix_of"]], c.meta["prefix_len"], c.meta["candidate"]
        assert c.steps[:t] == s.steps[:t] and c.steps[t].action == a and c.seed == s.seed
        assert c.steps[t].info["candidate"] and len(c.steps) > t
        assert c.termination in ("success", "failure", "max_steps")
    experts = {(c.meta["prefix_of"], c.meta["prefix_len"]): sources[c.meta["prefix_of"]].steps[c.meta["prefix_len"]]
               .info["expert_action"] for c in comps}
    assert all(any(c.meta["candidate"] == experts[k] for c in comps if (c.meta["prefix_of"], c.meta["prefix_len"]) == k)
               for k in experts)
    estimates = candidate_q(comps, MCConfig(gamma=0.9))
    assert len(estimates) == 2 * 2 * 2 and all(e.n == 2 and 0.0 <= e.q <= 1.0 for e in estimates)
    again = run_rollout(RolloutConfig(env="household", out=tmp_path / "c", progress=False, env_kwargs=env,
                                      agent=policy, start=start))
    assert len(again.store.load()) == len(comps), "resume redoes nothing"
    other = {**start, "candidates": {"expert": True, "random": 2}}
    with pytest.raises(ValueError, match="start_from"):  # another candidate set is another run
        run_rollout(RolloutConfig(env="household", out=tmp_path / "c", progress=False, env_kwargs=env,
                                  agent=policy, start=other))


def completion(cid: str, t: int, action: str, n_steps: int, won: bool, task: str = "t", sample: int = 0
               ) -> Trajectory:
    steps = [Step(observation=f"o{i}", action=action if i == t else f"a{i}") for i in range(n_steps)]
    return Trajectory(id=cid, env="household", task_id=task, sample=sample, task="x", split="test", seed=0,
                      agent="p", steps=steps, success=won, score=float(won),
                      termination="success" if won else "failure",
                      meta={"prefix_of": "s", "prefix_len": t, "candidate": action})


def test_candidate_q_hand_computed():
    # γ = 0.5, candidate "go" at t = 1: a 3-step win → G = γ^(3−1−1)·(+1) = 0.5, a 4-step loss →
    # G = γ^(4−1−1)·(−1) = −0.25; Q̂ = 0.125, Q̃ = (0.125 + 1)/2 = 0.5625. "look" at t = 1: one 2-step win →
    # G = γ^0 = 1, Q̃ = 1. "go" at t = 0: one 1-step loss → G = −1, Q̃ = 0.
    comps = [completion("c1", 1, "go", 3, True, sample=1), completion("c2", 1, "go", 4, False, sample=2),
             completion("c3", 1, "look", 2, True, sample=3), completion("c4", 0, "go", 1, False, sample=4)]
    est = candidate_q(comps, MCConfig(gamma=0.5))
    got = {(e.step, e.action): (e.q, e.q_signed, e.n) for e in est}
    assert got == {(0, "go"): (0.0, -1.0, 1), (1, "go"): (pytest.approx(0.5625), pytest.approx(0.125), 2),
                   (1, "look"): (1.0, 1.0, 1)}
    # discount "from_start": G = γ^t·R̃ = ±0.5 at t = 1 → "go": Q̂ = 0, Q̃ = 0.5
    from_start = candidate_q(comps, MCConfig(gamma=0.5, discount="from_start"))
    assert {(e.step, e.action): e.q for e in from_start}[(1, "go")] == pytest.approx(0.5)
    assert set(by_state(est)) == {("s", 0), ("s", 1)} and set(by_state(est)[("s", 1)]) == {"go", "look"}


def test_candidate_q_errors_name_the_trajectory_and_field():
    bad = completion("c1", 1, "go", 3, True)
    bad.meta.pop("candidate")
    with pytest.raises(CreditError, match=r"'c1', field 'meta.candidate'"):
        candidate_q([bad])
    wrong = completion("c2", 1, "go", 3, True)
    wrong.steps[1].action = "look"
    with pytest.raises(CreditError, match=r"'c2', field 'steps\[1\].action'"):
        candidate_q([wrong])
    short = completion("c3", 1, "go", 3, True)
    short.meta["prefix_len"] = 5
    with pytest.raises(CreditError, match="no candidate step 5"):
        candidate_q([short])
    crashed = completion("c4", 1, "go", 3, False).model_copy(update={"termination": "env_error"})
    with pytest.raises(CreditError, match="env_error"):
        candidate_q([crashed])
    assert candidate_q([crashed, completion("c5", 1, "go", 3, True, sample=5)],
                       MCConfig(drop_errors=True))[0].n == 1


def test_candidate_training_records_hand_computed():
    comps = [completion("c1", 1, "go", 3, True, sample=1), completion("c2", 1, "go", 4, False, sample=2),
             completion("c3", 1, "look", 2, True, sample=3)]
    steps = run_method("candidate-q", Sources(comps), {"gamma": 0.5}).records
    # Q̃(go) = 0.5625 over 2 completions, on its shortest completion c1; Q̃(look) = 1 on c3 (as hand-computed above)
    got = {(r.action, r.trajectory_id, r.step): (r.target, r.visits, r.extra["q"]) for r in steps}
    assert got == {("go", "c1", 1): (pytest.approx(0.5625), 2, pytest.approx(0.125)), ("look", "c3", 1): (1.0, 1, 1.0)}
    assert steps[0].state_key == steps[1].state_key, "both candidates act in the same state"
    pairs = run_method("candidate-pairs", Sources(comps), {"gamma": 0.5, "margin": 0.2}).records
    # Q̃(look) − Q̃(go) = 0.4375 ≥ 0.2: one pair, chosen look (c3, step 1), rejected go (c1, step 1), Q on ±1
    [p] = pairs
    assert (p.chosen, p.trajectory_id, p.rejected, p.rejected_trajectory_id, p.step, p.rejected_step) == \
        ("look", "c3", "go", "c1", 1, 1)
    assert (p.q_chosen, p.q_rejected, p.visits) == (1.0, pytest.approx(0.125), 1)
    assert run_method("candidate-pairs", Sources(comps), {"gamma": 0.5, "margin": 0.5}).records == []

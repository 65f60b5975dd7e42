"""`run_rollout` with agents built by kind: a tiny local HF model on household, random, and bad options."""

from __future__ import annotations

import pytest

from proctor.agents import make_agent
from proctor.rollout import RolloutConfig, run_rollout


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from proctor.models.tiny import build_tiny

    corpus = ["go to cabinet 1", "take plate 1 from cabinet 1", "You are in the middle of a room."] * 20
    return build_tiny(tmp_path_factory.mktemp("tiny"), hidden_size=32, layers=1, heads=2, vocab_size=300,
                      corpus=corpus)


def test_hf_agent_rollout_records_model_outputs(tiny_model, tmp_path):
    result = run_rollout(RolloutConfig(
        env="household", out=tmp_path / "s", tasks=3, samples=2, batch=4, seed=1, env_kwargs={"max_steps": 2},
        progress=False, agent={"kind": "hf", "model": str(tiny_model), "temperature": 1.0,
                               "prompt": {"format": "plain"}}))
    trajs = result.store.load()
    assert len(trajs) == 6 and result.summary.episodes == 6
    assert result.store.meta["rollout"]["agent"].startswith("hf:")
    for t in trajs:
        assert t.termination in ("success", "failure", "max_steps") and 1 <= len(t.steps) <= 2
        for s in t.steps:
            assert s.raw_output is not None and s.logprobs is not None
            assert len(s.logprobs) == len(s.token_ids) > 0
            assert all(lp <= 0.0 for lp in s.logprobs)
            assert isinstance(s.info["admissible_actions"], list) and "parsed" in s.info


def test_random_agent_by_kind_is_reproducible(tmp_path):
    def actions(out):
        res = run_rollout(RolloutConfig(env="household", out=tmp_path / out, tasks=2, samples=2, batch=3, seed=5,
                                        env_kwargs={"max_steps": 3}, progress=False,
                                        agent={"kind": "random", "seed": 5}))
        return {t.key: t.actions for t in res.store}

    first = actions("a")
    assert first == actions("b") and len(first) == 4
    assert all(1 <= len(a) <= 3 for a in first.values())


def test_agent_configs_reject_unknown_kinds_fields_and_experts():
    with pytest.raises(ValueError, match="unknown agent kind 'gpt'"):
        make_agent("gpt")
    with pytest.raises(ValueError, match="field 'model': Field required"):
        make_agent("hf")
    with pytest.raises(ValueError, match="field 'base_url': Field required"):
        make_agent("openai", model="m")
    with pytest.raises(ValueError, match="field 'temperature': Extra inputs are not permitted"):
        make_agent("random", temperature=0.5)
    with pytest.raises(ValueError, match="unknown expert 'xyz'"):
        make_agent("expert", expert="xyz")
    assert make_agent("expert", expert="oracle").describe() == "expert:oracle"


def test_mixture_and_epsilon_agents_from_config_roll_out(tmp_path):
    mixture = {"kind": "mixture", "seed": 1, "components": [
        {"agent": {"kind": "expert"}, "weight": 0.5}, {"agent": "random", "weight": 0.5}]}
    for name, agent in (("m", mixture), ("e", {"kind": "epsilon", "epsilon": 0.5, "seed": 1})):
        res = run_rollout(RolloutConfig(env="household", out=tmp_path / name, tasks=3, samples=2, batch=4,
                                        env_kwargs={"max_steps": 20}, progress=False, agent=agent))
        trajs = res.store.load()
        assert len(trajs) == 6 and all(t.termination != "agent_error" for t in trajs)
        components = {s.info["candidate_meta"]["component"] for t in trajs for s in t.steps}
        assert components == {0, 1}

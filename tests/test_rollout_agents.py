"""`run_rollout` with agents built by kind: a tiny local HF model on household, random, and bad options."""

from __future__ import annotations

import pytest

from proctor.rollout import build_agent, run_rollout


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from proctor.models.tiny import build_tiny

    corpus = ["go to cabinet 1", "take plate 1 from cabinet 1", "You are in the middle of a room."] * 20
    return build_tiny(tmp_path_factory.mktemp("tiny"), hidden_size=32, layers=1, heads=2, vocab_size=300,
                      corpus=corpus)


def test_hf_agent_rollout_records_model_outputs(tiny_model, tmp_path):
    result = run_rollout("household", "hf", tmp_path / "s", tasks=3, samples=2, batch=4, seed=1,
                         env_kwargs={"max_steps": 2}, progress=False,
                         agent_options={"model": str(tiny_model), "temperature": 1.0, "prompt_format": "plain"})
    trajs = result.store.load()
    assert len(trajs) == 6 and result.summary.episodes == 6
    assert result.store.meta["rollout"]["agent"].startswith("hf:")
    for t in trajs:
        assert t.termination in ("success", "failure", "max_steps") and 1 <= len(t.steps) <= 2
        for s in t.steps:
            assert s.raw_output is not None and s.logprobs is not None
            assert len(s.logprobs) == len(s.info["candidate_meta"]["token_ids"]) > 0
            assert all(lp <= 0.0 for lp in s.logprobs)
            assert isinstance(s.info["admissible_actions"], list) and "parsed" in s.info


def test_random_agent_by_kind_is_reproducible(tmp_path):
    def actions(out):
        res = run_rollout("household", "random", tmp_path / out, tasks=2, samples=2, batch=3, seed=5,
                          env_kwargs={"max_steps": 3}, progress=False)
        return {t.key: t.actions for t in res.store}

    first = actions("a")
    assert first == actions("b") and len(first) == 4
    assert all(1 <= len(a) <= 3 for a in first.values())


def test_build_agent_rejects_missing_and_unused_options():
    with pytest.raises(ValueError, match="unknown agent kind 'gpt'"):
        build_agent("gpt")
    with pytest.raises(ValueError, match="needs --model"):
        build_agent("hf")
    with pytest.raises(ValueError, match="needs --base-url"):
        build_agent("openai", model="m")
    with pytest.raises(ValueError, match="does not use --model, --temperature"):
        build_agent("random", model="m", temperature=0.5)
    assert build_agent("expert", expert_kind="oracle").describe() == "expert:oracle"

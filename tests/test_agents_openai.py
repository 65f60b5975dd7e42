"""`OpenAIAgent` end to end against `proctor serve`'s app (real uvicorn on 127.0.0.1, tiny model)."""

from __future__ import annotations

import pytest

from proctor.agents import AgentError, Prefix
from proctor.agents.openai_agent import OpenAIAgent, backoff_delay, is_retryable, request_seed
from proctor.envs import EnvSpec, make
from proctor.prompts.render import PromptConfig, parse_output
from proctor.rollout.engine import rollout
from proctor.serving import Generator, create_app
from proctor.serving.background import BackgroundServer
from proctor.trajectory import Step

NAME = "tiny"


@pytest.fixture(scope="module")
def base_url(tiny_model_dir):
    generator = Generator.load(str(tiny_model_dir), device="cpu")
    with BackgroundServer(create_app(generator, NAME)) as srv:
        yield srv.url + "/v1"


@pytest.fixture(scope="module")
def prefixes() -> list[Prefix]:
    env = make("household")
    out = []
    for i, task_id in enumerate(env.task_ids("test")[:3]):
        obs, info = env.reset(task_id, seed=i)
        out.append(Prefix(env="household", task_id=task_id, task=info["task"], observation=obs,
                          info={"admissible_actions": env.admissible_actions()}, seed=i))
    return out


def agent(base_url: str, **kw) -> OpenAIAgent:
    kw = {"max_tokens": 8, "seed": 3, "max_retries": 0, "timeout": 60} | kw
    return OpenAIAgent(base_url, NAME, **kw)


def test_pure_helpers():
    assert [backoff_delay(a, 0.5, 3.0) for a in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert [is_retryable(s) for s in (400, 401, 404, 408, 409, 429, 500, 503)] == [
        False, False, False, True, True, True, True, True]
    p = Prefix(env="e", task_id="t", task="x", observation="o")
    q = Prefix(env="e", task_id="t", task="x", observation="o", sample=1)
    r = Prefix(env="e", task_id="t", task="x", observation="o2", history=[Step(observation="o", action="a")])
    seeds = {request_seed(0, p), request_seed(0, q), request_seed(0, r), request_seed(1, p)}
    assert len(seeds) == 4 and all(0 <= s < 2**31 for s in seeds)
    assert request_seed(0, p) == request_seed(0, Prefix(env="e", task_id="t", task="y", observation="z"))


def test_chat_endpoint_candidates(base_url, prefixes):
    a = agent(base_url, prompt=PromptConfig(format="reason_action"))
    out = a.act(prefixes, n=2)
    assert [len(c) for c in out] == [2, 2, 2]
    for cands in out:
        for c in cands:
            assert isinstance(c.raw_output, str)
            parsed = parse_output(c.raw_output, a.prompt)
            assert (c.action, c.reason, c.parsed) == (parsed.action, parsed.reason, parsed.parsed)
            assert c.meta["finish_reason"] in ("stop", "length")
            assert c.finished == (c.meta["finish_reason"] == "stop")
            assert 1 <= len(c.logprobs) <= 8 and all(x <= 0 for x in c.logprobs)
    assert a.act(prefixes, n=2)[0][0].raw_output == out[0][0].raw_output  # seeded: reproducible
    a.close()


def test_completions_endpoint_renders_the_same_prompt_as_chat(base_url, prefixes, tiny_model_dir):
    chat = agent(base_url, temperature=0, max_tokens=10)
    comp = agent(base_url, temperature=0, max_tokens=10, endpoint="completions", tokenizer=str(tiny_model_dir))
    for c1, c2 in zip(chat.act(prefixes), comp.act(prefixes), strict=True):
        assert c1[0].raw_output == c2[0].raw_output
        assert c1[0].logprobs == pytest.approx(c2[0].logprobs, abs=1e-5)
        assert c1[0].token_ids == c2[0].token_ids and len(c1[0].token_ids) == len(c1[0].logprobs)
        assert c1[0].meta["prompt_tokens"] == c2[0].meta["prompt_tokens"]
    with pytest.raises(ValueError, match="tokenizer="):
        OpenAIAgent(base_url, NAME, endpoint="completions")


def test_stop_strings_reach_the_server(base_url, prefixes):
    # same seed, same prefix: the sample with a stop string is the free sample cut before the stop
    free = agent(base_url, max_tokens=16).act(prefixes[:1])[0][0].raw_output
    stop = next((w for w in free.split()[1:] if w.isascii()), None)
    assert stop is not None, f"sample {free!r} has no ASCII word to stop on"
    cut = agent(base_url, max_tokens=16, stop=[stop]).act(prefixes[:1])[0][0]
    assert cut.raw_output == free[: free.find(stop)]
    assert cut.meta["finish_reason"] == "stop" and cut.finished


def test_rollout_with_the_agent(base_url, tmp_path):
    a = agent(base_url, max_tokens=6, concurrency=2)
    tasks = make("household").task_ids("test")[:2]
    store = rollout(EnvSpec("household", {"max_steps": 3}), a, tasks, tmp_path / "store", batch_size=2,
                    progress=False)
    trajs = store.load()
    assert sorted(t.task_id for t in trajs) == sorted(tasks)
    assert all(1 <= len(t.steps) <= 3 and t.termination != "agent_error" for t in trajs)
    assert all(t.agent == a.describe() for t in trajs)
    steps = [s for t in trajs for s in t.steps]
    assert all(s.token_ids and len(s.token_ids) == len(s.logprobs) for s in steps)  # what RL trains on


def test_unknown_model_is_an_agent_error_without_retry(base_url, prefixes):
    bad = OpenAIAgent(base_url, "no-such-model", max_retries=3, backoff=0.01)
    with pytest.raises(AgentError, match=r"chat/completions answered HTTP 404 \(attempt 1 of 4\)"):
        bad.act(prefixes[:1])

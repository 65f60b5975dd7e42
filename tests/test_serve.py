"""`proctor serve`'s app on a real uvicorn server (background thread, 127.0.0.1), driven by the `openai` client."""

from __future__ import annotations

import math

import httpx
import openai
import pytest
import torch

from proctor.agents.generation_utils import find_stop, sampled_logprobs
from proctor.serving import Generator, create_app
from proctor.serving.background import BackgroundServer
from proctor.serving.generation import finish_sample

NAME = "tiny"
KEY = "test-secret-key"


@pytest.fixture(scope="module")
def generator(tiny_model_dir) -> Generator:
    return Generator.load(str(tiny_model_dir), device="cpu")


@pytest.fixture(scope="module")
def server(generator):
    with BackgroundServer(create_app(generator, NAME)) as srv:
        yield srv


@pytest.fixture(scope="module")
def client(server):
    with openai.OpenAI(base_url=server.url + "/v1", api_key="EMPTY", max_retries=0, timeout=60) as c:
        yield c


def greedy_text(client, prompt: str, max_tokens: int = 30) -> str:
    return client.completions.create(model=NAME, prompt=prompt, temperature=0, max_tokens=max_tokens).choices[0].text


# ---- pure helpers ---------------------------------------------------------------------------------------


def test_find_stop_earliest_then_longest():
    assert find_stop("abcabc", ["c", "bc"]) == (1, 3)
    assert find_stop("abcabc", ["ca"]) == (2, 4)
    assert find_stop("abc", ["x"]) is None
    assert find_stop("abc", []) is None


def test_finish_sample_cuts_at_stop_and_counts_tokens():
    # pieces "ab" "cX" "Yd": stop "XY" starts at 3 and ends at 5, completed by the third token
    assert finish_sample(["ab", "cX", "Yd"], False, ["XY"]) == ("abc", "stop", 3)
    # an EOS piece ("") counts as a generated token and ends the sample with "stop"
    assert finish_sample(["ab", "c", ""], True, []) == ("abc", "stop", 3)
    assert finish_sample(["ab", "c"], False, ["zz"]) == ("abc", "length", 2)


def test_sampled_logprobs_by_hand():
    # step 0 logits [0, ln 3] → probabilities [1/4, 3/4]; step 1 logits [ln 2, ln 2] → [1/2, 1/2]
    logits = [torch.tensor([[0.0, math.log(3)]]), torch.tensor([[math.log(2), math.log(2)]])]
    chosen, top = sampled_logprobs(logits, torch.tensor([[0, 1]]), k=1)
    assert chosen[0] == pytest.approx([math.log(0.25), math.log(0.5)])
    assert top[0][0][0][0] == 1 and top[0][0][0][1] == pytest.approx(math.log(0.75))
    assert sampled_logprobs(logits, torch.tensor([[0, 1]]), k=0)[1] == [[[], []]]


# ---- the server -----------------------------------------------------------------------------------------


def test_models_lists_the_served_name(client, generator):
    models = client.models.list().data
    assert [m.id for m in models] == [NAME]
    assert models[0].object == "model"


def test_chat_n3_choices_usage_and_template(client, generator):
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "go to the fridge"}]
    resp = client.chat.completions.create(model=NAME, messages=messages, n=3, max_tokens=6, seed=0)
    assert [c.index for c in resp.choices] == [0, 1, 2]
    assert all(c.message.role == "assistant" and isinstance(c.message.content, str) for c in resp.choices)
    assert all(c.finish_reason in ("stop", "length") for c in resp.choices)
    prompt = generator.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert prompt.endswith("<|im_start|>assistant\n")
    n_prompt = len(generator.tokenizer(prompt, add_special_tokens=False)["input_ids"])
    assert resp.usage.prompt_tokens == n_prompt  # counted once, not n times
    assert 3 <= resp.usage.completion_tokens <= 18
    assert resp.usage.total_tokens == n_prompt + resp.usage.completion_tokens


def test_completions_list_prompt_is_batched_like_single_requests(client, generator):
    prompts = ["go to fridge 1", "take the apple from the countertop and put it in"]
    resp = client.completions.create(model=NAME, prompt=prompts, n=2, temperature=0, max_tokens=8)
    assert [c.index for c in resp.choices] == [0, 1, 2, 3]
    # greedy: both samples of a prompt agree, and left-padding in the batch changes nothing
    assert resp.choices[0].text == resp.choices[1].text == greedy_text(client, prompts[0], 8)
    assert resp.choices[2].text == resp.choices[3].text == greedy_text(client, prompts[1], 8)
    lengths = [len(generator.tokenizer(p)["input_ids"]) for p in prompts]
    assert resp.usage.prompt_tokens == sum(lengths)


def test_max_tokens_gives_length_finish(client):
    resp = client.completions.create(model=NAME, prompt="open the drawer", temperature=0, max_tokens=3)
    assert resp.choices[0].finish_reason == "length"
    assert resp.usage.completion_tokens == 3


def test_chat_logprobs_match_the_model(client, generator):
    messages = [{"role": "user", "content": "look around"}]
    resp = client.chat.completions.create(
        model=NAME, messages=messages, max_tokens=5, temperature=0, logprobs=True, top_logprobs=3
    )
    content = resp.choices[0].logprobs.content
    assert len(content) == resp.usage.completion_tokens
    assert all(len(t.top_logprobs) == 3 for t in content)
    assert all(t.top_logprobs[0].logprob >= t.top_logprobs[1].logprob >= t.top_logprobs[2].logprob for t in content)
    assert all(t.bytes == list(t.token.encode()) for t in content)
    # greedy: the sampled token is the most likely one, and its logprob is log_softmax of the model's logits
    assert all(abs(t.logprob - t.top_logprobs[0].logprob) < 1e-5 for t in content)
    prompt = generator.chat_prompt(messages)
    ids = generator.tokenizer(prompt, add_special_tokens=False, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        expected = torch.log_softmax(generator.model(ids).logits[0, -1].float(), -1).max().item()
    assert content[0].logprob == pytest.approx(expected, abs=1e-4)
    assert "".join(t.token for t in content).startswith(resp.choices[0].message.content)


def test_completion_logprobs_format(client):
    resp = client.completions.create(model=NAME, prompt="go to", max_tokens=6, logprobs=2, seed=1)
    lp = resp.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == resp.usage.completion_tokens
    assert all(x <= 0 for x in lp.token_logprobs)
    assert all(len(d) <= 2 for d in lp.top_logprobs)
    assert lp.text_offset == [sum(len(t) for t in lp.tokens[:i]) for i in range(len(lp.tokens))]


def test_stop_strings_are_honoured(client):
    prompt = "put the mug in the microwave"
    full = greedy_text(client, prompt)
    k = next((i for i in range(2, len(full) - 1) if full[i : i + 2].isascii() and full[i : i + 2].strip()), None)
    assert k is not None, f"greedy output {full!r} has no ASCII pair to stop on"
    stop = full[k : k + 2]
    resp = client.completions.create(model=NAME, prompt=prompt, temperature=0, max_tokens=30, stop=[stop, "\x07\x07"])
    assert resp.choices[0].text == full[: full.find(stop)]
    assert resp.choices[0].finish_reason == "stop"


def test_seed_reproducibility(client):
    def sample(seed: int) -> list[str]:
        resp = client.completions.create(model=NAME, prompt="take", n=3, max_tokens=12, temperature=1.0, seed=seed)
        return [c.text for c in resp.choices]

    first = sample(7)
    assert sample(7) == first
    assert len(set(first)) > 1  # the n samples of one request differ
    assert sample(8) != first


def _error(resp: httpx.Response) -> dict:
    body = resp.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    return body["error"]


def test_bad_requests_get_400_in_openai_shape(server, client):
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=NAME, prompt="x", temperature=5)
    assert e.value.status_code == 400
    url = server.url + "/v1/completions"
    err = _error(httpx.post(url, json={"model": NAME, "prompt": "x", "temperature": 5}))
    assert err["type"] == "invalid_request_error" and err["param"] == "temperature"
    err = _error(httpx.post(url, json={"model": NAME, "prompt": "x", "stream": True}))
    assert "stream" in err["message"]
    err = _error(httpx.post(url, content=b"{not json", headers={"content-type": "application/json"}))
    assert err["type"] == "invalid_request_error"
    resp = httpx.post(url, json={"model": NAME, "prompt": "x", "max_tokens": 10**6})
    assert resp.status_code == 400 and "context length" in _error(resp)["message"]
    resp = httpx.post(url, json={"model": NAME, "prompt": ["go", ""]})
    assert resp.status_code == 400 and "prompt 1 is empty" in _error(resp)["message"]
    resp = httpx.post(server.url + "/v1/chat/completions", json={"model": NAME, "messages": []})
    assert resp.status_code == 400 and _error(resp)["param"] == "messages"


def test_unknown_model_and_route_get_404(server, client):
    with pytest.raises(openai.NotFoundError) as e:
        client.chat.completions.create(model="gpt-9", messages=[{"role": "user", "content": "hi"}])
    assert e.value.code == "model_not_found" and "tiny" in e.value.message
    resp = httpx.get(server.url + "/v1/nothing")
    assert resp.status_code == 404 and _error(resp)["type"] == "invalid_request_error"


def test_api_key_is_enforced(generator):
    with BackgroundServer(create_app(generator, NAME, api_key=KEY)) as srv:
        base = srv.url + "/v1"
        with openai.OpenAI(base_url=base, api_key="wrong", max_retries=0) as bad:
            with pytest.raises(openai.AuthenticationError) as e:
                bad.models.list()
            assert e.value.status_code == 401 and KEY not in e.value.message
        assert httpx.get(base + "/models").status_code == 401
        resp = httpx.post(base + "/completions", json={"model": NAME, "prompt": "x"})
        assert resp.status_code == 401 and _error(resp)["code"] == "invalid_api_key"
        with openai.OpenAI(base_url=base, api_key=KEY, max_retries=0) as good:
            assert [m.id for m in good.models.list().data] == [NAME]
            resp = good.completions.create(model=NAME, prompt="go", max_tokens=2)
            assert resp.usage.completion_tokens >= 1

"""HFAgent on a tiny local model: batching, n samples, seeding, greedy batched == unbatched, log-probs, stops."""

from __future__ import annotations

import pytest

from proctor.agents import HFAgent, Prefix, make_agent
from proctor.agents.generation_utils import cut_at_stop, generation_end
from proctor.prompts import PromptConfig
from proctor.trajectory import Step


def _prefixes() -> list[Prefix]:
    """Three prefixes of different lengths (so the batch needs padding)."""
    out = []
    for k in range(3):
        history = [Step(observation=f"You see a drawer {i}.", action=f"open drawer {i}") for i in range(k)]
        out.append(Prefix(env="household", task_id=f"t{k}", task="put a mug in the cabinet",
                          observation="You arrive at the kitchen. " * (k + 1), history=history,
                          info={"admissible_actions": ["go to cabinet 1", "look"]}, sample=k))
    return out


@pytest.fixture(scope="module")
def peaked(tiny_model_dir):
    """The tiny model with larger random weights, so greedy decoding varies with the prompt."""
    import torch

    from proctor.models import load

    model, tok = load(tiny_model_dir)
    with torch.random.fork_rng(), torch.no_grad():
        torch.manual_seed(0)
        for p in model.parameters():
            p.normal_(0.0, 0.35)
    return model, tok


def test_n_candidates_per_prefix_with_logprobs(tiny_model_dir):
    agent = HFAgent(tiny_model_dir, temperature=1.0, max_new_tokens=6, seed=0)
    tok = agent.tokenizer
    out = agent.act(_prefixes(), n=3)
    assert [len(c) for c in out] == [3, 3, 3]
    for cands in out:
        for c in cands:
            assert isinstance(c.raw_output, str)
            n_tokens = len(c.token_ids)
            assert len(c.logprobs) == n_tokens and 1 <= n_tokens <= 6
            assert all(lp <= 0 for lp in c.logprobs)
            assert c.finished == (n_tokens < 6)
            assert tok.decode(c.token_ids, skip_special_tokens=True) == c.raw_output
    assert [c[0].meta["prompt_tokens"] for c in out] == sorted(c[0].meta["prompt_tokens"] for c in out)


def test_sampling_is_reproducible_with_a_seed(peaked):
    model, tok = peaked

    def texts(agent):
        return [c.raw_output for cands in agent.act(_prefixes(), n=2) for c in cands]

    first = texts(HFAgent(model, tok, seed=11, max_new_tokens=8))
    assert first == texts(HFAgent(model, tok, seed=11, max_new_tokens=8))
    assert first != texts(HFAgent(model, tok, seed=12, max_new_tokens=8))
    assert len(set(first)) > 1  # the samples differ from each other


def test_greedy_batched_equals_unbatched(peaked):
    """Left padding is correct: each prefix gets the same greedy text and log-probs alone or in a batch."""
    model, tok = peaked
    agent = HFAgent(model, tok, temperature=0, max_new_tokens=10)
    batched = [c[0] for c in agent.act(_prefixes())]
    alone = [agent.act([p])[0][0] for p in _prefixes()]
    assert [c.raw_output for c in batched] == [c.raw_output for c in alone]
    assert len({c.raw_output for c in batched}) == 3  # not a degenerate constant output
    for b, a in zip(batched, alone, strict=True):
        assert b.logprobs == pytest.approx(a.logprobs, abs=1e-4)
    two = HFAgent(model, tok, temperature=0, max_new_tokens=10, batch_size=2)
    assert [c[0].raw_output for c in two.act(_prefixes())] == [c.raw_output for c in batched]


def test_logprobs_match_a_forward_pass(peaked):
    import torch

    model, tok = peaked
    agent = HFAgent(model, tok, temperature=0, max_new_tokens=5)
    p = _prefixes()[1]
    cand = agent.act([p])[0][0]
    from proctor.prompts.render import render_prompt

    prompt_ids = tok.encode(render_prompt(tok, p, agent.prompt), add_special_tokens=False)
    gen_ids = cand.token_ids
    ids = torch.tensor([prompt_ids + gen_ids])
    with torch.no_grad():
        logp = torch.log_softmax(model(ids).logits[0].float(), -1)
    expected = [logp[len(prompt_ids) - 1 + i, t].item() for i, t in enumerate(gen_ids)]
    assert len(gen_ids) == 5 and cand.logprobs == pytest.approx(expected, abs=1e-4)
    greedy = [int(logp[len(prompt_ids) - 1 + i].argmax()) for i in range(len(gen_ids))]
    assert gen_ids == greedy


def test_stop_string_ends_and_is_cut(peaked):
    model, tok = peaked
    p = _prefixes()[0]
    free = HFAgent(model, tok, temperature=0, max_new_tokens=12).act([p])[0][0]
    assert not free.finished
    text = free.raw_output  # a stop string of whole characters (no half a UTF-8 byte sequence, shown as U+FFFD)
    stop = next(text[i:i + 3] for i in range(4, len(text) - 2) if "\ufffd" not in text[i:i + 3])
    cut = HFAgent(model, tok, temperature=0, max_new_tokens=12, stop=[stop]).act([p])[0][0]
    assert cut.finished
    assert cut.raw_output == free.raw_output[: free.raw_output.find(stop)]
    assert len(cut.token_ids) < len(free.token_ids)


def test_output_is_parsed_with_the_prompt_format(peaked):
    model, tok = peaked
    agent = HFAgent(model, tok, temperature=0, max_new_tokens=6, prompt={"format": "xml"})
    cand = agent.act(_prefixes()[:1])[0][0]
    assert cand.parsed is False or "<action>" in cand.raw_output  # random weights rarely write the tags
    assert "format=xml" in agent.describe() and "greedy" in agent.describe()


def test_generation_end_rules():
    eos, pad = {2, 9}, 0
    assert generation_end([5, 6, 9, 0, 0], eos, pad, 5) == (3, True)  # ends at the first EOS, included
    assert generation_end([5, 6, 7, 0, 0], eos, pad, 5) == (3, True)  # stopped early (stop string)
    assert generation_end([5, 6, 7, 8, 4], eos, pad, 5) == (5, False)  # ran out of tokens
    assert generation_end([5, 6, 7], eos, pad, 5) == (3, True)  # every row stopped before the budget
    assert generation_end([5, 2, 2, 2, 2], eos, 2, 5) == (2, True)  # pad == eos
    assert cut_at_stop("go north\nObservation: x", ["\nObs", "x"]) == ("go north", True)
    assert cut_at_stop("go north", ["\n"]) == ("go north", False)


def test_bad_settings_and_factory(tiny_model_dir, peaked):
    model, tok = peaked
    with pytest.raises(ValueError, match="top_p"):
        HFAgent(model, tok, top_p=0)
    with pytest.raises(ValueError, match="no tokenizer"):
        HFAgent(model)
    agent = make_agent("hf", model=str(tiny_model_dir), temperature=0.5, prompt={"format": "thought_action"})
    assert isinstance(agent, HFAgent) and agent.prompt == PromptConfig(format="thought_action")
    with pytest.raises(ValueError, match="field .temprature.: Extra inputs are not permitted"):
        make_agent("hf", model=str(tiny_model_dir), temprature=0.5)


def test_default_stop_is_the_formats_end_of_action(peaked):
    """A one-line action ends at its newline unless the agent sets `stop` ([] turns stopping off)."""
    model, tok = peaked
    assert HFAgent(model, tok).stop == ["\n"]
    assert HFAgent(model, tok, prompt={"format": "xml"}).stop == ["</action>"]
    assert HFAgent(model, tok, prompt={"format": "reason_action"}).stop == ["\n\n"]
    assert HFAgent(model, tok, stop=[]).stop == []
    assert HFAgent(model, tok, stop=["END"]).stop == ["END"]

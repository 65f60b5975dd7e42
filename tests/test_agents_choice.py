"""The constrained-choice agent: likelihoods equal a plain forward pass, replies equal SFT's targets, sampling
and greedy choice, the free-generation fallback, the registry and the rollout engine."""

from __future__ import annotations

import math

import pytest
import torch

from proctor.agents.choice import ChoiceAgent, choice_probabilities, gumbel_draws
from proctor.agents.registry import make_agent
from proctor.envs import make
from proctor.envs.experts import expert_policy
from proctor.episode import WorkItem, play
from proctor.prompts import Candidate, Prefix, PromptConfig, prefix_at, render_training_text
from proctor.rollout import RolloutConfig, run_rollout


def test_choice_probabilities_by_hand() -> None:
    # exp(0) : exp(ln 2) = 1 : 2
    assert choice_probabilities([0.0, math.log(2)], 1.0) == pytest.approx([1 / 3, 2 / 3])
    # T = 2 halves the log-likelihoods: exp(0) : exp(2 ln 2 / 2) = 1 : 2
    assert choice_probabilities([-5.0, -5.0 + 2 * math.log(2)], 2.0) == pytest.approx([1 / 3, 2 / 3])
    # T = 0: the first of the tied maxima
    assert choice_probabilities([-1.0, -0.5, -0.5], 0.0) == [0.0, 1.0, 0.0]
    with pytest.raises(ValueError):
        choice_probabilities([], 1.0)


LOGLIKS, ACTIONS = [-1.0, -0.3, -2.0, -0.7], ["go to d", "go to a", "go to c", "go to b"]


def test_gumbel_draws_follow_the_choice_probabilities() -> None:
    counts = [0] * 4
    for seed in range(4000):
        counts[gumbel_draws(LOGLIKS, ACTIONS, 1.0, seed, 1)[0]] += 1
    # p = softmax(ℓ) = [0.211, 0.426, 0.078, 0.285]; 4,000 draws: a standard error of at most 0.008
    assert [c / 4000 for c in counts] == pytest.approx(choice_probabilities(LOGLIKS, 1.0), abs=0.03)
    # n draws from one generator are independent draws, not n copies of one
    assert len(set(gumbel_draws(LOGLIKS, ACTIONS, 1.0, 0, 8))) > 1


def test_gumbel_draws_are_coupled_across_policies_and_list_orders() -> None:
    """The same seed at the same step: raising an action's likelihood (or sharpening, T < 1) never takes away a
    draw it won; the picks do not depend on the order the env lists the actions in."""
    raised = [LOGLIKS[0] + 0.8, *LOGLIKS[1:]]
    perm = [2, 0, 3, 1]
    for seed in range(300):
        before = gumbel_draws(LOGLIKS, ACTIONS, 1.0, seed, 4)
        after = gumbel_draws(raised, ACTIONS, 1.0, seed, 4)
        assert all(a == 0 for b, a in zip(before, after, strict=True) if b == 0)
        sharp = gumbel_draws(LOGLIKS, ACTIONS, 0.5, seed, 4)
        assert all(s == 1 for b, s in zip(before, sharp, strict=True) if b == 1)  # index 1 is the mode
        shuffled = gumbel_draws([LOGLIKS[i] for i in perm], [ACTIONS[i] for i in perm], 1.0, seed, 4)
        assert [ACTIONS[perm[k]] for k in shuffled] == [ACTIONS[k] for k in before]
    # an action's noise does not depend on the other actions listed: a winner stays the winner of any sublist
    # that keeps it (two policies in different states at the same step, sharing the actions both can take)
    for seed in range(300):
        winner = gumbel_draws(LOGLIKS, ACTIONS, 1.0, seed, 1)[0]
        keep = [i for i in range(4) if i == winner or (seed >> i) & 1]
        assert [keep[k] for k in gumbel_draws([LOGLIKS[i] for i in keep], [ACTIONS[i] for i in keep], 1.0, seed,
                                               1)] == [winner]
    with pytest.raises(ValueError, match="temperature > 0"):
        gumbel_draws(LOGLIKS, ACTIONS, 0.0, 0, 1)
    with pytest.raises(ValueError, match="3 likelihoods for 4 actions"):
        gumbel_draws(LOGLIKS[:3], ACTIONS, 1.0, 0, 1)


@pytest.fixture(scope="module")
def prefixes() -> list[Prefix]:
    """States of two searching-expert episodes in the small household (with admissible lists)."""
    env = make("household", preset="small")
    policy = expert_policy("household", "search")
    out = []
    for task in env.task_ids("train")[:2]:
        traj = play(env, WorkItem(task, 0, 0), lambda p: Candidate(policy(p)))
        out += [prefix_at(traj, t) for t in (0, 2, 4) if t < len(traj.steps)]
    return out


@pytest.fixture(scope="module")
def agent(tiny_model_dir) -> ChoiceAgent:
    return ChoiceAgent(tiny_model_dir, prompt=PromptConfig(history=2), temperature=1.0, seed=3)


def plain_logprobs(agent: ChoiceAgent, prefix: Prefix, reply: list[int]) -> list[float]:
    """log π of each reply token from one unbatched forward pass over prompt + reply."""
    from proctor.prompts import render_prompt

    prompt = agent.tokenizer(render_prompt(agent.tokenizer, prefix, agent.prompt), add_special_tokens=False)["input_ids"]
    ids = torch.tensor([prompt + reply])
    with torch.no_grad():
        logp = torch.log_softmax(agent.model(input_ids=ids).logits[0].float(), dim=-1)
    return [float(logp[len(prompt) - 1 + j, tok]) for j, tok in enumerate(reply)]


def test_scores_equal_a_plain_forward_pass_on_every_path(agent, prefixes, monkeypatch) -> None:
    """One row per prompt under a tree mask (after the first call), the prompts' KV cache copied per reply (the
    first call; attention without custom masks), prompt + reply rows (caches that cannot be shared)."""
    agent._reuse_kv = None
    cached = agent.score(prefixes)  # the first call: the copied cache, which tells whether it can be shared
    assert agent._reuse_kv is True
    tree = agent.score(prefixes)
    agent._reuse_kv = False
    try:
        rows = agent.score(prefixes)
    finally:
        agent._reuse_kv = True
    monkeypatch.setattr("proctor.agents.choice.takes_tree_mask", lambda model: False)
    cached_again = agent.score(prefixes)
    for prefix, options in zip(prefixes, tree, strict=True):
        assert [c.action for c in options] == prefix.admissible_actions
        for c in options[:4]:
            assert c.logprobs == pytest.approx(plain_logprobs(agent, prefix, c.token_ids), abs=1e-4)
            assert c.meta["choice_logprob"] == pytest.approx(sum(c.logprobs))
    for other in (cached, rows, cached_again):
        for a_row, b_row in zip(tree, other, strict=True):
            assert [c.logprobs for c in a_row] == [pytest.approx(c.logprobs, abs=1e-4) for c in b_row]


def test_small_batches_give_the_same_scores(tiny_model_dir, agent, prefixes) -> None:
    small = ChoiceAgent(agent.model, agent.tokenizer, prompt=agent.prompt, batch_size=5)
    for a_row, b_row in zip(agent.score(prefixes), small.score(prefixes), strict=True):
        assert [c.meta["choice_logprob"] for c in a_row] == pytest.approx(
            [c.meta["choice_logprob"] for c in b_row], abs=1e-4)


def test_reply_ids_are_what_sft_trains_on(agent, prefixes) -> None:
    """The scored reply is the renderer's completion up to and including the end-of-turn token."""
    env = make("household", preset="small")
    policy = expert_policy("household", "search")
    traj = play(env, WorkItem(env.task_ids("train")[0], 0, 0), lambda p: Candidate(policy(p)))
    for t in range(len(traj.steps)):
        _, completion = render_training_text(agent.tokenizer, traj, t, agent.prompt)
        ids = agent.tokenizer(completion, add_special_tokens=False)["input_ids"]
        [reply] = agent.reply_ids(prefix_at(traj, t), [traj.steps[t].action])
        assert reply == ids[:len(reply)]
        assert reply[-1] in agent.eos_ids and not any(tok in agent.eos_ids for tok in reply[:-1])


def test_sampling_is_reproducible_and_greedy_takes_the_argmax(agent, prefixes) -> None:
    first = agent.act(prefixes, n=6)
    again = agent.act(prefixes, n=6)
    assert [[c.action for c in row] for row in first] == [[c.action for c in row] for row in again]
    for prefix, row in zip(prefixes, first, strict=True):
        assert len(row) == 6 and all(c.action in prefix.admissible_actions for c in row)
        assert all(c.token_ids and len(c.logprobs) == len(c.token_ids) and c.finished for c in row)
        assert all(c.meta["prompt_tokens"] > 0 and 0 < c.meta["choice_prob"] <= 1 for c in row)
    flat = ChoiceAgent(agent.model, agent.tokenizer, prompt=agent.prompt, temperature=1000.0, seed=3)
    assert len({c.action for row in flat.act(prefixes, n=6) for c in row}) > 2 * len(prefixes)  # ~uniform
    greedy = ChoiceAgent(agent.model, agent.tokenizer, prompt=agent.prompt, temperature=0)
    for options, row in zip(agent.score(prefixes), greedy.act(prefixes, n=3), strict=True):
        best = max(options, key=lambda c: c.meta["choice_logprob"])
        assert [c.action for c in row] == [best.action] * 3


def test_without_admissible_actions_it_generates(agent) -> None:
    prefix = Prefix("household", "t", "put a mug in fridge.", "You are in the middle of a room.")
    [[cand]] = agent.act([prefix], n=1)
    assert cand.token_ids and cand.logprobs is not None and "choice_logprob" not in cand.meta


def test_registry_builds_it_and_rollouts_take_only_admissible_actions(tiny_model_dir, tmp_path) -> None:
    spec = {"kind": "choice", "model": str(tiny_model_dir), "temperature": 0, "prompt": {"history": 1}}
    assert isinstance(make_agent(spec), ChoiceAgent)
    with pytest.raises(ValueError, match="temperature"):
        make_agent({**spec, "temperature": -1})
    result = run_rollout(RolloutConfig(env="household", env_kwargs={"preset": "small", "max_steps": 4},
                                       agent=spec, out=tmp_path / "r", split="test", tasks=3, batch=3,
                                       progress=False))
    steps = [s for t in result.store for s in t.steps]
    assert len(result.store) == 3 and steps
    assert all(s.valid for s in steps)
    assert all(s.token_ids for s in steps)

"""ArCHer's likelihood critic (`proctor.rl.likelihood_critic`): Q is σ(β·ℓ + b) of the LM's own log-likelihood
(from a likelihood PRM folder, the PRM's score), V is read at the state's last token the same way in both
passes, a save/load round trip keeps it, TD targets outside (0, 1) are refused, and ArCHer runs with it end to
end on `household`."""

from __future__ import annotations

import json
import math
import shutil

import pytest
import torch

from proctor.models import load
from proctor.models.sequences import completion_logprobs, sequence_logprobs
from proctor.prm.likelihood import LIKELIHOOD_FILE
from proctor.rl.archer import ArCHerConfig, critic_parameter_groups, train_archer
from proctor.rl.critic import critic_loss
from proctor.rl.likelihood_critic import LikelihoodCritic
from proctor.rl.replay import ReplayTransition
from proctor.training.policy import frozen_copy
from test_rl_archer import td_losses

PROMPT = {"history": 2, "memory": True, "show_admissible": False, "system": ""}
ROWS = [([5, 9, 12, 7], [30, 31]), ([5, 8], [40, 41, 42]), ([6, 6, 6, 6, 6, 6], [50])]


def _prm_folder(tiny_model_dir, tmp_path, beta=2.0, bias=-1.0):
    folder = tmp_path / "prm"
    shutil.copytree(tiny_model_dir, folder)
    (folder / LIKELIHOOD_FILE).write_text(json.dumps({"kind": "proctor.likelihood_prm", "beta": beta,
                                                      "bias": bias, "prompt": PROMPT}))
    return folder


def _household_archer(tiny_model_dir, tmp_path, **fields) -> ArCHerConfig:
    """ArCHer on 2 `household` tasks × 2 episodes of 3 steps, the choice policy, the likelihood critic from a PRM
    folder; `fields` set the rest."""
    return ArCHerConfig(policy=str(tiny_model_dir), output_dir=tmp_path / "run", env="household",
                        env_kwargs={"preset": "small", "max_steps": 3}, tasks=2, rollouts_per_task=2,
                        agent={"kind": "choice", "temperature": 1.0, "prompt": PROMPT}, critic_kind="likelihood",
                        critic=str(_prm_folder(tiny_model_dir, tmp_path)), critic_batch_size=4, progress=False,
                        **fields)


def _t(i: int, reward: float, terminated: bool) -> ReplayTransition:
    return ReplayTransition([1, 2, i], [5, i], [-0.5, -0.25], reward, terminated, not terminated, [1, 2, i, 3])


def test_q_is_the_likelihood_prms_score_and_v_reads_the_states_last_token(tiny_model_dir, tmp_path):
    critic = LikelihoodCritic.build(_prm_folder(tiny_model_dir, tmp_path))
    assert critic.beta == 2.0 and critic.q_bias.tolist() == [-1.0, -1.0]
    lm, tok = load(tiny_model_dir)
    with torch.no_grad():
        ell = sequence_logprobs(*completion_logprobs(lm, ROWS, tok.pad_token_id)).tolist()
        torch.manual_seed(0)
        torch.nn.init.normal_(critic.value_head.weight, std=0.5)
        q, v = critic([p for p, _ in ROWS], [a for _, a in ROWS])
        v_alone = critic.state_values([p for p, _ in ROWS])
    for row, lik in zip(q.tolist(), ell, strict=True):  # Q = σ(2ℓ − 1), by hand from the LM's log-probs
        assert row == pytest.approx([1 / (1 + math.exp(-(2 * lik - 1)))] * 2, rel=1e-5)
    assert v.shape == (3, 2) and torch.allclose(v, v_alone, atol=1e-5)  # one pass or two: the same V(s)
    assert len(set(v[:, 0].tolist())) == 3  # states differ, so do their values


def test_save_and_load_keep_the_critic(tiny_model_dir, tmp_path):
    critic = LikelihoodCritic.build(tiny_model_dir)  # a plain LM: β = 1, b = 0
    assert critic.beta == 1.0 and critic.q_bias.tolist() == [0.0, 0.0]
    with torch.no_grad():
        critic.q_bias.copy_(torch.tensor([0.3, -0.2]))
        torch.nn.init.normal_(critic.value_head.weight, std=0.5)
        before = critic([p for p, _ in ROWS], [a for _, a in ROWS])
    back = LikelihoodCritic.build(critic.save_pretrained(tmp_path / "critic"))
    with torch.no_grad():
        after = back([p for p, _ in ROWS], [a for _, a in ROWS])
    assert back.q_bias.tolist() == pytest.approx([0.3, -0.2])
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(before, after, strict=True))


def test_td_loss_falls_and_targets_outside_the_range_are_refused(tiny_model_dir):
    torch.manual_seed(0)
    critic = LikelihoodCritic.build(tiny_model_dir)
    batch = [_t(i, reward=float(i % 3 == 0 and i % 2 == 0), terminated=i % 3 == 0) for i in range(8)]
    with torch.no_grad():  # these random actions are unlikely (ℓ ≈ −20): a bias that puts σ in its working range
        ell = sequence_logprobs(*completion_logprobs(critic.lm, [(t.prompt_ids, t.action_ids) for t in batch], 0))
        critic.q_bias.fill_(-float(ell.mean()))
    target = frozen_copy(critic)
    losses = td_losses(critic, target, batch)
    assert losses[-1] < 0.5 * losses[0]
    with pytest.raises(ValueError, match=r"TD target \[-1.0, -1.0\] .* \(reward -1.0\) is outside the critic's "
                                         r"range \[0.0, 1.0\]"):
        critic_loss(critic, target, [_t(1, reward=-1.0, terminated=True)], gamma=0.9)


def test_archer_with_the_likelihood_critic_end_to_end_on_household(tiny_model_dir, tmp_path):
    cfg = _household_archer(tiny_model_dir, tmp_path, iterations=2, warmup_iterations=1, critic_updates=4,
                            minibatch_size=8, learning_rate=1e-3, critic_learning_rate=1e-4,
                            critic_head_learning_rate=1e-2, whiten_advantages=True)
    result = train_archer(cfg)
    first, second = result.iterations
    assert first["train"]["steps"] == 0 and second["train"]["steps"] > 0
    assert second["logprob_drift"] < 1e-3
    n, log = second["transitions"], second["train"]["log"]  # minibatches of 8 in order, the last one smaller
    sizes = [min(8, n - i) for i in range(0, n, 8)]
    assert len(log) == len(sizes) and abs(sum(k * x["advantage"] for k, x in zip(sizes, log, strict=True))) < 1e-4
    back = LikelihoodCritic.build(result.critic_dir)
    assert back.beta == 2.0 and back.q_bias.tolist() != [-1.0, -1.0]  # trained from the PRM's bias
    groups = critic_parameter_groups(cfg, back)
    assert [g.get("lr") for g in groups] == [None, 1e-2] and len(groups[1]["params"]) == 3  # b, w, c
    with pytest.raises(ValueError, match="critic_head_learning_rate is for critic_kind: likelihood"):
        ArCHerConfig(**{**cfg.model_dump(), "critic_kind": "head"})


def test_expected_baseline_is_the_policys_average_of_q_over_the_admissible_actions(tiny_model_dir, tmp_path):
    """The shared-prefix V^π(s) equals Σ_a softmax(ℓ_π)(a)·min Q(s, a) computed row by row with full passes."""
    from proctor.agents.choice import ChoiceAgent
    from proctor.prompts import PromptConfig, prefix_at
    from proctor.rl.expected_baseline import expected_baselines
    from proctor.rl.replay import transitions
    from proctor.rollout import RolloutConfig, run_rollout

    prompt = PromptConfig.model_validate(PROMPT)
    run_rollout(RolloutConfig(env="household", env_kwargs={"preset": "small", "max_steps": 3}, tasks=2,
                              agent={"kind": "choice", "model": str(tiny_model_dir), "temperature": 1.0,
                                     "prompt": PROMPT}, out=tmp_path / "roll", progress=False))
    from proctor.store import TrajectoryStore

    trajs = TrajectoryStore.open(tmp_path / "roll").load()
    policy, tok = load(tiny_model_dir)
    critic = LikelihoodCritic.build(_prm_folder(tiny_model_dir, tmp_path, beta=0.5, bias=2.0))
    with torch.no_grad():
        critic.q_bias.copy_(torch.tensor([2.0, 1.5]))  # min Q is head 2's
    rows = transitions(tok, trajs, prompt)
    got = expected_baselines(policy, critic, tok, trajs, rows, prompt, temperature=1.0, states_per_pass=2)
    replies = ChoiceAgent(policy, tok, prompt=prompt)
    by_id = {t.id: t for t in trajs}
    for row, v in zip(rows, got, strict=True):
        prefix = prefix_at(by_id[row.trajectory], row.step)
        pairs = [(row.prompt_ids, ids) for ids in replies.reply_ids(prefix, prefix.admissible_actions)]
        with torch.no_grad():
            ell = sequence_logprobs(*completion_logprobs(policy, pairs, tok.pad_token_id))
            q, _ = critic([p for p, _ in pairs], [a for _, a in pairs])
        assert q[:, 1].tolist() == pytest.approx(torch.sigmoid(0.5 * ell + 1.5).tolist(), rel=1e-5)
        assert v == pytest.approx(float((torch.softmax(ell, 0) * q[:, 1]).sum()), rel=1e-4)
    assert len(rows) == 6 and len(set(got)) > 1


def test_archer_with_the_expected_baseline_and_a_kl_penalty(tiny_model_dir, tmp_path):
    cfg = _household_archer(tiny_model_dir, tmp_path, iterations=2, warmup_iterations=1, critic_updates=2,
                            minibatch_size=4, learning_rate=1e-2, critic_learning_rate=1e-4, baseline="expected",
                            kl_coef=0.5)
    log = train_archer(cfg).iterations[1]["train"]["log"]
    assert log[0]["kl"] == pytest.approx(0.0, abs=1e-6)  # the first step starts at π₀ (the warm-up left it there)
    assert max(s["kl"] for s in log) > 1e-4  # then moves away, and pays for it
    with pytest.raises(ValueError, match="baseline: expected needs critic_kind: likelihood and agent kind choice"):
        ArCHerConfig(**{**cfg.model_dump(), "critic_kind": "head", "critic": None})
    with pytest.raises(ValueError, match="got likelihood and hf"):
        ArCHerConfig(**{**cfg.model_dump(), "agent": {"kind": "hf"}})


def test_archer_actor_with_ppo_clipping_starts_at_ratio_one_and_clips_once_it_moves(tiny_model_dir, tmp_path):
    cfg = _household_archer(tiny_model_dir, tmp_path, iterations=1, critic_updates=1, minibatch_size=4,
                            actor_epochs=3, learning_rate=5e-2, whiten_advantages=True, actor_loss="ppo-clip",
                            clip=0.1, gradient_checkpointing=True)  # the critic's and the actor's
    log = train_archer(cfg).iterations[0]["train"]["log"]
    assert log[0]["ratio"] == pytest.approx(1.0, abs=1e-5) and log[0]["clipfrac"] == 0.0
    assert max(s["clipfrac"] for s in log) > 0  # later steps leave the trust region and are clipped

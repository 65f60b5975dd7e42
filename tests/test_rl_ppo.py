"""Step-reward PPO (proctor.rl.ppo): token-level GAE across turns by hand, whitening, turn rewards, and an end-to-end
run on the built-in `shop` env with a tiny model."""

from __future__ import annotations

import pytest
import torch

from proctor.rl.advantages import whiten
from proctor.rl.ppo import PPOConfig, train_ppo, trajectory_gae
from proctor.rl.step_rows import StepRow


def _row(n_tokens: int, values: list[float]) -> StepRow:
    return StepRow(prompt_ids=[1, 2], completion_ids=[7] * n_tokens, old_values=values)


def test_trajectory_gae_hand_computed():
    # one trajectory, turn 0 = 2 tokens (reward 0 on its last token), turn 1 = 1 token (reward 1);
    # V = [0.1, 0.2 | 0.5], γ = λ = 1, terminated: A2 = 1 − 0.5 = 0.5, A1 = 0 + 0.5 − 0.2 + 0.5 = 0.8,
    # A0 = 0 + 0.2 − 0.1 + 0.8 = 0.9; returns = A + V = 1 everywhere
    rows = [[_row(2, [0.1, 0.2]), _row(1, [0.5])]]
    trajectory_gae(rows, [[0.0, 1.0]], [0.0], gamma=1.0, lam=1.0)
    assert rows[0][0].token_advantages == pytest.approx([0.9, 0.8])
    assert rows[0][1].token_advantages == pytest.approx([0.5])
    assert rows[0][0].returns + rows[0][1].returns == pytest.approx([1.0, 1.0, 1.0])
    # truncated with V(s_T) = 2 and γ = 0.5, λ = 1: δ2 = 1 + 0.5·2 − 0.5 = 1.5; δ1 = 0.5·0.5 − 0.2 = 0.05;
    # δ0 = 0.5·0.2 − 0.1 = 0; A2 = 1.5, A1 = 0.05 + 0.5·1.5 = 0.8, A0 = 0 + 0.5·0.8 = 0.4
    rows = [[_row(2, [0.1, 0.2]), _row(1, [0.5])], [_row(1, [0.3])]]
    trajectory_gae(rows, [[0.0, 1.0], [2.0]], [2.0, 0.0], gamma=0.5, lam=1.0)
    assert [a for r in rows[0] for a in r.token_advantages] == pytest.approx([0.4, 0.8, 1.5])
    assert rows[1][0].token_advantages == pytest.approx([2.0 - 0.3])  # the second trajectory: r − V
    with pytest.raises(ValueError, match="1 rows but 2 turn rewards"):
        trajectory_gae([[_row(1, [0.0])]], [[0.0, 1.0]], [0.0], 1.0, 1.0)


def test_whiten_hand_computed():
    # [1, 3, (masked 100)]: mean 2, population std 1 → [−1, 1, 0]
    out = whiten(torch.tensor([1.0, 3.0, 100.0]), torch.tensor([1, 1, 0]))
    assert out.tolist() == pytest.approx([-1.0, 1.0, 0.0], abs=1e-6)


def test_ppo_config_needs_a_prm_for_prm_rewards(tiny_model_dir, tmp_path):
    with pytest.raises(ValueError, match="reward 'prm' needs `prm`"):
        PPOConfig(policy=str(tiny_model_dir), output_dir=tmp_path, env="shop", reward="prm")


@pytest.mark.slow
def test_ppo_end_to_end_on_shop(tiny_model_dir, tmp_path):
    cfg = PPOConfig(policy=str(tiny_model_dir), output_dir=tmp_path / "run", env="shop", env_kwargs={"max_steps": 10},
                    tasks=2, rollouts_per_task=4, agent={"kind": "choice", "temperature": 100.0, "prompt": {"history": 1}},
                    reward="env", outcome="score", outcome_weight=0.0, ppo_epochs=3, minibatch_size=16,
                    learning_rate=1e-3, critic_learning_rate=3e-3, kl_coef=0.05, progress=False)
    result = train_ppo(cfg)
    m = result.iterations[0]
    assert m["steps"] > 0 and m["logprob_drift"] < 1e-3
    log = m["train"]["log"]
    assert log[0]["ratio"] == pytest.approx(1.0, abs=1e-5)
    first_epoch = [s["value_loss"] for s in log if s["epoch"] == 0]
    last_epoch = [s["value_loss"] for s in log if s["epoch"] == cfg.ppo_epochs - 1]
    assert sum(last_epoch) / len(last_epoch) < sum(first_epoch) / len(first_epoch)  # the critic fits the returns
    assert (result.policy_dir / "model.safetensors").is_file()
    assert (result.critic_dir / "prm_config.json").is_file()


def small(policy, out, **kw) -> PPOConfig:
    """A small PPO run: 1 task × 2 rollouts, one optimizer step per model (1 epoch, one minibatch)."""
    base = {"policy": str(policy), "output_dir": out, "env": "shop", "env_kwargs": {"max_steps": 4}, "tasks": 1,
            "rollouts_per_task": 2, "ppo_epochs": 1, "minibatch_size": 1024, "device": "cpu", "progress": False,
            "agent": {"kind": "choice", "temperature": 100.0, "prompt": {"history": 1}}}
    return PPOConfig.model_validate({**base, **kw})


def test_one_step_from_a_bf16_checkpoint_moves_the_weights(bf16_model_dir, tmp_path, monkeypatch):
    """Defaults (lr 1e-6, kl_coef 0: no reference is loaded): the policy trains in float32."""
    from moved_weights import moved_fraction
    from proctor.rl import ppo

    monkeypatch.setattr(ppo, "KLReference", None)
    result = train_ppo(small(bf16_model_dir, tmp_path / "run"))
    assert result.iterations[0]["train"]["steps"] == 1
    assert moved_fraction(bf16_model_dir, result.policy_dir) >= 0.9


def test_gradient_checkpointing_recomputes_the_layers_and_trains_the_same_curve(tiny_model_dir, tmp_path):
    """With checkpointing each training forward of the policy's and the critic's layers runs again in the backward
    pass (their MLPs' forward calls grow by exactly the training ones), and the policy's and the critic's curves
    over several optimizer steps are the ones without it."""
    from layer_calls import forward_calls

    runs = {}
    for ckpt in (False, True):
        with forward_calls() as calls:
            result = train_ppo(small(tiny_model_dir, tmp_path / f"ckpt-{ckpt}", gradient_checkpointing=ckpt,
                                     learning_rate=1e-3, ppo_epochs=2, minibatch_size=2))
        runs[ckpt] = calls, result.iterations[0]["train"]["log"]
    (plain, plain_log), (ckpt, ckpt_log) = runs[False], runs[True]
    assert plain.with_grad > 0 and ckpt.total - plain.total == plain.with_grad  # every one recomputed, once
    assert len(plain_log) >= 3
    for key in ("loss", "value_loss"):
        assert [s[key] for s in ckpt_log] == pytest.approx([s[key] for s in plain_log], abs=1e-5), key


def test_lora_kl_reference_is_the_adapter_disabled_starting_policy(tiny_model_dir, tmp_path):
    result = train_ppo(small(tiny_model_dir, tmp_path / "run", lora={"r": 4, "target_modules": "all-linear"},
                             kl_coef=0.1, iterations=2, learning_rate=1e-2))
    first, second = (it["train"]["log"][0] for it in result.iterations)
    assert first["kl"] == pytest.approx(0.0, abs=1e-9)
    assert second["kl"] > 1e-9

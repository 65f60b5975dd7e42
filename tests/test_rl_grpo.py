"""GRPO / GiGPO over multi-turn trajectories (proctor.rl.grpo), end to end on the built-in `shop` env with a tiny
model and the constrained-choice policy: samples carry the generated ids, the first ratio is 1, and actions with
a positive advantage become more likely relative to those with a negative one."""

from __future__ import annotations

import pytest
import torch

from proctor.models import load
from proctor.models.sequences import completion_logprobs, sequence_logprobs
from proctor.rl.grpo import GRPOConfig, step_samples, train_grpo
from proctor.store import TrajectoryStore


def _logps(folder, samples) -> torch.Tensor:
    model, tok = load(folder)
    with torch.no_grad():
        lp, m = completion_logprobs(model, [(s.prompt_ids, s.completion_ids) for s in samples], tok.pad_token_id)
    return sequence_logprobs(lp, m)


#: the constrained-choice policy, hot enough to explore (the untrained model's likelihoods strongly prefer short
#: actions), and a one-step history to keep shop's long pages short
AGENT = {"kind": "choice", "temperature": 100.0, "prompt": {"history": 1}}


@pytest.mark.slow
@pytest.mark.parametrize("advantage", ["grpo", "gigpo"])
def test_grpo_end_to_end_on_shop(tiny_model_dir, tmp_path, advantage):
    cfg = GRPOConfig(policy=str(tiny_model_dir), output_dir=tmp_path / "run", env="shop", env_kwargs={"max_steps": 10},
                     tasks=2, group_size=4, agent=AGENT, advantage=advantage, outcome="score",
                     ppo_epochs=1, minibatch_size=16, learning_rate=1e-3, kl_coef=0.05, progress=False)
    result = train_grpo(cfg)
    m = result.iterations[0]
    assert m["rollouts"] == 8 and m["samples"] > 0 and m["groups_with_signal"] >= 1
    assert m["logprob_drift"] is not None and m["logprob_drift"] < 1e-3  # trained on the ids that were sampled
    first = m["train"]["log"][0]
    assert first["ratio"] == pytest.approx(1.0, abs=1e-5) and first["clipfrac"] == 0.0
    assert (result.policy_dir / "model.safetensors").is_file()
    # the samples it trained on, rebuilt from the stored rollouts
    trajs = TrajectoryStore.open(tmp_path / "run/iter-1/rollouts").load()
    _, tok = load(tiny_model_dir)
    samples, _ = step_samples(cfg, trajs, tok)
    assert len(samples) == m["samples"]
    gain = _logps(result.policy_dir, samples) - _logps(tiny_model_dir, samples)
    adv = torch.tensor([s.advantage for s in samples])
    # Σ A·Δlog π > 0: the update moved probability toward positive-advantage actions
    assert float((adv * gain).sum()) > 0
    assert float(gain[adv > 0].mean()) > float(gain[adv < 0].mean())


def test_grpo_needs_the_policys_token_ids(tiny_model_dir, tmp_path):
    from proctor.rollout import RolloutConfig, run_rollout

    store = run_rollout(RolloutConfig(env="shop", agent={"kind": "random"}, out=tmp_path / "r", split="train",
                                      tasks=1, samples=2, progress=False)).store
    cfg = GRPOConfig(policy=str(tiny_model_dir), output_dir=tmp_path / "run", env="shop", outcome="score")
    _, tok = load(tiny_model_dir)
    trajs = store.load()
    trajs[0].score, trajs[1].score = 0.2, 0.7  # a group with signal
    with pytest.raises(ValueError, match="no token_ids; policy-gradient training needs the ids"):
        step_samples(cfg, trajs, tok)


def test_fresh_tasks_take_the_next_window_of_the_split_each_iteration(tiny_model_dir, tmp_path):
    from proctor.envs.registry import EnvSpec
    from proctor.rl.on_policy import iteration_tasks
    from proctor.rollout import select_tasks

    ids = select_tasks(EnvSpec("shop", {}), "test", None)
    n = len(ids) // 2 + 1  # the second window wraps round the split
    cfg = GRPOConfig(policy=str(tiny_model_dir), output_dir=tmp_path / "run", env="shop", split="test", tasks=n,
                     fresh_tasks=True)
    assert iteration_tasks(cfg, 1) == ids[:n]
    assert iteration_tasks(cfg, 2) == ids[n:] + ids[: 2 * n - len(ids)]
    with pytest.raises(ValueError, match="fresh_tasks needs `tasks` as a number"):
        GRPOConfig(policy=str(tiny_model_dir), output_dir=tmp_path / "run", env="shop", fresh_tasks=True)


def small(policy, out, **kw) -> GRPOConfig:
    """A small GRPO run: 2 tasks × 4 rollouts (a group with signal), one optimizer step (1 epoch, one minibatch)."""
    base = {"policy": str(policy), "output_dir": out, "env": "shop", "env_kwargs": {"max_steps": 10}, "tasks": 2,
            "group_size": 4, "minibatch_size": 1024, "agent": AGENT, "outcome": "score", "device": "cpu", "progress": False}
    return GRPOConfig.model_validate({**base, **kw})


def test_one_step_from_a_bf16_checkpoint_moves_the_weights(bf16_model_dir, tmp_path, monkeypatch):
    """Defaults (lr 1e-6, kl_coef 0: no reference is loaded): the weights train in float32."""
    from moved_weights import moved_fraction
    from proctor.rl import grpo

    monkeypatch.setattr(grpo, "KLReference", None)  # kl_coef 0 must not build a reference
    result = train_grpo(small(bf16_model_dir, tmp_path / "run"))
    assert result.iterations[0]["train"]["steps"] == 1
    assert moved_fraction(bf16_model_dir, result.policy_dir) >= 0.9


def test_gradient_checkpointing_recomputes_the_layers_and_trains_the_same_curve(tiny_model_dir, tmp_path):
    """With checkpointing each training forward of the policy's layers runs again in the backward pass (their MLPs'
    forward calls grow by exactly the training ones: the rollouts and the old log-probs are the same), and the
    curve over several optimizer steps is the one without it."""
    from layer_calls import forward_calls

    runs = {}
    for ckpt in (False, True):
        with forward_calls() as calls:
            result = train_grpo(small(tiny_model_dir, tmp_path / f"ckpt-{ckpt}", gradient_checkpointing=ckpt,
                                      learning_rate=1e-3, ppo_epochs=2, minibatch_size=4))
        runs[ckpt] = calls, result.iterations[0]["train"]["log"]
    (plain, plain_log), (ckpt, ckpt_log) = runs[False], runs[True]
    assert plain.with_grad > 0 and ckpt.total - plain.total == plain.with_grad  # every one recomputed, once
    assert len(plain_log) >= 3 and ckpt_log[0]["ratio"] == pytest.approx(1.0, abs=1e-5)
    for key in ("loss", "ratio", "clipfrac"):
        assert [s[key] for s in ckpt_log] == pytest.approx([s[key] for s in plain_log], abs=1e-5), key


def test_lora_kl_reference_is_the_adapter_disabled_starting_policy(tiny_model_dir, tmp_path):
    """Iteration 1 starts at the reference (LoRA's B = 0): KL 0; iteration 2 starts from the trained adapters
    while the reference stays the base model: KL > 0."""
    result = train_grpo(small(tiny_model_dir, tmp_path / "run", lora={"r": 4, "target_modules": "all-linear"},
                              kl_coef=0.1, iterations=2, learning_rate=1e-2))
    first, second = (it["train"]["log"][0] for it in result.iterations)
    assert first["kl"] == pytest.approx(0.0, abs=1e-9)
    assert second["kl"] > 1e-9

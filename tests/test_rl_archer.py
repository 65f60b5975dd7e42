"""ArCHer (proctor.rl.archer) and its parts: the columnar replay buffer, the utterance-level critic (its loss falls
on a fixed batch; a truncated step bootstraps, a terminated one does not), and an end-to-end run on
`twenty_questions` with a tiny model."""

from __future__ import annotations

import json

import pytest
import torch

from proctor.models import load
from proctor.rl.archer import ArCHerConfig, train_archer
from proctor.rl.critic import UtteranceCritic, critic_loss
from proctor.rl.replay import ReplayBuffer, ReplayTransition, transitions
from proctor.rl.td import polyak_update
from proctor.training.policy import frozen_copy

#: the tiny model generating free-text questions: short replies, a 3-turn limit (losing episodes truncate)
AGENT = {"kind": "hf", "temperature": 1.0, "max_new_tokens": 8, "prompt": {"history": 1}}


def _t(i: int, reward: float = -1.0, terminated: bool = False) -> ReplayTransition:
    return ReplayTransition([1, 2, i], [5, i], [-0.5, -0.25], reward, terminated, not terminated, [1, 2, i, 3])


def test_replay_buffer_ring_sample_and_parquet_round_trip(tmp_path):
    buf = ReplayBuffer(3)
    assert buf.add([_t(i) for i in range(4)]) == [0, 1, 2, 0]  # the 4th overwrites the oldest
    assert [t.prompt_ids[-1] for t in buf.take(range(3))] == [3, 1, 2]
    a = buf.sample(5, torch.Generator().manual_seed(7))
    b = buf.sample(5, torch.Generator().manual_seed(7))
    assert a == b and len(a) == 5
    path = buf.save(tmp_path / "replay.parquet")
    back = ReplayBuffer.load(path)
    assert back.capacity == 3 and back.position == 1 and back.take(range(3)) == buf.take(range(3))
    assert back.add([_t(9)]) == [1]
    import pyarrow.parquet as pq

    pq.write_table(pq.read_table(path).drop_columns(["reward"]), tmp_path / "bad.parquet")
    with pytest.raises(ValueError, match="not a replay buffer"):
        ReplayBuffer.load(tmp_path / "bad.parquet")
    with pytest.raises(ValueError, match="empty replay buffer"):
        ReplayBuffer(2).sample(1, torch.Generator())


def td_losses(critic, target, batch, steps: int = 25, tau: float | None = None) -> list[float]:
    """The TD loss over `steps` AdamW steps (lr 3e-3) on one fixed batch; the target follows by Polyak at rate
    `tau` (None: it stays fixed)."""
    opt = torch.optim.AdamW(critic.parameters(), lr=3e-3)
    losses = []
    for _ in range(steps):
        loss, _ = critic_loss(critic, target, batch, gamma=0.9)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if tau is not None:
            polyak_update(target.parameters(), critic.parameters(), tau)
        losses.append(loss.item())
    return losses


def test_critic_loss_decreases_on_a_fixed_batch(tiny_model_dir):
    torch.manual_seed(0)
    critic = UtteranceCritic.build(tiny_model_dir)
    batch = [_t(i, reward=-1.0 if i % 2 else 0.0, terminated=i % 3 == 0) for i in range(8)]
    losses = td_losses(critic, frozen_copy(critic), batch, tau=0.1)
    assert losses[-1] < 0.5 * losses[0]


def test_truncated_step_bootstraps_and_terminated_does_not(tiny_model_dir):
    torch.manual_seed(0)
    critic = UtteranceCritic.build(tiny_model_dir)
    target = frozen_copy(critic)
    truncated, terminated = _t(1, reward=-1.0, terminated=False), _t(1, reward=-1.0, terminated=True)
    with torch.no_grad():
        next_v = target.state_values([truncated.next_prompt_ids])[0]
        q, _ = critic([truncated.prompt_ids], [truncated.action_ids])
    assert float(next_v.min()) != 0.0
    # the Q loss of each head is (Q_i − y)²: y = −1 + 0.9·min V̄(s') when truncated, −1 when terminated
    _, stats = critic_loss(critic, target, [truncated], gamma=0.9)
    y = -1.0 + 0.9 * float(next_v.min())
    assert stats["q_loss"] == pytest.approx(float(((q[0] - y) ** 2).sum()), rel=1e-5)
    _, stats = critic_loss(critic, target, [terminated], gamma=0.9)
    assert stats["q_loss"] == pytest.approx(float(((q[0] + 1.0) ** 2).sum()), rel=1e-5)


def test_archer_end_to_end_on_twenty_questions(tiny_model_dir, tmp_path):
    cfg = ArCHerConfig(policy=str(tiny_model_dir), output_dir=tmp_path / "run", env="twenty_questions",
                       env_kwargs={"max_steps": 3}, tasks=2, rollouts_per_task=2, agent=AGENT, iterations=2,
                       warmup_iterations=1, critic_updates=4, critic_batch_size=4, minibatch_size=8,
                       learning_rate=1e-3, critic_learning_rate=1e-3, progress=False)
    result = train_archer(cfg)
    first, second = result.iterations
    assert first["train"]["steps"] == 0 and first["logprob_drift"] is None  # critic-only warm-up
    assert not (tmp_path / "run/iter-1/policy").exists()
    assert second["train"]["steps"] > 0 and second["logprob_drift"] < 1e-3  # trained on the ids it sampled
    assert first["critic"]["steps"] == second["critic"]["steps"] == 4
    assert second["buffer"] == first["transitions"] + second["transitions"]
    assert -3.0 <= second["mean_return"] <= 0.0
    assert result.policy_dir == tmp_path / "run/iter-2/policy"
    assert (result.policy_dir / "model.safetensors").is_file()
    assert UtteranceCritic.build(result.critic_dir).model.config.num_labels == 4
    assert len(ReplayBuffer.load(tmp_path / "run/replay.parquet")) == second["buffer"]
    assert json.loads((tmp_path / "run/iter-2/metrics.json").read_text())["iteration"] == 2
    # the buffer's transitions are the rollouts' steps: generated ids, truncation flags, next states
    from proctor.store import TrajectoryStore

    trajs = TrajectoryStore.open(tmp_path / "run/iter-1/rollouts").load()
    _, tok = load(tiny_model_dir)
    rows = transitions(tok, trajs, cfg.prompt)
    assert [r.action_ids for r in rows] == [s.token_ids for t in trajs for s in t.steps]
    last = [r for r in rows if r.step == 2]
    assert last and all(r.truncated and not r.terminated for r in last if r.reward == -1.0)


def _one_step(policy, tmp_path, **fields) -> ArCHerConfig:
    """ArCHer at its defaults (learning rate 1e-6) on one 2-step `twenty_questions` episode: one actor step."""
    return ArCHerConfig(policy=str(policy), output_dir=tmp_path / "run", env="twenty_questions",
                        env_kwargs={"max_steps": 2}, tasks=1, agent=AGENT, progress=False, **fields)


def test_one_actor_step_from_a_bf16_checkpoint_moves_the_weights(bf16_model_dir, tmp_path):
    """The weights train in float32: one AdamW step at lr 1e-6 moves (nearly) all of them."""
    from moved_weights import moved_fraction

    result = train_archer(_one_step(bf16_model_dir, tmp_path, critic_updates=0))
    assert result.iterations[0]["train"]["steps"] == 1 and result.iterations[0]["critic"]["steps"] == 0
    assert moved_fraction(bf16_model_dir, result.policy_dir) >= 0.9


def test_gradient_checkpointing_trains_the_actor_and_the_critic(tiny_model_dir, tmp_path):
    """(The likelihood critic's: `test_rl_likelihood_critic`.)"""
    result = train_archer(_one_step(tiny_model_dir, tmp_path, critic_updates=2, critic_batch_size=2,
                                    gradient_checkpointing=True))
    m = result.iterations[0]
    assert m["train"]["steps"] == 1 and m["critic"]["steps"] == 2
    assert all(torch.isfinite(torch.tensor(s["loss"])) for s in m["critic"]["log"] + m["train"]["log"])

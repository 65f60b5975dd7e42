"""Online CHAI (proctor.rl.chai: the critic picks among K policy samples) and online filtered BC
(proctor.rl.filtered_bc: SFT on the generated ids of the best trajectories), and `proctor train archer|chai|fbc`."""

from __future__ import annotations

import json

import pytest
import torch
import yaml
from typer.testing import CliRunner

from proctor.agents.base import Agent, Candidate, Prefix
from proctor.cli import app
from proctor.models import load
from proctor.models.sequences import completion_logprobs, sequence_logprobs
from proctor.rl.chai import CHAIConfig, train_chai
from proctor.rl.critic import CriticChoiceAgent
from proctor.rl.filtered_bc import FilteredBCConfig, clone_example, train_filtered_bc
from proctor.store import TrajectoryStore

AGENT = {"kind": "hf", "temperature": 1.0, "max_new_tokens": 8, "prompt": {"history": 1}}
runner = CliRunner()


class _Fixed(Agent):
    name = "fixed"

    def act(self, prefixes, n=1):
        return [[Candidate(f"a{i}", token_ids=[10 + i], logprobs=[-float(i)]) for i in range(n)] for _ in prefixes]


class _Critic:
    """Q = (id − 10) · (1, 2) for the action's one token: a2 > a1 > a0."""

    def __call__(self, prompts, actions):
        q = torch.tensor([[a[0] - 10.0, 2 * (a[0] - 10.0)] for a in actions])
        return q, torch.zeros_like(q)


def test_critic_choice_agent_takes_the_best_q(tiny_model_dir):
    _, tok = load(tiny_model_dir)
    prefix = Prefix("twenty_questions", "t", "task", "obs")
    agent = CriticChoiceAgent(_Fixed(), _Critic(), tok, None, k=3)
    [[best]] = agent.act([prefix])
    assert best.action == "a2" and best.meta["critic_q"] == 2.0
    assert [c.action for c in agent.act([prefix], n=2)[0]] == ["a2", "a1"]
    # α = 1.5: Q + α·log π = [0, 1 − 1.5, 2 − 3] → a0
    assert CriticChoiceAgent(_Fixed(), _Critic(), tok, None, k=3, alpha=1.5).act([prefix])[0][0].action == "a0"


def test_chai_end_to_end_keeps_the_lm_frozen(tiny_model_dir, tmp_path):
    cfg = CHAIConfig(policy=str(tiny_model_dir), output_dir=tmp_path / "run", env="twenty_questions",
                     env_kwargs={"max_steps": 2}, tasks=2, agent=AGENT, candidates=2, critic_updates=3,
                     critic_batch_size=4, critic_learning_rate=1e-3, progress=False)
    result = train_chai(cfg)
    m = result.iterations[0]
    assert m["train"]["steps"] == 0 and m["critic"]["steps"] == 3
    assert str(result.policy_dir) == str(tiny_model_dir) and (result.critic_dir / "config.json").is_file()
    trajs = TrajectoryStore.open(tmp_path / "run/iter-1/rollouts").load()
    assert all(t.agent.startswith("chai(") for t in trajs)
    with pytest.raises(ValueError, match="candidates"):
        CHAIConfig(policy="x", output_dir=tmp_path, env="twenty_questions", candidates=1)


def test_filtered_bc_clones_the_best_trajectories(tiny_model_dir, tmp_path):
    cfg = FilteredBCConfig(policy=str(tiny_model_dir), output_dir=tmp_path / "run", env="twenty_questions",
                           env_kwargs={"max_steps": 2}, tasks=4, agent=AGENT, keep="top-fraction", keep_value=0.5,
                           returns="reward", epochs=3, batch_size=4, learning_rate=1e-3, progress=False)
    result = train_filtered_bc(cfg)
    m = result.iterations[0]
    assert 2 <= m["kept"] <= 4 and m["examples"] >= m["kept"] and m["train"]["steps"] > 0
    # the kept steps' generated ids became more likely
    _, tok = load(tiny_model_dir)
    trajs = TrajectoryStore.open(tmp_path / "run/iter-1/rollouts").load()
    examples = [clone_example(tok, t, i, cfg) for t in trajs for i in range(len(t.steps))]
    first = clone_example(tok, trajs[0], 0, cfg)  # the prompt's ids, then the generated ids, the loss on those
    n = len(trajs[0].steps[0].token_ids)
    assert first.ids[-n:] == trajs[0].steps[0].token_ids and first.mask == [0] * (len(first.ids) - n) + [1] * n

    def logp(folder):
        model, _ = load(folder)
        pairs = [(e.ids[:e.mask.index(1)], e.ids[e.mask.index(1):]) for e in examples]
        with torch.no_grad():
            return sequence_logprobs(*completion_logprobs(model, pairs, tok.pad_token_id)).mean()

    assert logp(result.policy_dir) > logp(tiny_model_dir)


def _small(config, policy, tmp_path, **fields):
    """A run on one 2-step `twenty_questions` episode (the defaults otherwise)."""
    return config(policy=str(policy), output_dir=tmp_path / "run", env="twenty_questions", env_kwargs={"max_steps": 2},
                  tasks=1, agent=AGENT, progress=False, **fields)


def test_one_critic_step_from_a_bf16_checkpoint_moves_the_critics_weights(bf16_model_dir, tmp_path):
    """CHAI trains only its critic, in float32: one AdamW step at lr 1e-6 moves its backbone's weights (the
    embedding rows of tokens absent from the batch get no gradient and are left out)."""
    from moved_weights import moved_fraction

    result = train_chai(_small(CHAIConfig, bf16_model_dir, tmp_path, candidates=2, critic_updates=1,
                               critic_batch_size=1, critic_learning_rate=1e-6))
    assert result.iterations[0]["critic"]["steps"] == 1
    assert moved_fraction(bf16_model_dir, result.critic_dir, skip=("embed_tokens",)) >= 0.9


def test_one_fbc_step_from_a_bf16_checkpoint_moves_the_weights(bf16_model_dir, tmp_path):
    from moved_weights import moved_fraction

    result = train_filtered_bc(_small(FilteredBCConfig, bf16_model_dir, tmp_path, keep="threshold",
                                      keep_value=-100.0))
    assert result.iterations[0]["train"]["steps"] == 1
    assert moved_fraction(bf16_model_dir, result.policy_dir) >= 0.9


def test_chai_and_fbc_train_with_gradient_checkpointing(tiny_model_dir, tmp_path):
    chai = train_chai(_small(CHAIConfig, tiny_model_dir, tmp_path / "chai", candidates=2, critic_updates=2,
                             critic_batch_size=2, gradient_checkpointing=True))
    fbc = train_filtered_bc(_small(FilteredBCConfig, tiny_model_dir, tmp_path / "fbc", keep="threshold",
                                   keep_value=-100.0, gradient_checkpointing=True))
    assert chai.iterations[0]["critic"]["steps"] == 2 and fbc.iterations[0]["train"]["steps"] == 1


def test_train_archer_chai_fbc_cli(tiny_model_dir, tmp_path):
    config = tmp_path / "archer.yaml"
    config.write_text(yaml.safe_dump({
        "policy": str(tiny_model_dir), "output_dir": str(tmp_path / "unused"), "env": "twenty_questions",
        "env_kwargs": {"max_steps": 2}, "tasks": 2, "agent": AGENT, "critic_updates": 2, "critic_batch_size": 2,
        "progress": False}))
    result = runner.invoke(app, ["train", "archer", str(config), "--output-dir", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert lines[0]["iteration"] == 1 and "log" not in lines[0]["critic"] and lines[0]["train"]["steps"] > 0
    assert lines[-1]["policy_dir"] == str(tmp_path / "run/iter-1/policy")
    for method, field, bad in (("archer", "tau", 2.0), ("chai", "candidates", 1), ("fbc", "keep", "best")):
        config.write_text(yaml.safe_dump({"policy": "x", "output_dir": "z", "env": "twenty_questions", field: bad}))
        result = runner.invoke(app, ["train", method, str(config)])
        assert result.exit_code == 2 and f"archer.yaml: field '{field}'" in result.output, (method, result.output)


def test_readme_archer_yaml_is_a_valid_config():
    from pathlib import Path

    from proctor.rl.archer import ArCHerConfig

    text = (Path(__file__).resolve().parents[1] / "examples" / "rl" / "archer.yaml").read_text()
    cfg = ArCHerConfig.model_validate(yaml.safe_load(text))
    assert cfg.agent.model == cfg.policy and cfg.warmup_iterations == 2


def test_readme_archer_q0_yaml_is_a_valid_config_with_the_measured_options():
    from pathlib import Path

    from proctor.rl.archer import ArCHerConfig

    text = (Path(__file__).resolve().parents[1] / "examples" / "rl" / "archer-q0.yaml").read_text()
    cfg = ArCHerConfig.model_validate(yaml.safe_load(text))
    assert (cfg.baseline, cfg.actor_loss, cfg.actor_epochs, cfg.critic_kind) == ("expected", "ppo-clip", 3, "likelihood")

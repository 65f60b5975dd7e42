"""Best-of-N distillation: the loss by hand, the targets are best-of-N's law of the proposer and the PRM, and a
run end to end moves a tiny student towards them; bad input is refused before any work."""

from __future__ import annotations

import json
import math

import pytest
import torch

from proctor.agents.choice import ChoiceAgent, choice_probabilities
from proctor.prm.ref import PRMRef
from proctor.prompts import PromptConfig, prefix_at
from proctor.rl.bon_distill import (
    BonDistillConfig,
    best_of_n_targets,
    choice_log_probs,
    soft_cross_entropy,
    train_bon_distill,
)
from proctor.stats import best_of_n_probabilities
from proctor.store import TrajectoryStore

PROMPT = PromptConfig(history=2, memory=True, show_admissible=False, system="")


def test_soft_cross_entropy_by_hand():
    # t = [0.25, 0.75], π = [0.5, 0.5]: −(0.25 + 0.75) ln 0.5 = ln 2
    assert float(soft_cross_entropy(torch.log(torch.tensor([0.5, 0.5])), torch.tensor([0.25, 0.75]))) == \
        pytest.approx(math.log(2))
    # a one-hot target: the negative log-probability of its action, −ln 0.2
    assert float(soft_cross_entropy(torch.log(torch.tensor([0.8, 0.2])), torch.tensor([0.0, 1.0]))) == \
        pytest.approx(-math.log(0.2))


@pytest.fixture(scope="module")
def setup(scalar_prm_dir, random_states_store):
    """(the folder holding the `states` store, the PRM)."""
    return random_states_store.parent, str(scalar_prm_dir)


def test_targets_are_best_of_n_of_the_proposer_and_the_prm(setup, tiny_model_dir):
    tmp, prm = setup
    agent, scorer = ChoiceAgent(tiny_model_dir, prompt=PROMPT), PRMRef(prm=prm).open()
    prefix = prefix_at(TrajectoryStore.open(tmp / "states").load()[0], 0)
    [target] = best_of_n_targets(agent, scorer, [prefix], 4, progress=False)
    [cands] = agent.score([prefix])
    p = choice_probabilities([c.meta["choice_logprob"] for c in cands], 1.0)
    assert target.probs == pytest.approx(best_of_n_probabilities(p, scorer.score_actions(prefix, [c.action for c in cands]), 4))
    assert target.replies == [list(c.token_ids) for c in cands]
    # the student's choice distribution is the agent's own
    with torch.no_grad():
        [logp] = choice_log_probs(agent.model, [target], agent.pad_id)
    assert logp.exp().tolist() == pytest.approx(p, abs=1e-5)


def test_end_to_end_the_student_moves_towards_the_targets(setup, tiny_model_dir, tmp_path):
    tmp, prm = setup
    cfg = BonDistillConfig(policy=str(tiny_model_dir), prm=prm, states_from=tmp / "states", output_dir=tmp_path / "d",
                           prompt=PROMPT, max_states=6, epochs=4, batch_size=3, learning_rate=1e-3, progress=False)
    policy_dir = train_bon_distill(cfg)
    assert (policy_dir / "model.safetensors").is_file()
    metrics = json.loads((tmp_path / "d" / "metrics.json").read_text())
    assert metrics["states"] == metrics["sampled_states"] == 6  # every household state lists several actions
    assert metrics["episodes"] == 3 and metrics["episodes_left_out"] == 0
    states = [prefix_at(t, i) for t in TrajectoryStore.open(tmp / "states").load() for i in range(len(t.steps))]
    targets = best_of_n_targets(ChoiceAgent(tiny_model_dir, prompt=PROMPT), PRMRef(prm=prm).open(), states, 8, False)

    def cross_entropy(path) -> float:
        with torch.no_grad():
            agent = ChoiceAgent(str(path), prompt=PROMPT)
            logps = choice_log_probs(agent.model, targets, agent.pad_id)
        return sum(float(soft_cross_entropy(lp, torch.tensor(t.probs))) for t, lp in zip(targets, logps, strict=True))

    assert cross_entropy(policy_dir) < cross_entropy(tiny_model_dir)
    with pytest.raises(FileExistsError, match="output_dir is not empty"):
        train_bon_distill(cfg)
    # a student from weights with another tokenizer: refused before any scoring
    other = ChoiceAgent(tiny_model_dir, prompt=PROMPT)
    other.tokenizer.add_tokens(["<another-token>"])
    other.model.save_pretrained(tmp_path / "other")
    other.tokenizer.save_pretrained(tmp_path / "other")
    with pytest.raises(ValueError, match="has another tokenizer than policy"):
        train_bon_distill(cfg.model_copy(update={"init": str(tmp_path / "other"), "output_dir": tmp_path / "e"}))

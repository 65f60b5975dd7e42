"""Online DPO against a PRM (proctor.rl.online_dpo) on a tiny model: pairs, exact token ids, the loss going
down, the chosen log-ratio going up, the PRM-preferred action becoming more likely, the reference being the
previous iterate, LoRA, and config errors."""

from __future__ import annotations

import json
import math

import pytest
import torch

from proctor.agents.base import Agent
from proctor.credit.preference import margin_pairs
from proctor.envs import make
from proctor.models import load
from proctor.models.sequences import completion_logprobs, sequence_logprobs
from proctor.prm.model import ProcessRewardModel
from proctor.prm.scoring import PRMScorer
from proctor.prompts import Candidate, Prefix, format_action, prefix_at
from proctor.rl.online_dpo import OnlineDPOConfig, collect_pairs, train_online_dpo
from proctor.rl.pairs import adjusted_scores, candidate_tokens, prompt_ids
from proctor.store import TrajectoryStore


def _config(tiny_model_dir, scalar_prm_dir, out, **kw) -> OnlineDPOConfig:
    base = {"policy": str(tiny_model_dir), "prm": scalar_prm_dir, "output_dir": out, "env": "household",
            "env_kwargs": {"max_steps": 3}, "tasks": 4, "agent": {"kind": "hf", "max_new_tokens": 8},
            "n_actions": 4, "epochs": 3, "batch_size": 4, "learning_rate": 1e-3, "beta": 0.1, "progress": False}
    return OnlineDPOConfig(**{**base, **kw})


def _household_prefix() -> Prefix:
    env = make("household")
    obs, info = env.reset(env.task_ids("train")[0], 0)
    return Prefix(env="household", task_id=env.task_ids("train")[0], task=info["task"], observation=obs,
                  info={"admissible_actions": info["admissible_actions"]})


def test_best_worst_pair_hand_cases():
    assert margin_pairs([0.2, 0.9, 0.1, 0.9], pairing="best-worst") == [(1, 2)]  # the first best, the last worst
    assert margin_pairs([0.5, 0.5, 0.5], pairing="best-worst") == []  # a tie
    assert margin_pairs([0.5, 0.6], 0.1, "best-worst") == []  # 0.1 is not more than the margin
    assert margin_pairs([0.3], pairing="best-worst") == []  # one candidate: nothing to prefer
    # an unfinished generation loses 0.5: adjusted [0.4, 0.5] → chosen 1, rejected 0
    assert margin_pairs(adjusted_scores([0.9, 0.5], [False, True], 0.5), pairing="best-worst") == [(1, 0)]
    with pytest.raises(ValueError, match="2 scores but 1 finished flags"):
        adjusted_scores([0.9, 0.5], [False])


def test_best_worst_best_rest_and_all_pairs_hand_cases():
    """Online DPO's pairings and AgentPRM's Monte-Carlo pairs (`all`) are one rule, `margin_pairs`."""
    scores = [0.2, 0.9, 0.1, 0.9, 0.85]
    assert margin_pairs(scores, pairing="best-worst") == [(1, 2)]
    # the first best (index 1) against every candidate below it; the tied 0.9 at index 3 is not below it
    assert margin_pairs(scores, pairing="best-rest") == [(1, 0), (1, 2), (1, 4)]
    # margin 0.1: 0.9 − 0.85 = 0.05 is a near-tie, left out
    assert margin_pairs(scores, 0.1, "best-rest") == [(1, 0), (1, 2)]
    # unfinished index 1 loses 0.5 (adjusted [0.2, 0.4, 0.1, 0.9, 0.85]): best is index 3
    assert margin_pairs(adjusted_scores(scores, [True, False, True, True, True], 0.5), pairing="best-rest") == [
        (3, 0), (3, 1), (3, 2), (3, 4)]
    assert margin_pairs([0.5, 0.5], pairing="best-rest") == []  # a tie gives no pair under either rule
    # `all`: every ordered pair more than 0.1 apart (0.2 − 0.1 is not more than 0.1)
    assert margin_pairs(scores, 0.1) == [(1, 0), (1, 2), (3, 0), (3, 2), (4, 0), (4, 2)]
    with pytest.raises(ValueError, match="unknown pairing 'every'"):
        margin_pairs(scores, pairing="every")


def test_candidate_tokens_exact_ids_or_the_renderers_reply(tiny_model_dir):
    _, tok = load(tiny_model_dir)
    prefix = _household_prefix()
    shared = prompt_ids(tok, prefix)
    exact = Candidate(action="look", token_ids=[7, 7, 7], meta={"prompt_tokens": len(shared)})
    assert candidate_tokens(tok, prefix, exact) == (shared, [7, 7, 7], True)
    # without token ids: the assistant turn of the chat template for the formatted action
    _, ids, is_exact = candidate_tokens(tok, prefix, Candidate(action="look"))
    assert not is_exact
    assert ids == tok(format_action("look") + "<|im_end|>\n", add_special_tokens=False)["input_ids"]
    with pytest.raises(ValueError, match="prompt config must be the one training uses"):
        candidate_tokens(tok, prefix, Candidate(action="look", token_ids=[1], meta={"prompt_tokens": 3}))


def _pair_logps(model, pairs, key):
    rows = [(p["prompt_ids"], p[key]) for p in pairs]
    with torch.no_grad():
        lp, m = completion_logprobs(model, rows, pad_id=0)
    return sequence_logprobs(lp, m)


def test_online_dpo_trains_toward_the_prms_choices(tiny_model_dir, scalar_prm_dir, tmp_path):
    cfg = _config(tiny_model_dir, scalar_prm_dir, tmp_path / "run")
    result = train_online_dpo(cfg)
    m = result.iterations[0]
    assert m["pairs"] >= 8 and m["states"] == 12  # 4 tasks × 3 steps, all states kept
    assert m["exact_token_fraction"] == 1.0  # every completion is the policy's own generated ids
    log = m["train"]["log"]
    assert log[0]["loss"] == pytest.approx(math.log(2), abs=1e-5)  # the policy starts as its reference
    last_epoch = [s for s in log if s["epoch"] == cfg.epochs - 1]
    assert sum(s["loss"] for s in last_epoch) / len(last_epoch) < 0.9 * math.log(2)
    assert last_epoch[-1]["chosen_logratio"] > 0 > last_epoch[-1]["rejected_logratio"]
    # the saved iterate, against the starting policy, on the pairs it trained on (their exact ids)
    assert (result.policy_dir / "model.safetensors").is_file()
    pairs = [json.loads(line) for line in (tmp_path / "run/iter-1/pairs.jsonl").read_text().splitlines()]
    assert all(p["scores"][0] > p["scores"][1] for p in pairs)
    # the prompts, rebuilt from the stored rollouts by the one renderer, are the ones trained on
    _, tok = load(tiny_model_dir)
    trajs = {(t.task_id, t.sample): t for t in TrajectoryStore.open(tmp_path / "run/iter-1/rollouts").load()}
    for p in pairs:
        p["prompt_ids"] = prompt_ids(tok, prefix_at(trajs[(p["task_id"], p["sample"])], p["step"]))
        assert len(p["prompt_ids"]) == p["prompt_tokens"]
    before, _ = load(tiny_model_dir)
    after, _ = load(result.policy_dir)
    gain_chosen = _pair_logps(after, pairs, "chosen_ids") - _pair_logps(before, pairs, "chosen_ids")
    gain_rejected = _pair_logps(after, pairs, "rejected_ids") - _pair_logps(before, pairs, "rejected_ids")
    assert float(gain_chosen.mean()) > 0  # the PRM-preferred action became more likely
    assert float((gain_chosen > gain_rejected).float().mean()) >= 0.8
    summary = json.loads((tmp_path / "run/summary.json").read_text())
    assert summary["policy_dir"] == str(result.policy_dir)
    assert summary["config"]["agent"]["max_new_tokens"] == 8  # the agent's own fields, not only its kind
    assert set(m["wall_s"]) == {"rollout", "pairs", "train", "save"}


def test_reference_is_the_previous_iterate_and_lora(tiny_model_dir, scalar_prm_dir, tmp_path):
    cfg = _config(tiny_model_dir, scalar_prm_dir, tmp_path / "run", iterations=2, epochs=2, loss="ipo", beta=0.5,
                  lora={"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"]}, learning_rate=5e-3)
    result = train_online_dpo(cfg)
    first, second = result.iterations
    # iteration 2 starts from iteration 1's weights and compares to them: log-ratios start at 0, IPO loss at
    # (0 − 1/(2β))² = 1
    assert second["train"]["log"][0]["chosen_logratio"] == pytest.approx(0.0, abs=1e-4)
    assert second["train"]["log"][0]["loss"] == pytest.approx(1.0, abs=1e-3)
    assert first["train"]["log"][-1]["margin"] > 0
    assert (tmp_path / "run/iter-2/rollouts").is_dir()  # iteration 2 rolled out the current policy
    folder = result.policy_dir
    assert (folder / "model.safetensors").is_file() and (folder / "adapter/adapter_model.safetensors").is_file()
    merged, _ = load(folder)  # the merged iterate loads as a plain model
    base, _ = load(tiny_model_dir)
    diff = [float((a - b).abs().max()) for (n, a), (_, b) in
            zip(merged.state_dict().items(), base.state_dict().items(), strict=True) if "q_proj" in n]
    assert max(diff) > 0


def test_config_errors(tiny_model_dir, scalar_prm_dir, tmp_path):
    with pytest.raises(ValueError, match="agent.model must be left out"):
        _config(tiny_model_dir, scalar_prm_dir, tmp_path / "a", agent={"kind": "hf", "model": "other"})
    with pytest.raises(ValueError, match="does not sample from a model"):
        _config(tiny_model_dir, scalar_prm_dir, tmp_path / "a", agent={"kind": "random"})
    with pytest.raises(ValueError, match="n_actions"):
        _config(tiny_model_dir, scalar_prm_dir, tmp_path / "a", n_actions=1)
    (tmp_path / "full").mkdir()
    (tmp_path / "full/x").write_text("")
    with pytest.raises(FileExistsError, match="output_dir is not empty"):
        train_online_dpo(_config(tiny_model_dir, scalar_prm_dir, tmp_path / "full"))


def test_online_dpo_with_the_choice_agent_raises_the_prms_choice(tiny_model_dir, scalar_prm_dir, tmp_path):
    """With the constrained-choice policy (admissible actions by likelihood), the probability the policy gives
    the PRM-preferred action at each trained state rises."""
    from proctor.agents.choice import ChoiceAgent

    cfg = _config(tiny_model_dir, scalar_prm_dir, tmp_path / "run", agent={"kind": "choice"}, n_actions=6, tasks=6,
                  epochs=4, learning_rate=2e-3)
    result = train_online_dpo(cfg)
    m = result.iterations[0]
    assert m["pairs"] >= 8 and m["exact_token_fraction"] == 1.0
    pairs = [json.loads(line) for line in (tmp_path / "run/iter-1/pairs.jsonl").read_text().splitlines()]
    trajs = {(t.task_id, t.sample): t for t in TrajectoryStore.open(tmp_path / "run/iter-1/rollouts").load()}
    states = [prefix_at(trajs[(p["task_id"], p["sample"])], p["step"]) for p in pairs]

    def prob_of_chosen(folder) -> list[float]:
        agent = ChoiceAgent(folder)
        out = []
        for p, options in zip(pairs, agent.score(states), strict=True):
            logits = torch.tensor([c.meta["choice_logprob"] for c in options])
            probs = torch.softmax(logits, 0)
            out.append(float(probs[[c.action for c in options].index(p["chosen"])]))
        return out

    before, after = prob_of_chosen(tiny_model_dir), prob_of_chosen(result.policy_dir)
    assert sum(after) / len(after) > sum(before) / len(before)
    assert sum(a > b for a, b in zip(after, before, strict=True)) >= 0.75 * len(pairs)


def test_states_from_a_stored_rollout_of_the_policy(tiny_model_dir, scalar_prm_dir, tmp_path):
    from proctor.rollout import RolloutConfig, run_rollout

    run_rollout(RolloutConfig(env="household", env_kwargs={"max_steps": 2}, out=tmp_path / "store", split="train",
                              tasks=3, agent={"kind": "choice", "model": str(tiny_model_dir)}, progress=False))
    cfg = _config(tiny_model_dir, scalar_prm_dir, tmp_path / "run", states_from=tmp_path / "store",
                  agent={"kind": "choice"}, epochs=1, max_states=4)
    m = train_online_dpo(cfg).iterations[0]
    assert m["states_from"] == str(tmp_path / "store") and m["states"] == 4
    assert not (tmp_path / "run/iter-1/rollouts").exists()


class Scripted(Agent):
    """Proposes the given draws at every state, in order."""

    name = "scripted"

    def __init__(self, draws: list[str]):
        self.draws = draws

    def act(self, prefixes, n=1):
        return [[Candidate(a, raw_output=a) for a in self.draws[:n]] for _ in prefixes]


def test_pairs_come_from_distinct_actions_and_one_repeated_action_is_a_tie(tiny_model_dir, scalar_prm_dir, tmp_path):
    cfg = _config(tiny_model_dir, scalar_prm_dir, tmp_path / "run", agent={"kind": "choice"})
    scorer = PRMScorer(ProcessRewardModel.from_pretrained(scalar_prm_dir))
    _, tok = load(tiny_model_dir)
    prefix = _household_prefix()
    a, b = prefix.admissible_actions[:2]
    pairs, counts = collect_pairs(cfg, [prefix], Scripted([a, a, a, a]), scorer, tok)
    assert pairs == [] and counts["ties"] == 1 and counts["candidates"] == 0
    pairs, counts = collect_pairs(cfg, [prefix, prefix], Scripted([a, a, b, a]), scorer, tok)
    assert counts["ties"] == 0 and counts["candidates"] == 4  # two distinct actions per state
    assert [{p.chosen, p.rejected} for p in pairs] == [{a, b}, {a, b}]


def test_best_rest_pairs_the_prms_best_action_with_every_other_distinct_action(tiny_model_dir, scalar_prm_dir, tmp_path):
    cfg = _config(tiny_model_dir, scalar_prm_dir, tmp_path / "run", agent={"kind": "choice"}, pairing="best-rest")
    scorer = PRMScorer(ProcessRewardModel.from_pretrained(scalar_prm_dir))
    _, tok = load(tiny_model_dir)
    prefix = _household_prefix()
    a, b, c = prefix.admissible_actions[:3]
    scores = dict(zip((a, b, c), scorer.score_actions(prefix, [a, b, c]), strict=True))
    assert len(set(scores.values())) == 3
    best = max(scores, key=scores.get)
    pairs, counts = collect_pairs(cfg, [prefix], Scripted([c, a, c, b]), scorer, tok)
    assert counts["candidates"] == 3 and counts["ties"] == 0
    assert [p.chosen for p in pairs] == [best, best]
    assert sorted(p.rejected for p in pairs) == sorted(x for x in (a, b, c) if x != best)
    assert all(p.scores == (scores[best], scores[p.rejected]) for p in pairs)
    assert len({id(p.prompt_ids) for p in pairs}) == 1  # the state's prompt is tokenized once

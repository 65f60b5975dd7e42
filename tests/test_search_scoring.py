"""`PRMScorer.score_action_groups` / `score_candidate_groups`: the candidates of many states scored in one
batched pass (each state's prefix once) equal each state scored alone and each full sequence scored alone."""

from __future__ import annotations

import pytest
import torch

from proctor.envs import make
from proctor.episode import Episode, WorkItem
from proctor.prm.model import ProcessRewardModel
from proctor.prm.scoring import PRMScorer, length_chunks
from proctor.prompts import Candidate


def household_states(n: int) -> list:
    """n states of different tasks at different depths (prefixes of different lengths)."""
    env = make("household")
    out = []
    for k, tid in enumerate(env.task_ids("test")[:n]):
        obs, info = env.reset(tid, k)
        ep = Episode.begin("household", WorkItem(tid, 0, k), obs, info)
        for t in range(k):
            a = info["admissible_actions"][(3 * t + k) % len(info["admissible_actions"])]
            ep.record(Candidate(a), env.step(a))
        out.append(ep.prefix())
    return out


@pytest.fixture(scope="module", params=["scalar", "classification", "reward_tokens"])
def scorer(request, tiny_model_dir):
    torch.manual_seed(0)
    return PRMScorer(ProcessRewardModel.build(tiny_model_dir, request.param, dtype="float32").eval(), batch_size=4)


def test_batched_across_states_equals_one_state_at_a_time(scorer):
    states = household_states(6)
    actions = [p.admissible_actions[: 1 + (i % 4)] for i, p in enumerate(states)]
    actions[2] = []                                    # a state with no candidate
    batched = scorer.score_action_groups(states, actions, states_per_pass=6)
    chunked = scorer.score_action_groups(states, actions)           # batch_size 4: two passes
    assert [len(r) for r in batched] == [len(a) for a in actions] == [len(r) for r in chunked]
    for p, a, got, got2 in zip(states, actions, batched, chunked, strict=True):
        alone = scorer.score_actions(p, a) if a else []
        assert got == pytest.approx(alone, abs=1e-4) and got2 == pytest.approx(alone, abs=1e-4)
    assert len({round(x, 6) for r in batched for x in r}) > 3      # the scores differ: a real comparison


@pytest.mark.parametrize("mode", ["eager", "cached"])
def test_every_attention_path_gives_the_same_scores(mode, tiny_model_dir, monkeypatch):
    """Packed rows under eager attention, and the KV-cache path used for kernels without custom masks, equal
    the packed sdpa path (the default)."""
    torch.manual_seed(0)
    scorer = PRMScorer(ProcessRewardModel.build(tiny_model_dir, "scalar", dtype="float32").eval(), batch_size=3)
    states = household_states(5)
    actions = [p.admissible_actions[: 2 + i] for i, p in enumerate(states)]
    assert scorer.packable
    reference = scorer.score_action_groups(states, actions)
    if mode == "eager":
        scorer.prm.hf_model.set_attn_implementation("eager")
        assert scorer.packable
    else:
        monkeypatch.setattr(PRMScorer, "packable", property(lambda self: False))
    got = scorer.score_action_groups(states, actions)
    for a, b in zip(got, reference, strict=True):
        assert a == pytest.approx(b, abs=1e-4)


def test_groups_equal_full_sequences_scored_alone(scorer):
    tok = scorer.tokenizer
    marker = tok.convert_tokens_to_ids(scorer.marker)
    prefixes = [[tok.bos_token_id] + tok(t, add_special_tokens=False)["input_ids"]
                for t in ("Task: find the key. go north<|step|>You see", "Task: open the door. The door is")]
    suffixes = [[tok(s, add_special_tokens=False)["input_ids"] for s in (" a drawer. open it<|step|>", " x<|step|>")],
                [tok(s, add_special_tokens=False)["input_ids"]
                 for s in (" locked. look<|step|>", " shut.<|step|> knock<|step|>", " red<|step|>")]]
    got = scorer.score_candidate_groups(prefixes, suffixes)
    for p, group, row in zip(prefixes, suffixes, got, strict=True):
        full = scorer.score_features([{"input_ids": p + s, "step_mask": [0] * len(p) + [int(t == marker) for t in s],
                                       "labels": [-100] * (len(p) + len(s))} for s in group])
        assert [len(r) for r in row] == [len(r) for r in full]
        for a, b in zip(row, full, strict=True):
            assert a == pytest.approx(b, abs=1e-4)
    assert [len(r) for r in got[1]] == [1, 2, 1]       # a suffix with two step ends gives two scores


def test_length_chunks_by_hand():
    # longest first: 100, 95, 90 (3 rows x 100 = 300 <= 1.25 x 285), then 50, 48 (100 <= 1.25 x 98; adding 12
    # would pad 3 x 50 = 150 > 1.25 x 110), then 12, 10 (24 <= 1.25 x 22)
    assert length_chunks([10, 100, 95, 50, 48, 90, 12], 3) == [[1, 2, 5], [3, 4], [6, 0]]
    assert length_chunks([10, 100], 8) == [[1], [0]]          # 2 x 100 > 1.25 x 110: too much padding
    assert length_chunks([], 4) == []


def test_bad_input_is_one_clear_error(scorer):
    with pytest.raises(ValueError, match="2 prefixes but 1 candidate lists"):
        scorer.score_candidate_groups([[1], [2]], [[[3]]])
    with pytest.raises(ValueError, match="at least one token"):
        scorer.score_candidate_groups([[1]], [[[]]])
    with pytest.raises(ValueError, match="1 states but 2 action lists"):
        scorer.score_action_groups(household_states(1), [["look"], ["look"]])

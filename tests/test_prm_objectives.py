"""proctor.prm.objectives against hand-computed numbers, on padded and on packed batches, and the data of the
pairwise / progress / value / inverse-PRM objectives built from credit records (proctor.prm.records)."""

from __future__ import annotations

import math

import pytest
import torch

from credit_fixtures import traj
from proctor.credit import Sources, run_method
from proctor.credit.inverse import InverseConfig, inverse_transitions
from proctor.prm.data import DataError, StepwiseExample
from proctor.prm.model import ProcessRewardModel
from proctor.prm.objectives import OBJECTIVES, pair_loss, progress_loss, transition_loss
from proctor.prm.records import PairExample, examples_from_records, read_pairs
from proctor.prm.rendering import render_states
from proctor.prm.tokenize import PRMCollator, collate, pack, pack_rows
from proctor.prm.trainer import prm_loss

X = -100


def feature(labels: list[float], steps: list[int], outcome: float | None = None) -> dict:
    f = {"input_ids": list(range(5, 5 + len(labels))), "labels": labels, "step_mask": steps}
    if outcome is not None:
        f["outcome"] = outcome
    return f


def place(batch: dict, values: list[list[float]]) -> torch.Tensor:
    """Per-token logits: feature i's values at its tokens (wherever collate/pack put them), 0 on padding."""
    logits = torch.zeros(batch["input_ids"].shape)
    for i, v in enumerate(values):
        logits[batch["sequence_ids"] == i] = torch.tensor(v)
    return logits


def batches(features: list[dict], width: int) -> list[dict]:
    return [collate(features, 0), pack(features, 0, width)]


def softplus(x: float) -> float:
    return math.log1p(math.exp(x))


@pytest.mark.parametrize("which", [0, 1], ids=["padded", "packed"])
def test_bradley_terry_on_pairs(which):
    feats = [
        feature([X, X, 1], [0, 0, 1]),  # chosen 0
        feature([X, 0], [0, 1]),  # rejected 0
        feature([X, 1], [0, 1]),  # chosen 1
        feature([X, X, 0], [1, 0, 1]),  # rejected 1 (its first step is scored, not compared)
    ]
    batch = batches(feats, 5)[which]
    logits = place(batch, [[7, 7, 1.0], [7, 0.0], [7, 0.0], [5, 7, 0.0]])
    # −ln σ(1 − 0) = softplus(−1), −ln σ(0 − 0) = ln 2
    expected = (softplus(-1) + math.log(2)) / 2
    assert pair_loss(logits, batch).item() == pytest.approx(expected, abs=1e-6)
    assert prm_loss("bradley_terry", logits, batch).item() == pytest.approx(expected, abs=1e-6)


def test_bradley_terry_rejects_unpaired_batches():
    batch = collate([feature([X, 1], [0, 1]), feature([X, 1], [0, 1])], 0)
    with pytest.raises(ValueError, match="chosen = 1, rejected = 0"):
        pair_loss(torch.zeros(2, 2), batch)
    batch = collate([feature([1, 1], [1, 1]), feature([X, 0], [0, 1])], 0)
    with pytest.raises(ValueError, match="2 examples and 3 labelled steps"):
        pair_loss(torch.zeros(2, 2), batch)


@pytest.mark.parametrize("which", [0, 1], ids=["padded", "packed"])
def test_progress_sum_per_example(which):
    feats = [feature([X, X, X], [1, 0, 1], outcome=1.0), feature([X, X], [1, 0], outcome=0.0)]
    batch = batches(feats, 5)[which]
    logits = place(batch, [[0.2, 9.0, 0.3], [0.5, 7.0]])
    # sums 0.5 and 0.5 against outcomes 1 and 0: ((−0.5)² + 0.5²) / 2
    assert progress_loss(logits, batch).item() == pytest.approx(0.25, abs=1e-6)
    assert prm_loss("progress_sum", logits, batch).item() == pytest.approx(0.25, abs=1e-6)


@pytest.mark.parametrize("which", [0, 1], ids=["padded", "packed"])
def test_td_difference_reads_next_step_and_terminal(which):
    feats = [feature([X, 1, X, X, 0], [0, 1, 1, 0, 1]), feature([X, 1], [0, 1])]
    batch = batches(feats, 7)[which]
    logits = place(batch, [[9, 2.0, 1.0, 9, 3.0], [9, -1.0]])
    # γ = 0.5: step 0 of A: r̂ = 2 − 0.5·1 = 1.5 (label 1); last step of A: terminal r̂ = 3 (label 0);
    # B: terminal r̂ = −1 (label 1) — packed right after A, it must not become A's next step
    expected = (softplus(-1.5) + softplus(3.0) + softplus(1.0)) / 3
    assert transition_loss(logits, batch, 0.5).item() == pytest.approx(expected, abs=1e-6)
    assert prm_loss("td_bce", logits, batch, gamma=0.5).item() == pytest.approx(expected, abs=1e-6)


def test_pointwise_objectives_gather_labelled_steps():
    batch = collate([feature([X, 0.5, X], [0, 1, 0]), feature([X, X, 1.0], [1, 0, 1])], 0)
    logits = torch.tensor([[9.0, 0.0, 9.0], [9.0, 9.0, math.log(3)]])
    assert prm_loss("bce", logits, batch).item() == pytest.approx(
        (math.log(2) - math.log(0.75)) / 2, abs=1e-6
    )
    assert prm_loss("mse", logits, batch).item() == pytest.approx((0.25 + (math.log(3) - 1) ** 2) / 2)
    two = torch.stack([torch.zeros(2, 3), logits], dim=-1)  # [wrong, correct] = [0, z]: P(correct) = σ(z)
    assert prm_loss("soft_ce", two, batch).item() == pytest.approx(prm_loss("bce", logits, batch).item())
    assert set(OBJECTIVES) == {"bce", "mse", "ce", "soft_ce", "bradley_terry", "progress_sum", "td_bce"}
    with pytest.raises(ValueError, match="unknown PRM loss 'hinge'"):
        prm_loss("hinge", logits, batch)


def test_pack_rows_positions_and_pairs():
    feats = [feature([X] * n, [0] * (n - 1) + [1]) for n in (5, 3, 2, 4)]
    b = pack(feats, 0, 6)
    # first-fit decreasing: 5 → row 0; 4 → row 1; 3 → row 2; 2 → row 1 (after the 4)
    assert b["sequence_ids"].tolist() == [[0] * 5 + [-1], [3] * 4 + [2] * 2, [1] * 3 + [-1] * 3]
    assert b["position_ids"].tolist() == [[0, 1, 2, 3, 4, 0], [0, 1, 2, 3, 0, 1], [0, 1, 2, 0, 1, 2]]
    assert "attention_mask" not in b
    assert b["step_mask"].sum().item() == 4
    with pytest.raises(ValueError, match="feature 0 has 5 tokens"):
        pack_rows([5], 4)
    pair = {"chosen": feature([X, 1], [0, 1]), "rejected": feature([X, 0], [0, 1])}
    out = PRMCollator(0)([pair, pair])
    assert out["labels"][:, 1].tolist() == [1, 0, 1, 0]
    with pytest.raises(ValueError, match="mixes preference pairs"):
        PRMCollator(0, packing=True)([pair, feature([X, 1], [0, 1])])


def test_pairs_file_and_branches(tmp_path):
    path = tmp_path / "pairs.jsonl"
    path.write_text(
        '{"prompt": "p ", "history": ["a"], "chosen": "b", "rejected": "c", "id": "x"}\n{"prompt": 1}\n'
    )
    with pytest.raises(DataError, match=r"pairs.jsonl:2: field 'prompt'"):
        read_pairs(path)
    path.write_text('{"prompt": "p ", "history": ["a"], "chosen": "b", "rejected": "c", "id": "x"}\n')
    [pair] = read_pairs(path)
    c, r = pair.branches()
    assert (c.completions, c.labels) == (["a", "b"], [None, 1.0])
    assert (r.completions, r.labels) == (["a", "c"], [None, 0.0])


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    return ProcessRewardModel.build(tiny_model_dir, "scalar", dtype="float32").tokenizer


def rollouts():
    """Task t1: open → unlock wins, open → kick loses, sleep loses (same first observation)."""
    return [
        traj("w", [("a hall", "open door"), ("a room", "unlock box")], True, sample=0),
        traj("l", [("a hall", "open door"), ("a room", "kick box")], False, sample=1),
        traj("s", [("a hall", "sleep now")], False, sample=2),
    ]


def test_preference_records_become_pairs(tokenizer):
    trajs = rollouts()
    rows = [r.to_row() for r in run_method("preference", Sources(trajectories=trajs)).records]
    pairs = examples_from_records(tokenizer, rows, {t.id: t for t in trajs})
    assert all(isinstance(p, PairExample) for p in pairs)
    by_depth = {len(p.history): p for p in pairs}
    assert len(pairs) == 2 and set(by_depth) == {0, 1}
    assert "unlock box" in by_depth[1].chosen and "kick box" in by_depth[1].rejected
    assert "open door" in by_depth[0].chosen and "sleep now" in by_depth[0].rejected
    assert "open door" in by_depth[1].history[0]


def test_transition_records_become_td_examples(tokenizer):
    expert = traj("e", [("a hall", "open door"), ("a room", "unlock box")], True)
    policy = traj("p", [("a hall", "sleep now"), ("a hall", "kick box")], False)
    rows = [
        r.to_row()
        for r in inverse_transitions([expert], [policy], {("e", 1): "look"}, InverseConfig(balance=False))
    ]
    examples = examples_from_records(tokenizer, rows, {"e": expert, "p": policy})
    # expert step 0 with re-sampled a' = "look" at s'; expert step 1 terminal; the policy's own transitions
    labels = sorted(str(ex.labels) for ex in examples)
    assert labels == ["[0.0, 0.0]", "[1.0, None]", "[None, 1.0]"]
    assert all(ex.num_steps == 2 for ex in examples)
    resampled = next(ex for ex in examples if ex.labels == [1.0, None])
    assert "look" in resampled.completions[-1] and "unlock box" not in resampled.completions[-1]
    bad = dict(rows[0], terminal=True)
    with pytest.raises(DataError, match="target record 0: step 0"):
        examples_from_records(tokenizer, [bad], {"e": expert, "p": policy})


def test_progress_records_and_value_rendering(tokenizer):
    trajs = rollouts()
    rows = [r.to_row() for r in run_method("spa", Sources(trajectories=trajs)).records]
    examples = examples_from_records(tokenizer, rows, {t.id: t for t in trajs})
    assert [(ex.outcome, ex.num_steps) for ex in examples] == [(1.0, 2), (0.0, 2), (0.0, 1)]
    v = render_states(tokenizer, trajs[0], [0.9, 1.0])
    # the marker sits after each state's prompt: before the action of that step
    text = "".join(c + "<|step|>" for c in v.completions)
    first, second = text.split("<|step|>")[:2]
    assert "a hall" in first and "open door" not in first
    assert "open door" in second and "a room" in second and "unlock box" not in second
    with pytest.raises(DataError, match="1 labels"):
        render_states(tokenizer, trajs[0], [1.0])
    assert isinstance(v, StepwiseExample)


def test_value_rendering_on_trajectories_with_admissible_actions(tokenizer):
    """Household-like steps carry admissible lists: a value model's states render with the PRM prompt
    (no lists), so each state's text extends the previous one; asking for the lists is refused."""
    from proctor.prompts import PromptConfig

    trajs = rollouts()
    t = trajs[0].model_copy(deep=True)
    for i, step in enumerate(t.steps):
        step.info["admissible_actions"] = ["open door", "unlock box", f"look {i}"]
    v = render_states(tokenizer, t, [0.5, 1.0])
    assert v.num_steps == 2 and all("admissible actions" not in c for c in v.completions)
    with pytest.raises(DataError, match="show_admissible=False"):
        render_states(tokenizer, t, [0.5, 1.0], PromptConfig(show_admissible=True))

"""proctor.prm.model / heads / scoring on a tiny Llama: heads, save/load (proctor and TRL folders), LoRA,
one-pass scoring equal to per-prefix scoring, and shared-prefix best-of-N equal to full-sequence scoring."""

from __future__ import annotations

import pytest
import torch

from proctor.prm.data import StepwiseExample
from proctor.prm.model import ProcessRewardModel
from proctor.prm.scoring import PRMScorer
from proctor.prm.tokenize import TokenizeConfig
from proctor.prompts.render import prefix_at
from proctor.trajectory import Step, Trajectory

EXAMPLES = [
    StepwiseExample(
        prompt="Task: find the key. ",
        completions=["go north", "open the drawer", "take key"],
        labels=[1, 0, 1],
        id="a",
    ),
    StepwiseExample(prompt="Task: open the door. ", completions=["look"], labels=[1], id="b"),
]


def traj() -> Trajectory:
    steps = [
        Step(observation="You are in a hall.", action="go north"),
        Step(observation="You see a drawer.", action="open drawer"),
        Step(observation="The drawer is open. A key.", action="take key"),
    ]
    return Trajectory(
        id="t1",
        env="household",
        task_id="k",
        sample=0,
        task="find the key",
        split="train",
        seed=0,
        agent="test",
        steps=steps,
        final_observation="You took the key.",
        success=True,
        score=1.0,
        termination="success",
    )


def flat(scores: list[list[float]]) -> list[float]:
    return [x for row in scores for x in row]


@pytest.fixture(scope="module", params=["scalar", "classification", "reward_tokens"])
def prm(request, tiny_model_dir):
    torch.manual_seed(0)
    return ProcessRewardModel.build(tiny_model_dir, request.param, dtype="float32").eval()


def test_heads_give_one_score_per_step(prm):
    scores = PRMScorer(prm).score_examples(EXAMPLES)
    assert [len(s) for s in scores] == [3, 1]
    assert all(0.0 <= x <= 1.0 for s in scores for x in s)
    logits = prm(torch.tensor([prm.tokenize(EXAMPLES[0])["input_ids"]])).logits
    assert logits.shape[-1] == 2 if prm.spec.head != "scalar" else logits.dim() == 2


def test_one_pass_equals_one_pass_per_prefix(prm):
    """The score of step k read from the whole trajectory equals the score of the prefix ending at step k
    (causal attention): one pass per trajectory loses nothing."""
    scorer = PRMScorer(prm)
    [full] = scorer.score_examples(EXAMPLES[:1])
    ex = EXAMPLES[0]
    per_prefix = [
        scorer.score_examples(
            [ex.model_copy(update={"completions": ex.completions[: k + 1], "labels": ex.labels[: k + 1]})]
        )[0][-1]
        for k in range(ex.num_steps)
    ]
    assert full == pytest.approx(per_prefix, abs=1e-5)
    # batching with padding does not change scores
    assert scorer.score_examples(EXAMPLES)[0] == pytest.approx(full, abs=1e-5)


def test_shared_prefix_best_of_n_equals_full_sequences(prm):
    scorer = PRMScorer(prm)
    tok = prm.tokenizer
    prefix = [tok.bos_token_id] + tok(
        "Task: find the key. go north<|step|>You see", add_special_tokens=False
    )["input_ids"]
    suffixes = [
        tok(s, add_special_tokens=False)["input_ids"]
        for s in [" a drawer. open it<|step|>", " x<|step|>", " a long corridor with doors. walk on<|step|>"]
    ]
    shared = scorer.score_candidates(prefix, suffixes)
    chunked = scorer.score_candidates(prefix, suffixes, chunk_size=2)
    full = scorer.score_features(
        [
            {
                "input_ids": prefix + s,
                "step_mask": [0] * len(prefix) + [int(t == tok.convert_tokens_to_ids("<|step|>")) for t in s],
                "labels": [-100] * (len(prefix) + len(s)),
            }
            for s in suffixes
        ]
    )
    assert [len(s) for s in shared] == [1, 1, 1]
    for a, b, c in zip(shared, chunked, full, strict=True):
        assert a == pytest.approx(c, abs=1e-4) and b == pytest.approx(c, abs=1e-4)


def test_trajectory_and_action_scoring_agree(prm):
    """Per-step best-of-N scoring of the action taken equals that step's score in the one-pass scoring."""
    scorer = PRMScorer(prm)
    tr = traj()
    [one_pass] = scorer.score_trajectories([tr])
    assert len(one_pass) == 3
    for t in range(3):
        got = scorer.score_actions(prefix_at(tr, t), [tr.steps[t].action, "jump"])
        assert got[0] == pytest.approx(one_pass[t], abs=1e-4)


def test_save_and_load_roundtrip(prm, tmp_path):
    before = PRMScorer(prm).score_examples(EXAMPLES)
    prm.save_pretrained(tmp_path / "prm")
    assert (tmp_path / "prm" / "model.safetensors").is_file() and (
        tmp_path / "prm" / "prm_config.json"
    ).is_file()
    loaded = ProcessRewardModel.from_pretrained(tmp_path / "prm", dtype="float32")
    assert loaded.spec == prm.spec
    assert flat(PRMScorer(loaded).score_examples(EXAMPLES)) == pytest.approx(flat(before), abs=1e-6)


def test_loads_a_trl_token_classification_folder(tiny_model_dir, tmp_path):
    """A folder as TRL's PRMTrainer writes it: AutoModelForTokenClassification (2 labels) + tokenizer."""
    from transformers import AutoModelForTokenClassification

    from proctor.models import load_tokenizer

    torch.manual_seed(1)
    hf = AutoModelForTokenClassification.from_pretrained(tiny_model_dir, num_labels=2).eval()
    tok = load_tokenizer(tiny_model_dir)
    hf.save_pretrained(tmp_path / "trl")
    tok.save_pretrained(tmp_path / "trl")
    prm = ProcessRewardModel.from_pretrained(tmp_path / "trl", dtype="float32")
    assert prm.spec.head == "classification" and prm.spec.tokenization.mode == "trl"
    ex = EXAMPLES[0]
    f = prm.tokenize(ex, is_eval=True)
    with torch.no_grad():
        probs = torch.softmax(hf(torch.tensor([f["input_ids"]])).logits[0], -1)[:, 1]
    want = probs[torch.tensor(f["step_mask"], dtype=torch.bool)].tolist()
    assert PRMScorer(prm).score_examples([ex])[0] == pytest.approx(want, abs=1e-5)


def test_lora_trains_adapters_and_head_only_and_merges_on_save(tiny_model_dir, tmp_path):
    prm = ProcessRewardModel.build(
        tiny_model_dir, "scalar", dtype="float32", lora={"r": 4}, gradient_checkpointing=True
    )
    trainable = [n for n, p in prm.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n or "score" in n for n in trainable)
    with torch.no_grad():
        for n, p in prm.named_parameters():
            if "lora_B" in n:
                p.add_(0.05)
    before = PRMScorer(prm.eval()).score_examples(EXAMPLES)
    prm.save_pretrained(tmp_path / "lora")
    loaded = ProcessRewardModel.from_pretrained(tmp_path / "lora", dtype="float32")
    assert flat(PRMScorer(loaded).score_examples(EXAMPLES)) == pytest.approx(flat(before), abs=1e-5)


def test_trl_mode_prm_scores_with_separator(tiny_model_dir):
    prm = ProcessRewardModel.build(
        tiny_model_dir,
        "classification",
        dtype="float32",
        tokenization=TokenizeConfig(mode="trl", step_separator="\n"),
    )
    assert [len(s) for s in PRMScorer(prm).score_examples(EXAMPLES)] == [3, 1]


def test_build_reports_no_weight_surprises_for_a_plain_backbone_and_leaves_logging_as_it_was(tiny_model_dir, caplog):
    import logging

    from transformers.utils import logging as hf_logging

    from proctor.prm.model import ProcessRewardModel

    modeling_logger = hf_logging.get_logger("transformers.modeling_utils")
    filters_before = list(modeling_logger.filters)
    with caplog.at_level(logging.WARNING, logger="proctor.prm.model"):
        ProcessRewardModel.build(tiny_model_dir, "scalar", dtype="float32")
    assert not [r for r in caplog.records if r.name == "proctor.prm.model"]
    assert modeling_logger.filters == filters_before


def test_reward_tokens_head_projects_scored_positions_onto_two_rows_only(tiny_model_dir):
    """The reward_tokens head's logits, z = h·W[ids]ᵀ at the scored positions, equal the full LM head's logits
    at the reward tokens (logits[..., ids]), so the scores are unchanged."""
    prm = ProcessRewardModel.build(tiny_model_dir, "reward_tokens", dtype="float32").eval()
    f = prm.tokenize(EXAMPLES[0])
    ids = torch.tensor([f["input_ids"]])
    mask = torch.tensor([f["step_mask"]], dtype=torch.bool)
    with torch.no_grad():
        full = prm.hf_model(ids).logits[..., list(prm.reward_token_ids)]
        every = prm(ids).logits
        scored = prm(ids, score_mask=mask).logits
    assert every.shape == full.shape and torch.allclose(every, full, atol=1e-5)
    assert torch.allclose(scored[mask], full[mask], atol=1e-5) and not scored[~mask].any()
    assert prm.scores(scored)[mask].tolist() == pytest.approx(prm.scores(full)[mask].tolist(), abs=1e-6)


def test_auto_dtype_is_bf16_only_on_a_cuda_device(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    from proctor.prm.model import auto_dtype

    assert auto_dtype() == torch.float32 and auto_dtype("cpu") == torch.float32  # where build loads: the CPU
    assert auto_dtype("cuda") == torch.bfloat16 and auto_dtype("auto") == torch.bfloat16


@pytest.mark.parametrize("method", ["activation_checkpointing_enable", "gradient_checkpointing_enable"])
def test_checkpointing_is_delegated_to_the_backbone(tiny_model_dir, method):
    prm = ProcessRewardModel.build(tiny_model_dir, "scalar", dtype="float32")
    getattr(prm, method)({"use_reentrant": False})
    assert prm.hf_model.is_activation_checkpointing

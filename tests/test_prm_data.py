"""proctor.prm.data (the stepwise record and files), proctor.prm.importers and proctor.prm.tokenize (TRL-exact ids,
marker mode, guards)."""

from __future__ import annotations

import json

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from proctor.prm.data import DataError, StepwiseExample, read_stepwise, write_stepwise
from proctor.prm.importers import (
    from_math_shepherd,
    from_prm800k,
    from_processbench,
    load_examples,
    read_processbench,
)
from proctor.prm.tokenize import TokenizationError, collate, tokenize_marked, tokenize_trl

X = -100


@pytest.fixture(scope="module")
def word_tok():
    """A real fast tokenizer with a fixed word vocabulary: BOS 0, prompt → [465, 6766, 318, 298],
    step 1 → [4, 322, 12], step 2 → [4995, 11, 22], "\\n" → [1030]."""
    vocab = {
        "<s>": 0,
        "<unk>": 1,
        "<pad>": 2,
        "<|step|>": 3,
        "This": 465,
        "is": 6766,
        "a": 318,
        "prompt": 298,
        "go": 4,
        "to": 322,
        "door": 12,
        "open": 4995,
        "the": 11,
        "box": 22,
        "\n": 1030,
    }
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split(" ", "removed"), pre_tokenizers.Split("\n", "isolated")]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        unk_token="<unk>",
        pad_token="<pad>",
        additional_special_tokens=["<|step|>"],
    )


@pytest.fixture
def ex():
    return StepwiseExample(
        prompt="This is a prompt", completions=["go to door", "open the box"], labels=[True, False], id="e0"
    )


P = [0, 465, 6766, 318, 298]


def test_trl_no_truncation(word_tok, ex):
    f = tokenize_trl(ex, word_tok)
    assert f["input_ids"] == P + [4, 322, 12, 1030, 4995, 11, 22, 1030]
    assert f["labels"] == [X] * 8 + [1] + [X] * 3 + [0]
    assert f["step_mask"] == [0] * 8 + [1] + [0] * 3 + [1]


def test_trl_last_step_only(word_tok, ex):
    f = tokenize_trl(ex, word_tok, train_on_last_step_only=True)
    assert f["input_ids"] == P + [4, 322, 12, 1030, 4995, 11, 22, 1030]
    assert f["labels"] == [X] * 12 + [0]
    assert tokenize_trl(ex, word_tok, train_on_last_step_only=True, is_eval=True)["labels"][8] == 1


def test_trl_max_completion_length(word_tok, ex):
    f = tokenize_trl(ex, word_tok, max_completion_length=6)
    assert f["input_ids"] == P + [4, 322, 12, 1030, 4995, 11]
    assert f["labels"] == [X] * 8 + [1, X, X]


def test_trl_max_length(word_tok, ex):
    f = tokenize_trl(ex, word_tok, max_length=9)
    assert f["input_ids"] == [0, 465, 6766, 318, 298, 4, 322, 12, 1030]
    assert f["labels"] == [X] * 8 + [1]


def test_trl_separator(word_tok, ex):
    f = tokenize_trl(ex, word_tok, step_separator="\n\n")
    assert f["input_ids"] == P + [4, 322, 12, 1030, 1030, 4995, 11, 22, 1030, 1030]
    assert f["labels"] == [X] * 9 + [1] + [X] * 4 + [0]


def test_trl_guard_when_all_labels_truncated(word_tok, ex):
    with pytest.raises(TokenizationError, match="e0.*no labelled step"):
        tokenize_trl(ex, word_tok, max_length=8)
    with pytest.raises(TokenizationError, match="no labelled step"):
        tokenize_trl(ex, word_tok, train_on_last_step_only=True, max_completion_length=6)


def test_marked_mode(word_tok, ex):
    ex = ex.model_copy(update={"prompt": "This is a prompt "})
    f = tokenize_marked(ex, word_tok, "<|step|>")
    assert f["input_ids"] == P + [4, 322, 12, 3, 4995, 11, 22, 3]
    assert f["labels"] == [X] * 8 + [1] + [X] * 3 + [0]
    cut = tokenize_marked(ex, word_tok, "<|step|>", max_length=10)
    assert cut["step_mask"] == [0] * 8 + [1, 0]
    with pytest.raises(TokenizationError, match="no step marker survives"):
        tokenize_marked(ex, word_tok, "<|step|>", max_length=8)
    with pytest.raises(TokenizationError, match="encodes to 2 tokens"):
        tokenize_marked(ex, word_tok, "go to")
    bad = StepwiseExample(prompt="This <|step|>", completions=["go"], labels=[1])
    with pytest.raises(TokenizationError, match="the prompt contains the step marker"):
        tokenize_marked(bad, word_tok, "<|step|>")


def test_unlabelled_steps_and_soft_labels(word_tok):
    ex = StepwiseExample(prompt="a ", completions=["go", "open", "box"], labels=[0.25, None, 1], outcome=0.5)
    f = tokenize_marked(ex, word_tok, "<|step|>")
    assert f["labels"] == [X, X, X, 0.25, X, X, X, 1.0]
    assert f["step_mask"] == [0, 0, 0, 1, 0, 1, 0, 1]
    b = collate(
        [
            f,
            tokenize_marked(
                ex.model_copy(update={"completions": ["go"], "labels": [1]}), word_tok, "<|step|>"
            ),
        ],
        pad_token_id=2,
    )
    assert b["input_ids"][1].tolist() == [0, 318, 4, 3, 2, 2, 2, 2]
    assert b["attention_mask"][1].tolist() == [1, 1, 1, 1, 0, 0, 0, 0]
    assert b["labels"][1].tolist() == [X, X, X, 1.0, X, X, X, X]
    assert b["outcome"].tolist() == [0.5, 0.5]


def test_stepwise_validation_and_roundtrip(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps({"prompt": "p", "completions": ["a", "b"], "labels": [True, 0.5]}) + "\n")
    [ex] = read_stepwise(path)
    assert ex.labels == [1.0, 0.5]
    assert ex.to_trl()["labels"] == [1.0, 0.5]
    write_stepwise([ex], tmp_path / "o.jsonl")
    assert read_stepwise(tmp_path / "o.jsonl") == [ex]
    path.write_text(json.dumps({"prompt": "p", "completions": ["a", "b"], "labels": [True]}) + "\n")
    with pytest.raises(DataError, match=r"d.jsonl:1: .*2 completions but 1 labels"):
        read_stepwise(path)


def test_math_shepherd():
    rec = {
        "input": "What is 1+1? Step 1: 1+1=2 ки\nStep 2: The answer is 3 ки",
        "label": "What is 1+1? Step 1: 1+1=2 +\nStep 2: The answer is 3 -",
    }
    [ex] = from_math_shepherd([rec])
    assert ex.prompt == "What is 1+1?"
    assert ex.completions == ["Step 1: 1+1=2", "Step 2: The answer is 3"]
    assert ex.labels == [1.0, 0.0]
    with pytest.raises(DataError, match="math-shepherd:0: field 'label' does not match"):
        from_math_shepherd([{**rec, "label": rec["label"].replace("1+1=2", "1+1=4")}])


def test_prm800k():
    rec = {
        "question": {"problem": "Find x."},
        "label": {
            "steps": [
                {
                    "completions": [{"text": "a", "rating": 1}],
                    "chosen_completion": 0,
                    "human_completion": None,
                },
                {
                    "completions": [{"text": "b0", "rating": 0}, {"text": "b1", "rating": 1}],
                    "chosen_completion": 1,
                },
                {"completions": [{"text": "c", "rating": 0}], "chosen_completion": 0},
                {"completions": [{"text": "d", "rating": -1}], "chosen_completion": None},
                {"completions": [{"text": "e", "rating": 1}], "chosen_completion": 0},
            ]
        },
    }
    [ex] = from_prm800k([rec])
    assert ex.completions == ["a", "b1", "c", "d"] and ex.labels == [1, 1, 1, 0]
    assert from_prm800k([rec], neutral_is_correct=False)[0].labels == [1, 1, 0, 0]


def test_processbench_records():
    recs = [
        {"id": "x", "problem": "q", "steps": ["s0", "s1", "s2"], "label": 1},
        {"id": "y", "problem": "q", "steps": ["s0", "s1"], "label": -1},
    ]
    a, b = from_processbench(recs)
    assert a.completions == ["s0", "s1"] and a.labels == [1, 0] and a.meta["first_error"] == 1
    assert b.labels == [1, 1]
    assert from_processbench(recs, through_first_error=False)[0].labels == [1, 0, None]
    with pytest.raises(DataError, match="processbench:z: field 'label' is 3"):
        from_processbench([{"id": "z", "steps": ["a"], "label": 3}])


@pytest.mark.data
def test_processbench_real_files(shared_data):
    path = shared_data / "processbench" / "gsm8k.json"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    exs = read_processbench(path)
    assert len(exs) == 400
    assert sum(ex.meta["first_error"] == -1 for ex in exs) > 0
    assert all(ex.num_steps >= 1 for ex in exs)
    assert len(load_examples(path, "processbench")) == 400


def test_the_importers_earlier_import_path_warns_naming_the_new_one():
    import proctor.prm.importers

    with pytest.warns(DeprecationWarning, match="proctor.prm.data.load_examples is now proctor.prm.importers"):
        from proctor.prm.data import load_examples as old
    assert old is proctor.prm.importers.load_examples

"""Sequence packing (tokenize.pack): several examples per row, attention kept within each through restarting
position_ids. A packed batch gives the same per-step logits and the same training losses as a padded one."""

from __future__ import annotations

import random

import pytest
import torch

from proctor.prm.config import PRMTrainConfig
from proctor.prm.data import StepwiseExample, write_stepwise
from proctor.prm.model import ProcessRewardModel
from proctor.prm.tokenize import collate, pack
from proctor.prm.trainer import train_prm

GOOD = ["open the drawer", "take the key", "go north"]
BAD = ["eat the key", "jump on table", "sleep now"]


def examples(n: int, seed: int) -> list[StepwiseExample]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        labels = [rng.random() < 0.5 for _ in range(rng.randint(1, 4))]
        steps = [rng.choice(GOOD if y else BAD) * rng.randint(1, 3) for y in labels]
        out.append(
            StepwiseExample(prompt="Task: escape. " * rng.randint(1, 4), completions=steps, labels=labels)
        )
    return out


def step_logits(logits: torch.Tensor, batch: dict, n: int) -> list[torch.Tensor]:
    return [logits[(batch["sequence_ids"] == i) & batch["step_mask"]] for i in range(n)]


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_packed_batch_scores_like_padded(tiny_model_dir, attn):
    torch.manual_seed(0)
    prm = ProcessRewardModel.build(tiny_model_dir, "scalar", dtype="float32").eval()
    prm.hf_model.config._attn_implementation = attn
    feats = [prm.tokenize(ex) for ex in examples(8, 0)]
    padded, packed = collate(feats, prm.tokenizer.pad_token_id), pack(feats, prm.tokenizer.pad_token_id, 96)
    assert packed["input_ids"].shape[0] < len(feats)  # several examples share a row
    assert packed["input_ids"].numel() < padded["input_ids"].numel()
    with torch.no_grad():
        a = prm(padded["input_ids"], attention_mask=padded["attention_mask"]).logits
        b = prm(packed["input_ids"], position_ids=packed["position_ids"]).logits
        # control: the same packed rows with positions running on across examples attend across them
        run_on = torch.arange(packed["input_ids"].shape[1]).expand_as(packed["position_ids"])
        c = prm(packed["input_ids"], position_ids=run_on).logits
    for x, y in zip(step_logits(a, padded, 8), step_logits(b, packed, 8), strict=True):
        assert torch.allclose(x, y, atol=1e-5)
    leaked = max(
        (x - y).abs().max().item() for x, y in zip(step_logits(a, padded, 8), step_logits(c, packed, 8))
    )
    assert leaked > 1e-3


def test_packed_training_matches_padded(tmp_path, tiny_model_dir):
    write_stepwise(examples(32, 1), tmp_path / "train.jsonl")

    def curve(packing: bool) -> list[float]:
        cfg = PRMTrainConfig.model_validate(
            {
                "model": {"backbone": str(tiny_model_dir), "head": "scalar"},
                "data": {"train": str(tmp_path / "train.jsonl")},
                "packing": packing,
                "output_dir": str(tmp_path / f"out{packing}"),
                "steps": 6,
                "learning_rate": 3e-3,
                "batch_size": 8,
                "device": "cpu",
                "progress": False,
            }
        )
        return train_prm(cfg).losses

    padded, packed = curve(False), curve(True)
    assert len(padded) == 6
    assert packed == pytest.approx(padded, abs=1e-4)

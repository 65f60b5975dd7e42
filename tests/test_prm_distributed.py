"""Distributed PRM training: `proctor prm train` under torchrun with 2 CPU processes (gloo), with no
distributed setting in the config (no `device`), shares the data between the ranks: one epoch over 64
examples at the global batch of 8 (4 per process) takes 64 / 8 = 8 steps (two separate full jobs would take 16
each), and the loss curve is 1 process's on the same global batches (the engine normalises by the global
batch's labelled steps). `proctor prm train-likelihood` likewise: 2 processes at the global batch of 1 follow
its curve."""

from __future__ import annotations

import json

import pytest
import yaml

from proctor.prm.config import PRMTrainConfig
from proctor.prm.data import write_stepwise
from proctor.prm.likelihood import LIKELIHOOD_FILE, LikelihoodPRMConfig, train_likelihood_prm
from proctor.prm.trainer import TRAIN_FILE, train_prm
from test_prm_likelihood import PROMPT, _labelled_store
from test_prm_train import toy
from torchrun_cli import torchrun_cli

EXAMPLES, BATCH, RANKS, EPOCHS = 64, 8, 2, 2
STEPS = EPOCHS * EXAMPLES // BATCH  # 16 when the ranks share the data


def two_step_examples(n: int):
    """`n` toy examples with exactly two labelled steps each."""
    return [ex for ex in toy(8 * n, 0) if ex.num_steps == 2][:n]


def config(tmp_path, tiny_model_dir, name: str) -> dict:
    return {
        "model": {"backbone": str(tiny_model_dir), "head": "scalar"},
        "data": {"train": str(tmp_path / "train.jsonl")},
        "packing": True,
        "output_dir": str(tmp_path / name),
        "epochs": EPOCHS,
        "learning_rate": 3e-3,
        "batch_size": BATCH,
        "progress": False,
    }


@pytest.mark.slow
def test_two_processes_share_the_data_and_follow_the_single_process_curve(tmp_path, tiny_model_dir):
    examples = two_step_examples(EXAMPLES)
    assert len(examples) == EXAMPLES
    write_stepwise(examples, tmp_path / "train.jsonl")
    (tmp_path / "ddp.yaml").write_text(yaml.safe_dump(config(tmp_path, tiny_model_dir, "ddp")))
    res = torchrun_cli(tmp_path, ["prm", "train", str(tmp_path / "ddp.yaml")], RANKS)
    finals = [json.loads(line) for line in res.stdout.splitlines() if line.startswith('{"output_dir"')]
    assert [f["steps"] for f in finals] == [STEPS]  # rank 0 alone prints; a full job per rank would take 2 * STEPS
    written = json.loads((tmp_path / "ddp" / TRAIN_FILE).read_text())
    assert written["processes"] == RANKS and written["steps"] == STEPS
    ddp = [r["loss"] for r in written["curve"]]

    single = train_prm(PRMTrainConfig.model_validate(config(tmp_path, tiny_model_dir, "single"))).losses
    assert len(ddp) == len(single) == STEPS
    assert ddp == pytest.approx(single, abs=2e-3)  # the same global batches, the same updates
    for curve in (ddp, single):
        assert sum(curve[-4:]) < 0.8 * sum(curve[:4])
    assert (tmp_path / "ddp" / "prm_config.json").is_file()


@pytest.mark.slow
def test_likelihood_prm_two_processes_follow_the_single_process_curve(tmp_path, tiny_model_dir):
    """Global batches of 6 labelled + 4 anchor rows, split 3 + 2 per process: the per-step loss (mean BCE +
    λ·mean anchor NLL) equals one process's to 2e-3 (float rounding of the split passes, over 8 steps at lr
    3e-3); the main process alone writes the folder."""
    data = _labelled_store(tmp_path, "train", 4)
    fields = {"policy": str(tiny_model_dir), "prompt": PROMPT, "data": [str(data)], "target": "fav",
              "anchor": str(data), "anchor_expert": "search", "anchor_weight": 0.5, "anchor_batch_size": 4,
              "steps": 8, "batch_size": 6, "learning_rate": 3e-3, "logging_steps": 1, "device": "cpu", "progress": False}
    (tmp_path / "ddp.yaml").write_text(yaml.safe_dump({**fields, "output_dir": str(tmp_path / "ddp")}))
    res = torchrun_cli(tmp_path, ["prm", "train-likelihood", str(tmp_path / "ddp.yaml")], RANKS)
    assert {json.loads(line)["output_dir"] for line in res.stdout.splitlines() if line.startswith('{"output_dir"')} \
        == {str(tmp_path / "ddp")}
    ddp = json.loads((tmp_path / "ddp" / LIKELIHOOD_FILE).read_text())
    single = train_likelihood_prm(LikelihoodPRMConfig(**fields, output_dir=tmp_path / "single"))
    assert ddp["processes"] == RANKS and single["processes"] == 1 and len(ddp["curve"]) == 8
    for key in ("loss", "bce", "anchor_nll"):
        assert [r[key] for r in ddp["curve"]] == pytest.approx([r[key] for r in single["curve"]], abs=2e-3), key
    assert ddp["bias"] == pytest.approx(single["bias"], abs=2e-3)
    assert sorted(p.name for p in (tmp_path / "ddp").iterdir()) == sorted(p.name for p in (tmp_path / "single").iterdir())

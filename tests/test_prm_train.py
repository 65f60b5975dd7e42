"""PRM training with the HF Trainer on a learnable toy set, the `proctor prm train` CLI, resume, metrics of
the trained model, and the HTTP scoring server."""

from __future__ import annotations

import json
import random
import re

import pytest
import torch
import yaml
from typer.testing import CliRunner

from proctor.prm.config import PRMTrainConfig, load_config
from proctor.prm.data import StepwiseExample, write_stepwise
from proctor.prm.model import ProcessRewardModel
from proctor.prm.scoring import PRMScorer
from proctor.prm.trainer import train_prm

GOOD = ["open the drawer", "take the key", "go north", "unlock the door"]
BAD = ["eat the key", "jump on table", "sleep now", "break the wall"]


def toy(n: int, seed: int) -> list[StepwiseExample]:
    """Steps drawn from GOOD are correct (1), from BAD wrong (0): learnable from the step text alone."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        labels = [rng.random() < 0.5 for _ in range(rng.randint(1, 3))]
        steps = [rng.choice(GOOD if y else BAD) for y in labels]
        out.append(
            StepwiseExample(prompt="Task: escape the room. ", completions=steps, labels=labels, id=str(i))
        )
    return out


def config(tmp_path, tiny_model_dir, head="scalar", loss="bce", **training) -> dict:
    write_stepwise(toy(48, 0), tmp_path / "train.jsonl")
    write_stepwise(toy(16, 1), tmp_path / "eval.jsonl")
    return {
        "model": {"backbone": str(tiny_model_dir), "head": head, "dtype": "float32"},
        "loss": loss,
        "data": {"train": str(tmp_path / "train.jsonl"), "eval": str(tmp_path / "eval.jsonl")},
        "training": {
            "output_dir": str(tmp_path / "out"),
            "max_steps": 30,
            "learning_rate": 3e-3,
            "per_device_train_batch_size": 8,
            "logging_steps": 1,
            "save_strategy": "no",
            "use_cpu": True,
            "disable_tqdm": True,
            **training,
        },
    }


def summary(output: str) -> dict:
    """The JSON summary line `proctor prm train` prints (the Trainer logs its own lines too)."""
    [line] = re.findall(r'\{"output_dir".*\}', output)
    return json.loads(line)


def losses_of(trainer) -> list[float]:
    return [h["loss"] for h in trainer.state.log_history if "loss" in h]


@pytest.mark.parametrize("head,loss", [("scalar", "bce"), ("classification", "ce")])
def test_training_decreases_loss_and_learns(tmp_path, tiny_model_dir, head, loss):
    cfg = PRMTrainConfig.model_validate(config(tmp_path, tiny_model_dir, head, loss))
    _, _, trainer = train_prm(cfg)
    curve = losses_of(trainer)
    assert len(curve) == 30
    assert sum(curve[-5:]) / 5 < 0.5 * sum(curve[:5]) / 5
    loaded = ProcessRewardModel.from_pretrained(tmp_path / "out", dtype="float32")
    evals = toy(16, 1)
    scores = PRMScorer(loaded).score_examples(evals)
    right = [
        (s > 0.5) == bool(y)
        for ex, row in zip(evals, scores, strict=True)
        for s, y in zip(row, ex.labels, strict=True)
    ]
    assert sum(right) / len(right) > 0.9


def test_cli_train_and_resume(tmp_path, tiny_model_dir):
    from proctor.cli import app

    raw = config(tmp_path, tiny_model_dir, max_steps=6, save_strategy="steps", save_steps=3)
    path = tmp_path / "prm.yaml"
    path.write_text(yaml.safe_dump(raw))
    res = CliRunner().invoke(app, ["prm", "train", str(path)])
    assert res.exit_code == 0, res.output
    assert summary(res.output)["steps"] == 6
    assert (tmp_path / "out" / "checkpoint-3" / "prm_state.safetensors").is_file()
    raw["training"]["max_steps"] = 9
    path.write_text(yaml.safe_dump(raw))
    res = CliRunner().invoke(
        app, ["prm", "train", str(path), "--resume", str(tmp_path / "out" / "checkpoint-6")]
    )
    assert res.exit_code == 0, res.output
    assert summary(res.output)["steps"] == 9


def test_config_errors_name_the_field(tmp_path, tiny_model_dir):
    raw = config(tmp_path, tiny_model_dir, head="scalar", loss="ce")
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(
        ValueError, match="bad.yaml: .*loss 'ce' trains a classification or reward_tokens head"
    ):
        load_config(path)
    raw = config(tmp_path, tiny_model_dir)
    raw["model"]["colour"] = "red"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(ValueError, match="model.colour: Extra inputs"):
        load_config(path)


def test_server_scores_examples_and_trajectories(tiny_model_dir):
    from fastapi.testclient import TestClient

    from proctor.prm.server import make_app

    scorer = PRMScorer(ProcessRewardModel.build(tiny_model_dir, "scalar", dtype="float32"))
    client = TestClient(make_app(scorer))
    assert client.get("/health").json()["head"] == "scalar"
    r = client.post("/score", json={"examples": [{"prompt": "Task: x. ", "steps": ["go north", "take key"]}]})
    assert r.status_code == 200
    [row] = r.json()["scores"]
    direct = scorer.score_examples(
        [StepwiseExample(prompt="Task: x. ", completions=["go north", "take key"], labels=[None, None])]
    )[0]
    assert row == pytest.approx(direct, abs=1e-6)
    traj = {
        "id": "t",
        "env": "household",
        "task_id": "k",
        "sample": 0,
        "task": "find key",
        "split": "train",
        "seed": 0,
        "agent": "a",
        "success": False,
        "score": 0.0,
        "termination": "failure",
        "steps": [
            {"observation": "A hall.", "action": "go north"},
            {"observation": "A room.", "action": "look"},
        ],
    }
    r = client.post("/score", json={"trajectories": [traj]})
    assert r.status_code == 200 and len(r.json()["scores"][0]) == 2
    assert client.post("/score", json={}).status_code == 422


def test_one_step_at_lr_1e_6_from_a_bf16_checkpoint_moves_the_weights(tmp_path, tiny_model_dir, bf16_model_dir):
    """Default precision (model dtype auto: float32 weights): one AdamW step at lr 1e-6 moves ≥ 90% of the
    backbone's weights; bf16 weights would lose most such updates. The embedding table is left out (the
    marker token grows it, and the rows of tokens absent from the batch get no gradient)."""
    from moved_weights import moved_fraction

    raw = config(tmp_path, tiny_model_dir, max_steps=1, learning_rate=1e-6)
    raw["model"] = {"backbone": str(bf16_model_dir), "head": "scalar"}
    _, _, trainer = train_prm(PRMTrainConfig.model_validate(raw))
    assert next(trainer.model.parameters()).dtype == torch.float32
    assert moved_fraction(bf16_model_dir, tmp_path / "out", skip=("embed_tokens", "lm_head")) >= 0.9


@pytest.mark.parametrize("head,loss", [("scalar", "bce"), ("reward_tokens", "ce")])
def test_gradient_checkpointing_trains(tmp_path, tiny_model_dir, head, loss):
    raw = config(tmp_path, tiny_model_dir, head, loss, max_steps=2, gradient_checkpointing=True)
    prm, _, trainer = train_prm(PRMTrainConfig.model_validate(raw))
    assert prm.hf_model.is_activation_checkpointing and len(losses_of(trainer)) == 2

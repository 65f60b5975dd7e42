"""PRM training on the training engine on a learnable toy set, the `proctor prm train` CLI (its progress, resume,
a non-empty output folder), configs of the earlier trainer, metrics of the trained model, and the HTTP scoring
server."""

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
from proctor.prm.trainer import TRAIN_FILE, train_prm

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


def config(tmp_path, tiny_model_dir, head="scalar", loss="bce", **fields) -> dict:
    write_stepwise(toy(48, 0), tmp_path / "train.jsonl")
    write_stepwise(toy(16, 1), tmp_path / "eval.jsonl")
    return {
        "model": {"backbone": str(tiny_model_dir), "head": head},
        "loss": loss,
        "data": {"train": str(tmp_path / "train.jsonl"), "eval": str(tmp_path / "eval.jsonl")},
        "output_dir": str(tmp_path / "out"),
        "steps": 30,
        "learning_rate": 3e-3,
        "batch_size": 8,
        "device": "cpu",
        **fields,
    }


def summary(output: str) -> dict:
    """The JSON summary line `proctor prm train` prints (the progress lines go to stderr)."""
    [line] = re.findall(r'\{"output_dir".*\}', output)
    return json.loads(line)


@pytest.mark.parametrize("head,loss", [("scalar", "bce"), ("classification", "ce")])
def test_training_decreases_loss_and_learns(tmp_path, tiny_model_dir, head, loss):
    cfg = PRMTrainConfig.model_validate(config(tmp_path, tiny_model_dir, head, loss))
    result = train_prm(cfg)
    curve = result.losses
    assert len(curve) == 30 and [r["step"] for r in result.curve] == list(range(30))
    assert sum(curve[-5:]) / 5 < 0.5 * sum(curve[:5]) / 5
    assert result.eval_loss is not None and result.eval_loss < curve[0]  # data.eval's loss after training
    written = json.loads((tmp_path / "out" / TRAIN_FILE).read_text())
    assert [r["loss"] for r in written["curve"]] == curve and written["eval_loss"] == result.eval_loss
    loaded = ProcessRewardModel.from_pretrained(tmp_path / "out", dtype="float32")
    evals = toy(16, 1)
    scores = PRMScorer(loaded).score_examples(evals)
    right = [
        (s > 0.5) == bool(y)
        for ex, row in zip(evals, scores, strict=True)
        for s, y in zip(row, ex.labels, strict=True)
    ]
    assert sum(right) / len(right) > 0.9


def test_cli_prints_progress_and_resumes_the_same_curve(tmp_path, tiny_model_dir):
    """Piped, `prm train` prints the engine's progress line with the loss (no `\\r` bar, no pin_memory warning on
    the CPU) and one JSON summary; a run resumed from its step-3 checkpoint trains steps 3–5 exactly as the
    uninterrupted run did."""
    from proctor.cli import app

    raw = config(tmp_path, tiny_model_dir, steps=6, training_args={"save_strategy": "steps", "save_steps": 3})
    path = tmp_path / "prm.yaml"
    path.write_text(yaml.safe_dump(raw))
    res = CliRunner().invoke(app, ["prm", "train", str(path)])
    assert res.exit_code == 0, res.output
    assert summary(res.stdout)["steps"] == 6 and summary(res.stdout)["examples"] == 48
    assert re.search(r"\[prm train\] 6/6 steps, .*loss \d\.\d{4} \(done\)", res.stderr), res.stderr
    assert "\r" not in res.output and "pin_memory" not in res.output
    assert (tmp_path / "out" / "checkpoint-3" / "prm_state.safetensors").is_file()
    whole = json.loads((tmp_path / "out" / TRAIN_FILE).read_text())["curve"]
    res = CliRunner().invoke(app, ["prm", "train", str(path), "--resume", str(tmp_path / "out" / "checkpoint-3")])
    assert res.exit_code == 0, res.output
    resumed = json.loads((tmp_path / "out" / TRAIN_FILE).read_text())["curve"]
    assert summary(res.stdout)["steps"] == 6 and [r["step"] for r in resumed] == [3, 4, 5]
    assert [r["loss"] for r in resumed] == pytest.approx([r["loss"] for r in whole[3:]], abs=1e-5)


def test_a_non_empty_output_dir_is_refused_unless_overwrite(tmp_path, tiny_model_dir):
    from proctor.cli import app

    path = tmp_path / "prm.yaml"
    path.write_text(yaml.safe_dump(config(tmp_path, tiny_model_dir, steps=1)))
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "notes.txt").write_text("an earlier run")
    res = CliRunner().invoke(app, ["prm", "train", str(path)])
    assert res.exit_code == 2 and res.output.strip().splitlines() == [
        (f"error: {tmp_path / 'out'}: output_dir is not empty; choose a new folder, or write over it "
        "(`proctor prm train --overwrite`), or resume its checkpoints (`--resume last`)")]
    res = CliRunner().invoke(app, ["prm", "train", str(path), "--resume", "last"])
    assert res.exit_code == 2 and "no checkpoint-* folder to resume from" in res.output
    res = CliRunner().invoke(app, ["prm", "train", str(path), "--overwrite"])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "out" / "prm_config.json").is_file() and (tmp_path / "out" / "notes.txt").is_file()


def test_a_config_of_the_earlier_trainer_loads_with_a_note_per_moved_field(tmp_path, tiny_model_dir, caplog):
    """`training:` (TrainingArguments), `model.dtype` and `model.gradient_checkpointing` are read as today's
    fields, one note each naming the new field; the same config, and so the same training, as the new spelling."""
    new = config(tmp_path, tiny_model_dir, steps=40, batch_size=4, warmup_ratio=0.25, gradient_checkpointing=True,
                 logging_steps=1, training_args={"save_strategy": "no"})
    old = {key: value for key, value in new.items() if key not in (
        "output_dir", "steps", "learning_rate", "batch_size", "device", "warmup_ratio", "gradient_checkpointing",
        "logging_steps", "training_args")}
    old["model"] = {**new["model"], "dtype": "float32", "gradient_checkpointing": True}
    old["training"] = {"output_dir": new["output_dir"], "max_steps": 40, "learning_rate": 3e-3,
                       "per_device_train_batch_size": 2, "gradient_accumulation_steps": 2, "warmup_steps": 10,
                       "use_cpu": True, "logging_steps": 1, "save_strategy": "no", "disable_tqdm": True}
    new["gradient_accumulation_steps"] = 2
    with caplog.at_level("WARNING", logger="proctor.prm.config"):
        assert PRMTrainConfig.model_validate(old) == PRMTrainConfig.model_validate(new)
    notes = [r.getMessage() for r in caplog.records]
    assert len(notes) == 12 and all("\n" not in n for n in notes)
    for text in ("training.max_steps: now `steps`", ("training.per_device_train_batch_size: now `batch_size` (read "
                 "as batch_size: 4, the global batch: 2 × 2 accumulation steps × 1 processes)"),
                 "training.warmup_steps: now `warmup_ratio` (read as warmup_ratio: 0.25)",
                 "training.use_cpu: now `device`", "model.gradient_checkpointing: now `gradient_checkpointing`",
                 "training.save_strategy: now `training_args.save_strategy`", "model.dtype: dropped",
                 "training.disable_tqdm: dropped"):
        assert any(n.startswith(text) for n in notes), text
    with pytest.raises(ValueError, match="model.dtype: replaced by `precision`"):
        PRMTrainConfig.model_validate({**old, "model": {**old["model"], "dtype": "float16"}})
    with pytest.raises(ValueError, match="training.max_steps and steps both given; keep steps"):
        PRMTrainConfig.model_validate({**old, "steps": 3})
    assert PRMTrainConfig.model_validate({**old, "model": {**old["model"], "dtype": "bfloat16"}}).precision == \
        "bf16-pure"


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
    """Default precision (float32 weights): one AdamW step at lr 1e-6 moves ≥ 90% of the backbone's weights;
    bf16 weights would lose most such updates. The embedding table is left out (the marker token grows it, and
    the rows of tokens absent from the batch get no gradient)."""
    from moved_weights import moved_fraction

    raw = config(tmp_path, tiny_model_dir, steps=1, learning_rate=1e-6)
    raw["model"] = {"backbone": str(bf16_model_dir), "head": "scalar"}
    result = train_prm(PRMTrainConfig.model_validate(raw))
    assert next(result.prm.parameters()).dtype == torch.float32
    assert moved_fraction(bf16_model_dir, tmp_path / "out", skip=("embed_tokens", "lm_head")) >= 0.9


@pytest.mark.parametrize("head,loss", [("scalar", "bce"), ("reward_tokens", "ce")])
def test_gradient_checkpointing_recomputes_and_keeps_the_curve(tmp_path, tiny_model_dir, head, loss):
    """With `gradient_checkpointing` every decoder layer's body runs twice per micro-batch (once more in the
    backward pass), and the loss curve is the one without it."""
    def run(name: str, checkpointing: bool) -> tuple[list[float], int]:
        raw = config(tmp_path, tiny_model_dir, head, loss, steps=3, gradient_checkpointing=checkpointing,
                     output_dir=str(tmp_path / name))
        del raw["data"]["eval"]  # the layer runs in training only
        cfg = PRMTrainConfig.model_validate(raw)
        from proctor.prm.trainer import prepare, train_prepared

        prepared = prepare(cfg)
        assert prepared.prm.hf_model.is_activation_checkpointing == checkpointing
        calls = []
        mlp = prepared.prm.hf_model.base_model.layers[0].mlp  # inside the checkpointed layer's forward
        forward = mlp.forward
        mlp.forward = lambda *args, **kwargs: calls.append(1) or forward(*args, **kwargs)  # hooks miss a recompute
        return train_prepared(prepared).losses, len(calls)

    plain, plain_calls = run("plain", False)
    checkpointed, checkpointed_calls = run("checkpointed", True)
    assert plain_calls == 3 and checkpointed_calls == 6
    assert checkpointed == pytest.approx(plain, abs=1e-5)

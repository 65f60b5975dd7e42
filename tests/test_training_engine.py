"""The training engine by hand: the step's loss is the mean over all its items whatever the micro-batching, the
warm-up trains from the first step, precision and device rules, `training_args` checks, the trainer registry."""

from __future__ import annotations

import pytest
import torch
from pydantic import ValidationError

from proctor.rl.trainers import TRAINERS, trainer
from proctor.training.config import OptimizationConfig
from proctor.training.engine import fit
from proctor.training.precision import autocast_dtype, inference_dtype, resolve_device, weights_dtype


class Scalar(torch.nn.Module):
    def __init__(self, w: float):
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor([w]))

    def forward(self) -> torch.Tensor:
        return self.w


class SquaredError:
    """Σ_i (w − x_i)² over the rows x_i; weight: their number."""

    def weight(self, rows):
        return len(rows)

    def __call__(self, model, rows):
        w = model()[0]
        return sum((w - x) ** 2 for x in rows), {"rows": float(len(rows))}


def curve(tmp_path, batches, **opt):
    cfg = OptimizationConfig(device="cpu", progress=False, **{"learning_rate": 0.1, **opt})
    return fit(Scalar(0.0), batches, SquaredError(), cfg, tmp_path / "t").curve


def test_a_step_is_the_mean_over_its_items_however_it_is_accumulated(tmp_path) -> None:
    # rows 1, 2, 6 at w = 0: mean of squares (1 + 4 + 36) / 3; two micro-batches {1, 6} and {2} must not
    # average their own means ((1 + 36)/2 + 4)/2
    whole = curve(tmp_path, [[1.0, 2.0, 6.0], [1.0, 2.0, 6.0]])
    accumulated = curve(tmp_path, [[1.0, 2.0, 6.0], [1.0, 2.0, 6.0]], gradient_accumulation_steps=2)
    assert whole[0]["loss"] == pytest.approx(41 / 3) and whole[0]["rows"] == pytest.approx(1.0)
    assert [r["loss"] for r in accumulated] == pytest.approx([r["loss"] for r in whole], abs=1e-6)
    # AdamW's first step moves w by lr·sign(−g) = +0.1 (g = 2(w − x̄) < 0); the second loss is at w = 0.1
    assert whole[1]["loss"] == pytest.approx(((0.9) ** 2 + 1.9 ** 2 + 5.9 ** 2) / 3, abs=1e-5)


def test_warm_up_trains_from_the_first_step(tmp_path) -> None:
    # linear warm-up over 2 of 4 steps, then linear decay: lr·(s + 1)/2 while s < 2, then lr·(4 − s)/2
    rows = [[1.0]] * 4
    lrs = [r["lr"] for r in curve(tmp_path, rows, warmup_ratio=0.5, lr_scheduler_type="linear")]
    assert lrs == pytest.approx([0.05, 0.1, 0.1, 0.05])


def test_precision_rules_on_a_cpu() -> None:
    if torch.cuda.is_available():
        pytest.skip("CPU rules")
    assert resolve_device("auto") == "cpu" and resolve_device(None) == "cpu"
    with pytest.raises(ValueError, match="no CUDA device"):
        resolve_device("cuda")
    assert autocast_dtype("auto", "cpu") is None and autocast_dtype("bf16", "cpu") == "bfloat16"
    assert inference_dtype("auto", "cpu") == "float32" and inference_dtype(None, "cpu") is None
    assert weights_dtype("auto") == "float32" and weights_dtype("bf16") == "float32"


def test_pure_bf16_is_asked_for_and_warned(caplog) -> None:
    with caplog.at_level("WARNING"):
        assert weights_dtype("bf16-pure") == "bfloat16"
    assert "small" in caplog.text or "lost" in caplog.text


def test_training_args_are_checked_by_name() -> None:
    assert OptimizationConfig(training_args={"save_steps": 50}).training_args == {"save_steps": 50}
    with pytest.raises(ValidationError, match="training_args.save_step: not a transformers.TrainingArguments field "
                                              r"\(did you mean 'save_steps'\?\)"):
        OptimizationConfig(training_args={"save_step": 50})
    with pytest.raises(ValidationError, match="training_args.learning_rate: set by the trainer"):
        OptimizationConfig(training_args={"learning_rate": 1e-3})


def test_every_trainer_is_registered_with_a_composed_described_config() -> None:
    assert list(TRAINERS) == ["sft", "dpo", "bon-distill", "grpo", "ppo", "archer", "chai", "fbc"]
    for name, entry in TRAINERS.items():
        config, train = entry.load()
        assert issubclass(config, OptimizationConfig), name
        assert callable(train)
        undocumented = [f for f, info in config.model_fields.items() if not info.description]
        assert not undocumented, f"{name}: {undocumented}"
    with pytest.raises(KeyError, match=r"unknown training method 'dpoo' \(did you mean 'dpo'\?\); known: archer, "):
        trainer("dpoo")


def test_shuffled_batches_cut_each_pass_and_leave_out_a_short_last_batch(caplog) -> None:
    import random

    from proctor.training.engine import shuffled, shuffled_batches

    rows = list("abcde")
    batches, epochs = shuffled_batches(rows, 2, 2, lambda n: list(range(n)), OptimizationConfig())
    assert batches == [["a", "b"], ["c", "d"], ["e"]] * 2 and epochs == [0, 0, 0, 1, 1, 1]
    with caplog.at_level("WARNING"):  # two micro-batches a step: a batch of one row cannot be split
        batches, epochs = shuffled_batches(rows, 2, 1, lambda n: list(range(n)),
                                           OptimizationConfig(gradient_accumulation_steps=2))
    assert batches == [["a", "b"], ["c", "d"]] and "a last batch of 1 rows left out" in caplog.text
    # the permutations are the generators' own: random.shuffle, torch.randperm
    order = list(range(5))
    random.Random(3).shuffle(order)
    assert shuffled(random.Random(3))(5) == order
    assert shuffled(torch.Generator().manual_seed(3))(5) == torch.randperm(5, generator=torch.Generator()
                                                                              .manual_seed(3)).tolist()


def test_fit_refuses_no_batches(tmp_path) -> None:
    with pytest.raises(ValueError, match="sft: no batch to train on"):
        fit(Scalar(0.0), [], SquaredError(), OptimizationConfig(device="cpu"), tmp_path, label="sft")


def test_a_device_or_precision_the_machine_lacks_is_refused_at_validation() -> None:
    if torch.cuda.is_available():
        pytest.skip("CPU rules")
    with pytest.raises(ValidationError, match="device 'cuda': this torch build sees no CUDA device"):
        OptimizationConfig(device="cuda")
    with pytest.raises(ValidationError, match="precision fp16: fp16 mixed precision needs a CUDA device"):
        OptimizationConfig(precision="fp16")


def test_the_gpu_suites_trainer_configs_stay_valid(tiny_model_dir, scalar_prm_dir, random_states_store, tmp_path):
    """tests/gpu runs only where there is CUDA: its configs are checked here, on the CPU, so they do not rot."""
    from gpu.test_gpu_smoke import ONE_STEP, trainer_configs

    configs = trainer_configs(str(tiny_model_dir), str(scalar_prm_dir), str(random_states_store))
    assert sorted(configs) == sorted(set(TRAINERS) - {"sft"})
    for method, fields in configs.items():
        config, _ = TRAINERS[method].load()
        config.model_validate({**fields, **ONE_STEP, "device": "cpu", "output_dir": str(tmp_path / method)})


def test_warmup_steps_round_the_share() -> None:
    from proctor.training.engine import warmup_steps

    # 0.07 · 100 = 7.000000000000001 in floating point: transformers' ceil of the share would warm up 8 steps
    assert warmup_steps(0.07, 100) == 7 and warmup_steps(1 / 15, 750) == 50
    assert warmup_steps(0.001, 10) == 1 and warmup_steps(0.0, 10) == 0

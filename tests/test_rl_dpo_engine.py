"""Online DPO on the training engine: `DPOLoss` by hand (sums over pairs, RPO's term), one step at lr 1e-6 from a
bf16 checkpoint moves the weights, gradient accumulation and checkpointing follow the curve of the whole batch,
and two processes (`proctor train dpo` under torchrun) follow the curve of one at the same global batch."""

from __future__ import annotations

import json

import pytest
import torch
import yaml

from proctor.rl.dpo_losses import sigmoid_loss
from proctor.rl.dpo_step import DPOLoss, DPORow, pair_logprobs
from proctor.rl.online_dpo import OnlineDPOConfig, train_online_dpo
from proctor.rl.pairs import CandidatePair
from proctor.store import TrajectoryStore

#: curves that differ only by float rounding (the order of the sums): per-step losses within this
CURVE_TOL = 1e-4


def config(policy, scalar_prm_dir, out, **kw) -> dict:
    return {"policy": str(policy), "prm": str(scalar_prm_dir), "output_dir": str(out), "env": "household",
            "env_kwargs": {"max_steps": 2}, "tasks": 4, "agent": {"kind": "choice"}, "n_actions": 4, "epochs": 2,
            "batch_size": 4, "learning_rate": 1e-3, "device": "cpu", "progress": False, **kw}


def losses(metrics: dict) -> list[float]:
    return [s["loss"] for s in metrics["train"]["log"]]


@pytest.mark.parametrize("average", [False, True])
def test_dpo_loss_sums_the_pairs_and_rpos_term(tiny_model_dir, average):
    """Σ_pairs [−log σ(β·h) + α·(−log π(y_c)/|y_c|)], weight = the number of pairs, stats summed likewise."""
    from proctor.models import load

    model, _ = load(tiny_model_dir)
    pairs = [CandidatePair([5, 6, 7], [8, 9], [10], (True, True), "", "", (1.0, 0.0)),
             CandidatePair([11, 12], [13, 14, 15, 16], [17, 18], (True, True), "", "", (0.5, 0.0))]
    with torch.no_grad():
        pc, pr, _ = pair_logprobs(model, pairs, 0, average)
    ref_c, ref_r = pc - 0.5, pr + 0.25
    rows = [DPORow(p, float(c), float(r)) for p, c, r in zip(pairs, ref_c, ref_r, strict=True)]
    lengths = torch.tensor([2.0, 4.0])
    nll = -(pc * lengths if average else pc) / lengths
    dpo = sigmoid_loss(pc, pr, ref_c, ref_r, beta=0.1)
    loss = DPOLoss(0, average=average, rpo_alpha=2.0)
    assert loss.weight(rows) == 2
    with torch.no_grad():
        total, stats = loss(model, rows)
        plain, _ = DPOLoss(0, average=average)(model, rows)
    assert float(total) == pytest.approx(float((dpo + 2.0 * nll).sum()), abs=1e-5)
    assert float(plain) == pytest.approx(float(dpo.sum()), abs=1e-5)
    # h = 0.5 + 0.25 per pair: both right
    assert float(stats["margin"]) == pytest.approx(1.5, abs=1e-5) and float(stats["accuracy"]) == 2
    assert float(stats["chosen_logratio"]) == pytest.approx(1.0, abs=1e-5)
    assert float(stats["nll"]) == pytest.approx(float(nll.sum()), abs=1e-5)


def test_one_step_from_a_bf16_checkpoint_moves_the_weights(bf16_model_dir, scalar_prm_dir, tmp_path):
    """At the default learning rate 1e-6, one optimizer step on float32 master weights moves ≥ 90% of them."""
    from moved_weights import moved_fraction

    cfg = OnlineDPOConfig.model_validate({**config(bf16_model_dir, scalar_prm_dir, tmp_path / "run"), "epochs": 1,
                                          "batch_size": 64, "learning_rate": 1e-6})
    result = train_online_dpo(cfg)
    assert result.iterations[0]["train"]["steps"] == 1
    assert moved_fraction(bf16_model_dir, result.policy_dir) >= 0.9
    assert json.loads((result.policy_dir / "config.json").read_text())["dtype"] == "float32"


def test_accumulation_and_checkpointing_follow_the_whole_batchs_curve(tiny_model_dir, scalar_prm_dir, tmp_path):
    """G = 2 micro-batches per step, normalised by the step's pair count, is the step of the whole batch;
    gradient checkpointing (the concatenated rows instead of the shared-prompt pass) gives the same numbers."""
    def run(name: str, **kw) -> list[float]:
        cfg = OnlineDPOConfig.model_validate(config(tiny_model_dir, scalar_prm_dir, tmp_path / name, **kw))
        return losses(train_online_dpo(cfg).iterations[0])

    whole = run("whole")
    assert len(whole) >= 4
    assert run("accumulated", gradient_accumulation_steps=2) == pytest.approx(whole, abs=CURVE_TOL)
    assert run("checkpointed", gradient_checkpointing=True) == pytest.approx(whole, abs=CURVE_TOL)


@pytest.mark.slow
def test_two_processes_follow_the_single_process_curve(tiny_model_dir, scalar_prm_dir, tmp_path):
    """`proctor train dpo` on 2 CPU processes, batch 4 = 2 per process, two iterations: the per-step losses of
    one process at batch 4 (float rounding only); the main process alone samples and writes."""
    from torchrun_cli import torchrun_cli

    cfg = config(tiny_model_dir, scalar_prm_dir, tmp_path / "ddp", iterations=2, n_actions=6, learning_rate=1e-4)
    (tmp_path / "ddp.yaml").write_text(yaml.safe_dump(cfg))
    torchrun_cli(tmp_path, ["train", "dpo", str(tmp_path / "ddp.yaml")], 2, timeout=600)
    single = train_online_dpo(OnlineDPOConfig.model_validate({**cfg, "output_dir": str(tmp_path / "one")}))
    ddp = json.loads((tmp_path / "ddp/summary.json").read_text())["iterations"]
    for k, (two, one) in enumerate(zip(ddp, single.iterations, strict=True), 1):
        assert two["pairs"] == one["pairs"] and len(losses(two)) == len(losses(one)) >= 2
        assert losses(two) == pytest.approx(losses(one), abs=CURVE_TOL)
        pairs = (tmp_path / f"ddp/iter-{k}/pairs.jsonl").read_text().splitlines()
        assert len(pairs) == two["pairs"]  # written once
        assert len(TrajectoryStore.open(tmp_path / f"ddp/iter-{k}/rollouts").load()) == 4  # one process rolled out
    assert sorted(p.name for p in (tmp_path / "ddp/iter-2").iterdir()) == sorted(
        p.name for p in (tmp_path / "one/iter-2").iterdir())

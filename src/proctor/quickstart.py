"""`proctor quickstart`: one small, real AgentPRM loop on the built-in `household` env, offline, on a CPU.

1. build a tiny Llama backbone (64 wide, 2 layers by default) with a locally trained tokenizer (`models.build_tiny`);
2. roll out a mixed policy (the oracle expert, with a random action instead at a rate ε per step) on
   train and test tasks, K samples per task (`rollout`);
3. label every step with its Monte-Carlo Q, normalised to [0, 1] (`credit`, AgentPRM stage 1);
4. train a scalar PRM with soft BCE on the train targets (`prm`, AgentPRM stage 2);
5. score the held-out test trajectories in one forward pass each, before and after training, and compare
   with their MC-Q targets.

Every stage writes its artifact under `out/` (model, trajectory stores, targets, PRM, summary.json) and is
skipped when its artifact is already there, so an interrupted run resumes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from proctor.agents import ExpertAgent, MixtureAgent, RandomAgent
from proctor.credit import Sources, run_method
from proctor.credit.io import write_back, write_records
from proctor.trajectory import Trajectory, TrajectoryStore

ENV = "household"
TARGET = "mc-q"


@dataclass
class QuickstartConfig:
    """Sizes of the run; the defaults finish in a few minutes on 2 CPU cores."""

    train_tasks: int = 24
    test_tasks: int = 8
    samples: int = 8
    epsilon: float = 0.3
    max_steps: int = 20
    gamma: float = 0.95
    hidden_size: int = 64
    layers: int = 2
    prm_steps: int = 150
    prm_batch: int = 8
    learning_rate: float = 3e-3
    seed: int = 0


def mixed_policy(epsilon: float, seed: int) -> MixtureAgent:
    """The oracle expert, replaced by a uniformly random admissible action with probability ε at each step."""
    if not 0.0 <= epsilon <= 1.0:
        raise ValueError(f"epsilon must be in [0, 1], got {epsilon}")
    return MixtureAgent([(ExpertAgent("oracle"), 1.0 - epsilon), (RandomAgent(seed=seed), epsilon)], seed=seed)


def label_with_mc_q(trajs: Sequence[Trajectory], out: Path, gamma: float) -> tuple[list[Trajectory], dict]:
    """MC-Q targets for `trajs` (written to `out/targets.parquet` + summary) and the trajectories with
    `Step.targets["mc-q"]` filled."""
    result = run_method(TARGET, Sources(trajectories=list(trajs)), {"gamma": gamma})
    summary = write_records(result.records, out, {"method": TARGET, "gamma": gamma})
    return write_back(trajs, result.records), summary


def step_metrics(scores: Sequence[Sequence[float]], trajs: Sequence[Trajectory]) -> dict[str, float]:
    """How well per-step PRM scores match the MC-Q targets: Brier score, AUROC against MC-Q ≥ 0.5, and
    AUROC of the last step's score for the episode's success."""
    from proctor.prm.metrics import auroc, brier_score

    flat = [s for row in scores for s in row]
    q = [step.targets[TARGET] for t in trajs for step in t.steps]
    last = [row[-1] for row in scores]
    won = [float(t.success) for t in trajs]
    return {
        "brier_vs_mc_q": brier_score(flat, q),
        "auroc_step_mc_q>=0.5": auroc(flat, [float(v >= 0.5) for v in q]),
        "auroc_last_step_success": auroc(last, won),
    }


def run_quickstart(out: str | os.PathLike, cfg: QuickstartConfig | None = None,
                   report: Callable[[str, Any], None] | None = None) -> dict[str, Any]:
    """Run (or resume) the loop in `out`; returns the summary also written to `out/summary.json`.

    `report(stage, payload)` is called after each stage (the CLI prints tables from it)."""
    import torch

    from proctor.models import build_tiny
    from proctor.prm.config import DataSection, ModelSection, PRMTrainConfig
    from proctor.prm.model import ProcessRewardModel
    from proctor.prm.scoring import PRMScorer
    from proctor.prm.trainer import train_prm
    from proctor.rollout import RolloutConfig, run_rollout

    cfg = cfg or QuickstartConfig()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    report = report or (lambda stage, payload: None)
    summary: dict[str, Any] = {"config": asdict(cfg)}

    model_dir = out / "tiny-model"
    if not (model_dir / "config.json").exists():
        build_tiny(model_dir, hidden_size=cfg.hidden_size, layers=cfg.layers, seed=cfg.seed)
    report("model", model_dir)

    policy = mixed_policy(cfg.epsilon, cfg.seed)
    labelled: dict[str, list[Trajectory]] = {}
    for split, n_tasks in (("train", cfg.train_tasks), ("test", cfg.test_tasks)):
        result = run_rollout(RolloutConfig(env=ENV, out=out / "rollouts" / split, split=split, tasks=n_tasks,
                                           samples=cfg.samples, batch=16, seed=cfg.seed,
                                           env_kwargs={"max_steps": cfg.max_steps}), agent=policy)
        report(f"rollout:{split}", result.summary)
        summary[f"rollout_{split}"] = result.summary.to_dict()
        trajs = [t for t in result.store if t.task_id in set(result.task_ids)]
        labelled[split], targets_summary = label_with_mc_q(trajs, out / "targets" / split, cfg.gamma)
        summary[f"targets_{split}"] = targets_summary
        report(f"targets:{split}", targets_summary)
        store_dir = out / "targets" / split / "trajectories"
        if not store_dir.exists():
            with TrajectoryStore(store_dir, meta={"targets": TARGET}) as store:
                store.extend(labelled[split])

    prm_dir = out / "prm"
    train_cfg = PRMTrainConfig(
        model=ModelSection(backbone=str(model_dir), head="scalar", dtype="float32"),
        loss="bce",
        data=DataSection(train=str(out / "targets" / "train" / "trajectories"), format="trajectories",
                         target=TARGET),
        training={"output_dir": str(prm_dir), "max_steps": cfg.prm_steps,
                  "per_device_train_batch_size": cfg.prm_batch, "learning_rate": cfg.learning_rate,
                  "lr_scheduler_type": "cosine", "warmup_steps": max(1, cfg.prm_steps // 10),
                  "logging_steps": max(1, cfg.prm_steps // 8), "save_strategy": "no", "use_cpu": True},
        seed=cfg.seed,
    )
    test = labelled["test"]
    torch.manual_seed(cfg.seed)
    before = PRMScorer(ProcessRewardModel.build(str(model_dir), "scalar", sigmoid=True, dtype="float32"))
    summary["prm_before_training"] = step_metrics(before.score_trajectories(test), test)
    if not (prm_dir / "train_log.json").exists():
        _, _, trainer = train_prm(train_cfg)
        losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
        (prm_dir / "train_log.json").write_text(json.dumps({"losses": losses}, indent=2))
    losses = json.loads((prm_dir / "train_log.json").read_text())["losses"]
    summary["prm_train_loss"] = {"first": losses[0], "last": losses[-1], "logged": losses}
    report("prm", summary["prm_train_loss"])
    after = PRMScorer(ProcessRewardModel.from_pretrained(str(prm_dir)))
    summary["prm_after_training"] = step_metrics(after.score_trajectories(test), test)
    report("eval", {"before": summary["prm_before_training"], "after": summary["prm_after_training"]})
    (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True, default=str))
    return summary

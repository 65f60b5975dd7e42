"""Online filtered behaviour cloning (ArCHer's online baseline, arXiv 2402.19446 §6; docs/methods.md §9), readable
top to bottom in `train_filtered_bc`. One iteration k = 1..K:

1. rollouts: `rollouts_per_task` episodes per task of the current policy (generated ids on every step);
2. returns R: the sum of the env's rewards (`returns: reward`, twenty_questions' −20..0), or the outcome
   (`success` 0/1, `score`);
3. the trajectories to clone (`proctor.rl.td.TRAJECTORY_FILTERS`): R ≥ the `keep_value`-th percentile of every
   return so far (`keep: percentile`, ArCHer's 90; `pool: iteration` uses this iteration's returns only), of
   the top `keep_value` fraction (`top-fraction`), or R ≥ `keep_value` (`threshold`);
4. `epochs` shuffled passes of SFT on their steps (one `proctor.training.fit`, `batch_size` steps per optimizer
   step): each step's prompt ids and the ids the policy generated (never a re-tokenization), the loss the mean
   NLL of the batch's generated tokens, L = −(1/|M|) Σ_{(b,j)∈M} log π(x_{b,j} | x_{b,<j}) (`proctor.rl.sft.SFTLoss`);
5. the iterate is saved (`iter-k/policy`, `iter-k/metrics.json`).

Under torchrun the main process rolls out and broadcasts the trajectories; every process trains on its share of
each batch, and only the main process writes.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch
from pydantic import Field

from proctor.credit.outcome import outcome
from proctor.rl.iteration_log import record_iteration, stage_seconds, write_summary
from proctor.rl.on_policy import sample_rollouts
from proctor.rl.online_config import OnlineConfig, start_run
from proctor.rl.served_policy import generation_server
from proctor.rl.sft import SFTLoss
from proctor.rl.sft_data import Example
from proctor.rl.step_rows import step_row
from proctor.rl.td import TRAJECTORY_FILTERS
from proctor.training.engine import fit, shuffled, shuffled_batches
from proctor.training.policy import save_trained
from proctor.trajectory import Trajectory


class FilteredBCConfig(OnlineConfig):
    """Online filtered BC (see module docstring); one YAML for `proctor train fbc`."""

    returns: Literal["reward", "success", "score"] = Field(
        default="reward", description="R: the sum of the env's rewards, or the outcome")
    keep: Literal["percentile", "top-fraction", "threshold"] = Field(
        default="percentile", description="the filter (`proctor.rl.td.TRAJECTORY_FILTERS`): R ≥ a percentile of "
        "the pool, the top fraction of this iteration's, or R ≥ a threshold")
    keep_value: float = Field(default=90.0, description="the percentile, the fraction or the threshold")
    pool: Literal["all", "iteration"] = Field(
        default="all", description="percentile of all returns so far (ArCHer) or of this iteration's")
    epochs: int = Field(default=1, ge=1, description="SFT passes over each iteration's kept steps")
    batch_size: int = Field(default=8, ge=1, description="steps per optimizer step (the global batch)")


@dataclass
class FilteredBCResult:
    policy_dir: Path
    iterations: list[dict[str, Any]] = field(default_factory=list)


def train_filtered_bc(cfg: FilteredBCConfig) -> FilteredBCResult:
    """Run `cfg.iterations` iterations of online filtered BC (see module docstring); returns the last iterate."""
    policy, tokenizer, _ = start_run(cfg)
    current, history, seen = cfg.policy, [], []
    with generation_server(cfg, policy) as served:
        for k in range(1, cfg.iterations + 1):
            folder = cfg.output_dir / f"iter-{k}"
            clock = {"start": time.monotonic()}
            # 1. rollouts of the current policy, on the main process
            trajs, rollout = sample_rollouts(cfg, k, policy, tokenizer, current, folder / "rollouts",
                                             served=served)
            clock["rollout"] = time.monotonic()
            # 2-3. returns, and the trajectories whose return is high enough
            returns = torch.tensor([trajectory_return(t, cfg.returns) for t in trajs], dtype=torch.float64)
            seen += returns.tolist()
            pool = torch.tensor(seen, dtype=torch.float64) if cfg.pool == "all" else returns
            keep = TRAJECTORY_FILTERS[cfg.keep](returns, cfg.keep_value, pool).tolist()
            kept = [t for t, k_ in zip(trajs, keep, strict=True) if k_]
            # 4. SFT on the kept steps' generated ids
            examples = [clone_example(tokenizer, t, i, cfg) for t in kept for i in range(len(t.steps))]
            steps, trainer = clone(cfg, k, policy, examples, tokenizer.pad_token_id)
            clock["train"] = time.monotonic()
            # 5. save the iterate (the main process writes)
            current = str(save_trained(policy, tokenizer, folder / "policy", cfg.save_dtype, trainer))
            clock["save"] = time.monotonic()
            metrics = {"iteration": k, "rollout": rollout, "mean_return": float(returns.mean()),
                       "kept": len(kept), "examples": len(examples),
                       "train": {"steps": len(steps), "mean_loss": sum(steps) / len(steps) if steps else None,
                                 "log": steps},
                       "wall_s": stage_seconds(clock)}
            record_iteration(folder, metrics, history)
    write_summary(cfg, current, history)
    return FilteredBCResult(Path(current), history)


# -- the stages, in the order train_filtered_bc runs them ---------------------------------------------------
def trajectory_return(traj: Trajectory, source: str) -> float:
    return traj.total_reward if source == "reward" else outcome(traj, source)


def clone_example(tokenizer: Any, traj: Trajectory, t: int, cfg: FilteredBCConfig) -> Example:
    """Step t as an SFT example: its prompt ids (mask 0) and the ids the policy generated (mask 1)."""
    row = step_row(tokenizer, traj, t, cfg.prompt)
    return Example(row.prompt_ids + row.completion_ids, [0] * len(row.prompt_ids) + [1] * len(row.completion_ids),
                   f"{traj.id}#{t}")


def clone(cfg: FilteredBCConfig, k: int, policy: torch.nn.Module, examples: Sequence[Example], pad_id: int
          ) -> tuple[list[float], Any]:
    """`epochs` shuffled passes of the SFT loss over `examples` (one `fit`); (the loss of every step, the
    Trainer; None without examples)."""
    if not examples:
        return [], None
    batches, epochs = shuffled_batches(examples, cfg.batch_size, cfg.epochs,
                                       shuffled(random.Random(cfg.seed * 1_000_003 + k)), cfg)
    if not batches:
        return [], None
    result = fit(policy, batches, SFTLoss(pad_id, 0.0), cfg, cfg.output_dir / "trainer", label="fbc train",
                 epochs=epochs)
    return [r["loss"] for r in result.curve], result.trainer

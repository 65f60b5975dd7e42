"""Online DPO against a process reward model (AgentPRM stage 3; docs/methods.md §9).

One iteration k = 1..K, readable top to bottom in `train_online_dpo`:

1. states: the current policy's rollouts on the env's tasks (`proctor.rollout.run_rollout`), or, for the
   first iteration, a given trajectory store of them (`states_from`); every step's prefix is a state,
   `max_states` of them are drawn at random;
2. candidates: the policy proposes N ≥ 2 actions per state (its agent config: `hf`, `choice`, ...), of which
   the distinct ones are kept (first draw of each; a state whose draws are all one action is a tie);
3. preferences: the PRM scores each (state, action) (`PRMScorer.score_actions`, the state's KV cache shared
   by the candidates); chosen = best, rejected = worst (`pairing: best-rest`: every other candidate the best
   beats), an unfinished generation's score lowered by `unfinished_penalty`, ties skipped
   (`proctor.credit.preference.margin_pairs` of `proctor.rl.pairs.adjusted_scores`);
4. tokens: the candidate's own generated ids when it carries them (never a re-tokenization), else the one
   renderer's assistant reply for the action (`proctor.rl.pairs.candidate_tokens`);
5. reference: the previous iterate, i.e. the policy as it is before this iteration's first update: its
   log-probs on the pairs are computed once (`proctor.rl.dpo_step.reference_logprobs`, a frozen copy's
   numbers without a second model);
6. optimisation, on the training engine (`proctor.training.fit`, a fresh AdamW each iteration): `epochs`
   passes over the pairs, shuffled, in global batches of `batch_size`, minimising the batch mean of
   L = L_loss(h) + α·(−log π(y_c)/|y_c|), h the log-ratio margin, L_loss the sigmoid (DPO), IPO or REBEL loss
   with β, α = `rpo_alpha` (`proctor.rl.dpo_step.DPOLoss`);
7. the iterate is saved as a `save_pretrained` folder (`iter-k/policy`, safetensors; LoRA merged, adapters in
   `adapter/`), with `iter-k/metrics.json` and `iter-k/pairs.jsonl`.

Under torchrun / accelerate launch, stages 1-5 run on the main process and their result is broadcast
(`proctor.training.distributed`); each process trains on its share of every batch, and only the main process
writes files.

Layout of `output_dir`: `iter-k/{rollouts/, pairs.jsonl, metrics.json, policy/}` and `summary.json`. Agents of
kind `hf` and `choice` run on the in-memory policy; other kinds are built on the current iterate's folder.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Literal

import torch
from pydantic import Field

from proctor.agents.base import Agent
from proctor.credit.preference import margin_pairs
from proctor.prm.protocol import StepScorer
from proctor.prm.ref import PRMRef, PRMServer
from proctor.progress import StageProgress
from proctor.prompts import Prefix, PromptConfig, prefix_at
from proctor.rl.dpo_step import DPOLoss, DPORow, reference_logprobs
from proctor.rl.iteration_log import record_iteration, stage_seconds, write_summary
from proctor.rl.on_policy import make_sampler, rollout_policy
from proctor.rl.online_config import OnlineConfig, start_run
from proctor.rl.pairs import CandidatePair, adjusted_scores, candidate_tokens, prompt_ids
from proctor.rl.served_policy import ServedPolicy, generation_server
from proctor.store import TrajectoryStore
from proctor.training.distributed import is_main_process, on_main_then_broadcast
from proctor.training.engine import fit, shuffled, shuffled_batches
from proctor.training.policy import save_trained
from proctor.training.precision import autocast
from proctor.trajectory import Trajectory

log = logging.getLogger(__name__)


class OnlineDPOConfig(OnlineConfig):
    """Online DPO against a PRM (see module docstring); one YAML file for `proctor train dpo`. The policy, env,
    rollout and optimisation fields are `OnlineConfig`'s (`learning_rate` 1e-6, `batch` 8 envs, ...)."""

    prm: Path = Field(description="a PRM folder (`proctor prm train`)")
    prm_server: PRMServer = None
    # states
    states_from: Path | None = Field(default=None, description="trajectory store of the policy's rollouts, "
                                     "used instead of rolling out in the first iteration")
    max_states: int | None = Field(default=None, ge=1, description="states drawn per iteration (None: all)")
    # candidates and preferences
    n_actions: int = Field(default=4, ge=2, description="actions sampled per state")
    prm_prompt: PromptConfig | None = Field(default=None, description="the PRM's renderer (None: its default)")
    unfinished_penalty: float = Field(default=0.0, ge=0, description="subtracted from the PRM score of a "
                                      "generation that ran out of tokens")
    margin: float = Field(default=0.0, ge=0, description="pairs need best − worst score > margin (ties skipped)")
    pairing: Literal["best-worst", "best-rest"] = Field(default="best-worst", description="pairs per state: best "
                                                        "vs worst, or best vs every candidate it beats")
    max_length: int | None = Field(default=None, ge=2, description="skip a state whose prompt + longest paired "
                                   "candidate exceeds this many tokens (all its pairs; counted as too_long)")
    # loss and its passes
    loss: Literal["sigmoid", "ipo", "rebel"] = Field(default="sigmoid", description="DPO, IPO, or REBEL (the "
                                                     "pairs' PRM score margin as the regression target)")
    beta: float = Field(default=0.1, gt=0, description="β: the strength of the pull towards the reference")
    label_smoothing: float = Field(default=0.0, ge=0, lt=0.5, description="ε of conservative DPO (sigmoid only)")
    rpo_alpha: float = Field(default=0.0, ge=0, description="weight α of RPO's NLL term on the chosen action "
                             "(`proctor.rl.dpo_losses.chosen_nll`); 0: none")
    average_logprobs: bool | None = Field(default=None, description="per-token mean log-probs instead of "
                                          "sums (None: mean for ipo, sum for sigmoid, as TRL)")
    epochs: int = Field(default=1, ge=1, description="shuffled passes over each iteration's pairs")
    batch_size: int = Field(default=8, ge=1, description="pairs per optimizer step (the global batch, split "
                            "between the processes and the gradient accumulation steps)")

    @property
    def average(self) -> bool:
        return self.loss == "ipo" if self.average_logprobs is None else self.average_logprobs


class NoPreferencePairs(ValueError):
    """Every state of an iteration was a tie: the PRM did not prefer any of the policy's actions to another."""


@dataclass
class OnlineDPOResult:
    policy_dir: Path
    iterations: list[dict[str, Any]] = field(default_factory=list)


def train_online_dpo(cfg: OnlineDPOConfig) -> OnlineDPOResult:
    """Run `cfg.iterations` iterations of online DPO (see module docstring); returns the last iterate."""
    policy, tokenizer, device = start_run(cfg)
    scorer = PRMRef(prm=cfg.prm, prm_server=cfg.prm_server, device=device).open() if is_main_process() else None
    current, history = cfg.policy, []
    with generation_server(cfg, policy) as served:
        for k in range(1, cfg.iterations + 1):
            folder = cfg.output_dir / f"iter-{k}"
            # 1-5. states, pairs and their reference log-probs, on the main process
            rollout, collected, rows, clock = on_main_then_broadcast(
                partial(sample_pairs, cfg, k, policy, tokenizer, scorer, current, folder, device, served))
            # 6. DPO epochs over the pairs, on the engine
            order = shuffled(torch.Generator().manual_seed(cfg.seed * 1_000_003 + k))
            batches, epochs = shuffled_batches(rows, cfg.batch_size, cfg.epochs, order, cfg)
            if not batches:
                raise ValueError(f"iteration {k}: {len(rows)} pairs, fewer than processes × "
                                 "gradient_accumulation_steps")
            loss = DPOLoss(tokenizer.pad_token_id, cfg.loss, cfg.beta, cfg.label_smoothing, cfg.average,
                           cfg.rpo_alpha, shared_prompt=not cfg.gradient_checkpointing)
            fitted = fit(policy, batches, loss, cfg, folder / "trainer", label="dpo train", epochs=epochs)
            clock["train"] = time.monotonic()
            # 7. save the iterate (one process writes)
            current = str(save_trained(policy, tokenizer, folder / "policy", cfg.save_dtype, fitted.trainer))
            clock["save"] = time.monotonic()
            steps = fitted.curve
            metrics = iteration_metrics(k, rollout, collected, rows, batches, steps, clock)
            record_iteration(folder, metrics, history)
            if is_main_process():
                write_pairs(folder, [r.pair for r in rows])
            log.info("online DPO iteration %d: %d pairs, loss %.4f → %.4f", k, len(rows),
                     steps[0]["loss"], steps[-1]["loss"])
    write_summary(cfg, current, history)
    return OnlineDPOResult(Path(current), history)


def sample_pairs(cfg: OnlineDPOConfig, k: int, policy: torch.nn.Module, tokenizer: Any, scorer: StepScorer,
                 current: str, folder: Path, device: str, served: ServedPolicy | None = None
                 ) -> tuple[dict[str, Any], dict[str, Any], list[DPORow], dict[str, float]]:
    """Stages 1-5 of iteration k with the current policy: (rollout summary, pair counts, the pairs with their
    reference log-probs, stage clock marks); `served`: the run's vLLM server, if it samples there."""
    clock = {"start": time.monotonic()}
    sampler = make_sampler(cfg, policy, tokenizer, current, served)
    # 1. states from the current policy's rollouts
    trajs, rollout = policy_rollouts(cfg, k, sampler, current, folder / "rollouts")
    prefixes = sample_states(trajs, cfg.max_states, random.Random(cfg.seed * 1_000_003 + k))
    clock["rollout"] = time.monotonic()
    # 2-4. N actions per state, PRM scores, chosen = best, rejected = worst, their token ids
    pairs, collected = collect_pairs(cfg, prefixes, sampler, scorer, tokenizer)
    clock["pairs"] = time.monotonic()
    sampler.close()
    if not pairs:
        raise NoPreferencePairs(f"iteration {k}: no preference pairs from {len(prefixes)} states (every state was "
                                "a tie: the policy proposed actions scored within `margin`); raise n_actions or the "
                                "agent's temperature")
    # 5. reference = this iteration's starting weights (the previous iterate), under the training autocast
    with autocast(cfg.precision, device):
        ref_c, ref_r = reference_logprobs(policy, pairs, tokenizer.pad_token_id, cfg.batch_size, cfg.average)
    rows = [DPORow(p, c, r) for p, c, r in zip(pairs, ref_c.tolist(), ref_r.tolist(), strict=True)]
    return rollout, collected, rows, clock


# -- the stages, in the order sample_pairs runs them ---------------------------------------------------
def policy_rollouts(cfg: OnlineDPOConfig, k: int, sampler: Agent, current: str, out: Path
                    ) -> tuple[list[Trajectory], dict[str, Any]]:
    """Iteration k's trajectories of the current policy: `states_from` (k = 1), else fresh rollouts."""
    if k == 1 and cfg.states_from is not None:
        trajs = [t for t in TrajectoryStore.open(cfg.states_from).load()
                 if t.termination not in ("env_error", "agent_error") and t.steps]
        if not trajs:
            raise RuntimeError(f"{cfg.states_from}: no usable trajectories (all empty or ended in errors)")
        return trajs, {"states_from": str(cfg.states_from)}
    trajs, summary = rollout_policy(cfg, k, sampler, current, out, cfg.rollouts_per_task)
    return trajs, {"rollout": summary}


def sample_states(trajs: Sequence[Trajectory], max_states: int | None, rng: random.Random) -> list[Prefix]:
    """Every step's prefix (the state before its action), or `max_states` of them drawn at random."""
    where = [(i, t) for i, traj in enumerate(trajs) for t in range(len(traj.steps))]
    if max_states is not None and max_states < len(where):
        where = rng.sample(where, max_states)
    return [prefix_at(trajs[i], t) for i, t in where]


def collect_pairs(cfg: OnlineDPOConfig, prefixes: Sequence[Prefix], sampler: Agent, scorer: StepScorer,
                  tokenizer: Any) -> tuple[list[CandidatePair], dict[str, Any]]:
    """N actions per state from `sampler`, PRM scores of the distinct ones, and the state's pairs under
    `cfg.pairing` unless it is a tie (a state whose N draws are one action is a tie)."""
    pairs: list[CandidatePair] = []
    counts = {"states": len(prefixes), "ties": 0, "too_long": 0, "candidates": 0, "unfinished": 0}
    score_sum = 0.0
    with StageProgress("dpo pairs", total=len(prefixes), unit="states", enabled=cfg.progress) as bar:
        for start in range(0, len(prefixes), cfg.batch):
            chunk = prefixes[start:start + cfg.batch]
            for p in chunk:
                sampler.reset(p)
            for prefix, drawn in zip(chunk, sampler.act(chunk, n=cfg.n_actions), strict=True):
                cands = list({c.action: c for c in reversed(drawn)}.values())[::-1]  # first draw of each action
                if len(cands) < 2:  # every draw the same action: nothing to prefer
                    counts["ties"] += 1
                    continue
                counts["candidates"] += len(cands)
                scores = scorer.score_actions(prefix, [c.action for c in cands], cfg.prm_prompt)
                counts["unfinished"] += sum(not c.finished for c in cands)
                score_sum += sum(scores)
                adjusted = adjusted_scores(scores, [c.finished for c in cands], cfg.unfinished_penalty)
                picks = margin_pairs(adjusted, cfg.margin, cfg.pairing)
                if not picks:
                    counts["ties"] += 1
                    continue
                shared = prompt_ids(tokenizer, prefix, cfg.prompt)
                tokens = {i: candidate_tokens(tokenizer, prefix, cands[i], cfg.prompt, shared)[1:]
                          for i in sorted({i for pick in picks for i in pick})}
                if cfg.max_length and len(shared) + max(len(ids) for ids, _ in tokens.values()) > cfg.max_length:
                    counts["too_long"] += 1
                    continue
                for best, worst in picks:
                    (chosen, exact_c), (rejected, exact_r) = tokens[best], tokens[worst]
                    pairs.append(CandidatePair(
                        shared, chosen, rejected, (exact_c, exact_r), cands[best].action, cands[worst].action,
                        (adjusted[best], adjusted[worst]),
                        {"task_id": prefix.task_id, "sample": prefix.sample, "step": prefix.step_index,
                         "finished": [cands[best].finished, cands[worst].finished]}))
            bar.advance(len(chunk), stats=f"{len(pairs)} pairs, {counts['ties']} ties")
    counts["mean_prm_score"] = score_sum / counts["candidates"] if counts["candidates"] else None
    return pairs, counts


def iteration_metrics(k: int, rollout: dict[str, Any], collected: dict[str, Any], rows: Sequence[DPORow],
                      batches: Sequence[Sequence[DPORow]], steps: Sequence[dict[str, Any]],
                      clock: dict[str, float]) -> dict[str, Any]:
    """What `metrics.json` records about iteration k: the pairs, the engine's per-step means (`train.log`), stage
    wall times."""
    pairs = [r.pair for r in rows]
    exact = sum(e for p in pairs for e in p.exact)
    last = steps[-max(1, len(steps) // 10):]

    def mean(key: str, rows: Sequence[dict[str, Any]]) -> float:
        return sum(r[key] for r in rows) / len(rows)

    return {
        "iteration": k,
        **rollout,
        "pairs": len(pairs),
        **collected,
        "exact_token_fraction": exact / (2 * len(pairs)),
        "mean_chosen_score": sum(p.scores[0] for p in pairs) / len(pairs),
        "mean_rejected_score": sum(p.scores[1] for p in pairs) / len(pairs),
        "train": {
            "steps": len(steps),
            "tokens": sum(r.pair.tokens for batch in batches for r in batch),
            "loss_first": steps[0]["loss"],
            "loss_last_10pct": mean("loss", last),
            "nll_last_10pct": mean("nll", last),
            "chosen_logratio_last_10pct": mean("chosen_logratio", last),
            "rejected_logratio_last_10pct": mean("rejected_logratio", last),
            "accuracy_last_10pct": mean("accuracy", last),
            "log": list(steps),
        },
        "wall_s": stage_seconds(clock),
    }


def write_pairs(folder: Path, pairs: Sequence[CandidatePair]) -> None:
    """`folder/pairs.jsonl`: one line per pair (texts, scores, ids)."""
    with (folder / "pairs.jsonl").open("w") as f:
        for p in pairs:
            f.write(json.dumps({**p.meta, "chosen": p.chosen, "rejected": p.rejected, "scores": list(p.scores),
                                "exact": list(p.exact), "prompt_tokens": len(p.prompt_ids),
                                "chosen_ids": p.chosen_ids, "rejected_ids": p.rejected_ids}) + "\n")

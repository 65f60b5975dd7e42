"""Best-of-N distillation against a PRM: train a `choice` policy to act as per-step best-of-N(π, Q) acts, without
its N samples and N PRM scores per step (the target of BOND, Sessa et al. 2024, arXiv 2407.14622, here exact:
the actions at a state are a finite list). Readable top to bottom in `train_bon_distill`:

1. states: `max_states` step prefixes drawn from a trajectory store of the proposing policy π's episodes
   (`states_from`; in `proctor run`, π_k's rollouts of the iteration), those with two or more admissible actions;
2. targets: π's distribution p over each state's admissible actions (its `choice` agent at T = 1) and the PRM's
   scores Q of the same actions give the law of best-of-N's action (`proctor.stats.best_of_n_probabilities`):

       π_N(a) = F(a)^N − F⁻(a)^N,   F(a) = Σ_{b: Q(b) ≤ Q(a)} p(b),   F⁻(a) = Σ_{b: Q(b) < Q(a)} p(b);

3. the student starts from `init` (default: π itself; a likelihood PRM's folder is a causal LM over the same
   prompts whose ranking of the actions is Q's, `proctor.prm.likelihood`; float32 weights unless `precision:
   bf16-pure`), and `epochs` passes of AdamW on the training engine (`proctor.training.fit`, batches of
   `batch_size` states, `DistilLoss`) minimise the batch mean of the cross-entropy of its choice distribution π_θ(a | s) = softmax_a log π_θ(reply(a) | s) to the target,

       H(π_N, π_θ) = −Σ_a π_N(a) log π_θ(a | s)     (`soft_cross_entropy`),

   each state's prompt and all its actions in one forward pass (`proctor.models.shared_prefix`);
4. the student is saved (`output_dir/policy`, safetensors) with `output_dir/metrics.json` (states used and drawn,
   episodes left out for errors, loss curve, seconds per stage).

Under torchrun / accelerate launch, stages 1-2 run on the main process and are broadcast; each process trains
on its share of every batch, and only the main process writes.

A student equal to π_N at every state acts like best-of-N in distribution. Needs an env that lists its admissible
actions (the `choice` agent ranks them).
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import torch
from pydantic import Field

from proctor.agents.choice import ChoiceAgent, choice_probabilities
from proctor.agents.registry import agent_config
from proctor.models.shared_prefix import shared_prefix_token_logprobs
from proctor.prm.protocol import StepScorer
from proctor.prm.ref import PRMRef, PRMServer
from proctor.progress import StageProgress
from proctor.prompts import Prefix, PromptConfig
from proctor.rl.online_dpo import sample_states
from proctor.rl.served_policy import GenerationBackend, ServedPolicy
from proctor.stats import best_of_n_probabilities
from proctor.store import TrajectoryStore
from proctor.training.config import OptimizationConfig
from proctor.training.distributed import barrier, fresh_output_dir, is_main_process, on_main_then_broadcast
from proctor.training.engine import fit
from proctor.training.policy import save_trained
from proctor.training.precision import resolve_device, weights_dtype

METRICS_FILE = "metrics.json"

log = logging.getLogger(__name__)


class BonDistillConfig(OptimizationConfig):
    """Best-of-N distillation (see module docstring); one YAML for `proctor train bon-distill`. The
    optimisation fields are `OptimizationConfig`'s (AdamW at `learning_rate` 5e-5 here, constant).

    Example:

        policy: runs/sft                   # π: proposes (its choice distribution at T = 1)
        prm: runs/lik-prm                  # Q: picks
        init: runs/lik-prm                 # the student starts from the PRM's LM (default: the policy)
        states_from: runs/rollouts         # π's episodes; their steps are the states
        prompt: {history: 2, memory: true, show_admissible: false, system: ""}
        output_dir: runs/bon-distill
    """

    policy: str = Field(description="π, the proposing policy: a causal LM folder or hub name")
    prm: str = Field(description="Q: any PRM folder (`proctor.prm.ref.PRMRef`)")
    prm_server: PRMServer = None
    init: str | None = Field(default=None, description="the student's starting weights (None: the policy)")
    states_from: Path = Field(description="a trajectory store of π's episodes (their steps are the states)")
    output_dir: Path = Field(description="a new or empty folder")
    prompt: PromptConfig = Field(default_factory=PromptConfig, description="the choice agent's prompt")
    generation: GenerationBackend = Field(default_factory=GenerationBackend, description="where π's proposals are "
                                         "scored: in memory, or by a managed vLLM server serving `policy` "
                                         "(prompt_logprobs; proctor.rl.served_policy)")
    max_states: int | None = Field(default=2000, ge=1, description="states drawn at random (None: every step)")
    n: int = Field(default=8, ge=1, description="N of the best-of-N whose action law is the target")
    epochs: int = Field(default=2, ge=1, description="passes over the states")
    batch_size: int = Field(default=8, ge=1, description="states per optimizer step (the global batch, split "
                            "between the processes and the gradient accumulation steps)")
    learning_rate: float = Field(default=5e-5, gt=0, description="peak learning rate of AdamW")


@dataclass
class Target:
    """One state: its prompt ids, each admissible action's reply ids, and π_N over those actions."""

    prompt: list[int]
    replies: list[list[int]]
    probs: list[float]


def soft_cross_entropy(log_probs: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """H(t, π) = −Σ_a t(a) log π(a) for one state's target t and log-probabilities log π (1-D, same length)."""
    return -(target * log_probs).sum()


def train_bon_distill(cfg: BonDistillConfig) -> Path:
    """Distil best-of-N(π, Q) into a student (see module docstring); returns the student's folder."""
    out = Path(cfg.output_dir)
    fresh_output_dir(out)
    torch.manual_seed(cfg.seed)
    device = resolve_device(cfg.device)
    # the student, from `init`, in float32 (bf16 for precision bf16-pure)
    student = ChoiceAgent(cfg.init or cfg.policy, prompt=cfg.prompt, device=device,
                          dtype=weights_dtype(cfg.precision))
    # 1-2. states, π's p and Q's scores → π_N at every state, and the epochs' order: on the main process
    start = time.monotonic()
    sampled = on_main_then_broadcast(partial(sample_targets, cfg, student, device))
    clock = {"start": start, "targets": time.monotonic()}
    # 3. the student towards π_N, on the engine
    batches = [[sampled.targets[j] for j in order[i:i + cfg.batch_size]]
               for order in sampled.orders for i in range(0, len(order), cfg.batch_size)]
    fitted = fit(student.model, batches, DistilLoss(student.pad_id), cfg, out / "trainer",
                 label="best-of-n distillation")
    clock["train"] = time.monotonic()
    # 4. save (one process writes)
    policy_dir = save_trained(student.model, student.tokenizer, out / "policy", cfg.save_dtype, fitted.trainer)
    if is_main_process():
        targets = sampled.targets
        metrics = {"states": len(targets), **sampled.counts,
                   "mean_top_target": round(sum(max(t.probs) for t in targets) / len(targets), 4),
                   "curve": [{"step": r["step"], "loss": round(r["loss"], 5)} for r in fitted.curve],
                   "seconds": {"targets": round(clock["targets"] - clock["start"], 1),
                               "train": round(clock["train"] - clock["targets"], 1)},
                   "config": cfg.model_dump(mode="json")}
        (out / METRICS_FILE).write_text(json.dumps(metrics, indent=2))
    barrier()
    return policy_dir


@dataclass
class Sampled:
    """What the main process computes and broadcasts: the targets, each epoch's order of them, the counts
    `metrics.json` records."""

    targets: list[Target]
    orders: list[list[int]]
    counts: dict[str, int]


def sample_targets(cfg: BonDistillConfig, student: ChoiceAgent, device: str) -> Sampled:
    """Stages 1-2: π_N at states drawn from `cfg.states_from`, and the epochs' orders, both from one
    `random.Random(cfg.seed)` sequence. The proposer is the student itself when there is no `init`."""
    rng = random.Random(cfg.seed)
    stored = TrajectoryStore.open(cfg.states_from).load()
    trajs = [t for t in stored if t.steps and t.termination not in ("env_error", "agent_error")]
    if len(trajs) < len(stored):
        log.warning("%s: %d of %d episodes left out (no steps, or ended in an env or agent error)",
                    cfg.states_from, len(stored) - len(trajs), len(stored))
    sampled = sample_states(trajs, cfg.max_states, rng)
    states = [p for p in sampled if len(p.admissible_actions or []) > 1]  # one action: nothing to choose
    if not states:
        raise ValueError(f"{cfg.states_from}: no step with two or more admissible actions (best-of-N distillation "
                         "needs an env that lists its actions)")
    server = (ServedPolicy(cfg.generation, cfg.policy, lora=False, log_file=Path(cfg.output_dir) / "vllm.log")
              if cfg.generation.engine == "vllm" else nullcontext())
    with server as served:  # stopped when the targets are made, or on any error
        if served is not None:
            served.follow(cfg.policy)
            proposer = agent_config(served.agent_config({"kind": "choice", "model": cfg.policy,
                                                         "prompt": cfg.prompt.model_dump(mode="json")})).build()
        else:
            proposer = student if cfg.init is None else ChoiceAgent(cfg.policy, prompt=cfg.prompt, device=device)
        if student.tokenizer.get_vocab() != proposer.tokenizer.get_vocab():
            raise ValueError(f"init: {cfg.init} has another tokenizer than policy {cfg.policy}; the student learns on "
                             "the policy's token ids, so it must share its tokenizer")
        scorer = PRMRef(prm=cfg.prm, prm_server=cfg.prm_server, device=device).open()
        targets = best_of_n_targets(proposer, scorer, states, cfg.n, cfg.progress)
    orders = [rng.sample(range(len(targets)), len(targets)) for _ in range(cfg.epochs)]
    return Sampled(targets, orders, {"sampled_states": len(sampled), "episodes": len(stored),
                                     "episodes_left_out": len(stored) - len(trajs)})


def best_of_n_targets(proposer: ChoiceAgent, scorer: StepScorer, states: Sequence[Prefix], n: int, progress: bool = True,
                      chunk: int = 50) -> list[Target]:
    """π_N at each state from the proposer's choice distribution (T = 1) and the PRM's scores."""
    out = []
    with StageProgress("best-of-n targets", total=len(states), unit="states", enabled=progress) as bar:
        for start in range(0, len(states), chunk):
            part = states[start:start + chunk]
            scored = proposer.score(part)
            scores = scorer.score_action_groups(part, [[c.action for c in cands] for cands in scored])
            for prompt, cands, q in zip(proposer.prompt_ids(part), scored, scores, strict=True):
                p = choice_probabilities([c.meta["choice_logprob"] for c in cands], 1.0)
                out.append(Target(prompt, [list(c.token_ids) for c in cands], best_of_n_probabilities(p, q, n)))
            bar.advance(len(part))
    return out


def choice_log_probs(model: torch.nn.Module, targets: Sequence[Target], pad_id: int) -> list[torch.Tensor]:
    """log π_θ(a | s) over each state's actions: the log-softmax of the replies' summed token log-probs."""
    rows = shared_prefix_token_logprobs(model, [t.prompt for t in targets],
                                        [(i, r) for i, t in enumerate(targets) for r in t.replies], pad_id)
    out, k = [], 0
    for t in targets:
        out.append(torch.log_softmax(torch.stack([row.float().sum() for row in rows[k:k + len(t.replies)]]), dim=0))
        k += len(t.replies)
    return out


class DistilLoss:
    """The distillation loss as the engine's `RowLoss` over states (`Target`s): weight = the number of states,
    a call returns Σ_s H(π_N(·|s), π_θ(·|s)) (`soft_cross_entropy`)."""

    def __init__(self, pad_id: int):
        self.pad_id = pad_id

    def weight(self, rows: Sequence[Target]) -> float:
        return float(len(rows))

    def __call__(self, model: torch.nn.Module, rows: Sequence[Target]) -> tuple[torch.Tensor, dict[str, Any]]:
        losses = [soft_cross_entropy(lp, torch.tensor(t.probs, device=lp.device))
                  for t, lp in zip(rows, choice_log_probs(model, rows, self.pad_id), strict=True)]
        return torch.stack(losses).sum(), {}

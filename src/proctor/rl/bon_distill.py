"""Best-of-N distillation against a PRM: train a `choice` policy to act as per-step best-of-N(π, Q) acts, without
its N samples and N PRM scores per step (the target of BOND, Sessa et al. 2024, arXiv 2407.14622, here exact:
the actions at a state are a finite list). Readable top to bottom in `train_bon_distill`:

1. states: `max_states` step prefixes drawn from a trajectory store of the proposing policy π's episodes
   (`states_from`; in `proctor run`, π_k's rollouts of the iteration), those with two or more admissible actions;
2. targets: π's distribution p over each state's admissible actions (its `choice` agent at T = 1) and the PRM's
   scores Q of the same actions give the law of best-of-N's action (`proctor.stats.best_of_n_probabilities`):

       π_N(a) = F(a)^N − F⁻(a)^N,   F(a) = Σ_{b: Q(b) ≤ Q(a)} p(b),   F⁻(a) = Σ_{b: Q(b) < Q(a)} p(b);

3. the student starts from `init` (default: π itself; a likelihood PRM's folder is a causal LM over the same
   prompts whose ranking of the actions is Q's, `proctor.prm.likelihood`), and `epochs` passes of AdamW minimise
   the cross-entropy of its choice distribution π_θ(a | s) = softmax_a log π_θ(reply(a) | s) to the target,

       H(π_N, π_θ) = −Σ_a π_N(a) log π_θ(a | s)     (`soft_cross_entropy`),

   each state's prompt and all its actions in one forward pass (`proctor.models.shared_prefix`);
4. the student is saved (`output_dir/policy`, safetensors) with `output_dir/metrics.json` (states used and drawn,
   episodes left out for errors, loss curve, seconds per stage).

A student equal to π_N at every state acts like best-of-N in distribution. Needs an env that lists its admissible
actions (the `choice` agent ranks them).
"""

from __future__ import annotations

import json
import logging
import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from pydantic import BaseModel, ConfigDict, Field

from proctor.agents.choice import ChoiceAgent, choice_probabilities
from proctor.models.shared_prefix import shared_prefix_token_logprobs
from proctor.prm.likelihood import open_scorer
from proctor.progress import StageProgress
from proctor.prompts import Prefix, PromptConfig
from proctor.rl.online_dpo import sample_states
from proctor.stats import best_of_n_probabilities
from proctor.trajectory import TrajectoryStore

METRICS_FILE = "metrics.json"

log = logging.getLogger(__name__)


class BonDistillConfig(BaseModel):
    """Best-of-N distillation (see module docstring); one YAML for `proctor train bon-distill`.

    Example:

        policy: runs/sft                   # π: proposes (its choice distribution at T = 1)
        prm: runs/lik-prm                  # Q: picks
        init: runs/lik-prm                 # the student starts from the PRM's LM (default: the policy)
        states_from: runs/rollouts         # π's episodes; their steps are the states
        prompt: {history: 2, memory: true, show_admissible: false, system: ""}
        output_dir: runs/bon-distill
    """

    model_config = ConfigDict(extra="forbid")

    policy: str = Field(description="π, the proposing policy: a causal LM folder or hub name")
    prm: str = Field(description="Q: any PRM folder `open_scorer` reads")
    init: str | None = Field(default=None, description="the student's starting weights (None: the policy)")
    states_from: Path = Field(description="a trajectory store of π's episodes (their steps are the states)")
    output_dir: Path = Field(description="a new or empty folder")
    prompt: PromptConfig = Field(default_factory=PromptConfig, description="the choice agent's prompt")
    max_states: int | None = Field(default=2000, ge=1, description="states drawn at random (None: every step)")
    n: int = Field(default=8, ge=1, description="N of the best-of-N whose action law is the target")
    epochs: int = Field(default=2, ge=1)
    batch_size: int = Field(default=8, ge=1, description="states per optimizer step")
    learning_rate: float = Field(default=5e-5, gt=0)
    weight_decay: float = Field(default=0.0, ge=0)
    max_grad_norm: float | None = Field(default=1.0, gt=0)
    dtype: str | None = None
    device: str | None = None
    seed: int = 0
    progress: bool = True


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
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out}: output_dir is not empty; choose a new folder")
    torch.manual_seed(cfg.seed)
    rng, clock = random.Random(cfg.seed), {"start": time.monotonic()}
    # 1. states from π's episodes
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
    proposer = ChoiceAgent(cfg.policy, prompt=cfg.prompt, device=cfg.device, dtype=cfg.dtype)
    student = proposer if cfg.init is None else ChoiceAgent(cfg.init, prompt=cfg.prompt, device=cfg.device,
                                                             dtype=cfg.dtype)
    if student.tokenizer.get_vocab() != proposer.tokenizer.get_vocab():
        raise ValueError(f"init: {cfg.init} has another tokenizer than policy {cfg.policy}; the student learns on the "
                         "policy's token ids, so it must share its tokenizer")
    # 2. π's p and Q's scores → π_N at every state
    targets = best_of_n_targets(proposer, open_scorer(cfg.prm, device=cfg.device), states, cfg.n, cfg.progress)
    clock["targets"] = time.monotonic()
    # 3. the student, from `init`, towards π_N
    curve = distil(student, targets, cfg, rng)
    clock["train"] = time.monotonic()
    # 4. save
    policy_dir = out / "policy"
    student.model.save_pretrained(policy_dir)
    student.tokenizer.save_pretrained(policy_dir)
    metrics = {"states": len(targets), "sampled_states": len(sampled), "episodes": len(stored),
               "episodes_left_out": len(stored) - len(trajs),
               "mean_top_target": round(sum(max(t.probs) for t in targets) / len(targets), 4), "curve": curve,
               "seconds": {"targets": round(clock["targets"] - clock["start"], 1),
                           "train": round(clock["train"] - clock["targets"], 1)},
               "config": cfg.model_dump(mode="json")}
    (out / METRICS_FILE).write_text(json.dumps(metrics, indent=2))
    return policy_dir


def best_of_n_targets(proposer: ChoiceAgent, scorer: Any, states: Sequence[Prefix], n: int, progress: bool = True,
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


def choice_log_probs(agent: ChoiceAgent, targets: Sequence[Target]) -> list[torch.Tensor]:
    """log π_θ(a | s) over each state's actions: the log-softmax of the replies' summed token log-probs."""
    rows = shared_prefix_token_logprobs(agent.model, [t.prompt for t in targets],
                                        [(i, r) for i, t in enumerate(targets) for r in t.replies], agent.pad_id)
    out, k = [], 0
    for t in targets:
        out.append(torch.log_softmax(torch.stack([row.sum() for row in rows[k:k + len(t.replies)]]), dim=0))
        k += len(t.replies)
    return out


def distil(student: ChoiceAgent, targets: Sequence[Target], cfg: BonDistillConfig,
           rng: random.Random) -> list[dict[str, float]]:
    """`cfg.epochs` passes of AdamW over the states, `cfg.batch_size` per step, the mean H(π_N, π_θ) as the
    loss; returns the loss curve (every 25th step and the last)."""
    model = student.model
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.learning_rate, weight_decay=cfg.weight_decay)
    steps = cfg.epochs * math.ceil(len(targets) / cfg.batch_size)
    model.train()
    curve, step = [], 0
    with StageProgress("best-of-n distillation", total=steps, unit="steps", enabled=cfg.progress) as bar:
        for _ in range(cfg.epochs):
            order = rng.sample(range(len(targets)), len(targets))
            for start in range(0, len(order), cfg.batch_size):
                batch = [targets[j] for j in order[start:start + cfg.batch_size]]
                losses = [soft_cross_entropy(lp, torch.tensor(t.probs, device=lp.device))
                          for t, lp in zip(batch, choice_log_probs(student, batch), strict=True)]
                loss = torch.stack(losses).mean()
                optimizer.zero_grad()
                loss.backward()
                if cfg.max_grad_norm is not None:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
                optimizer.step()
                if step % 25 == 0 or step == steps - 1:
                    curve.append({"step": step, "loss": round(loss.item(), 5)})
                    bar.stats = f"loss {loss.item():.4f}"
                step += 1
                bar.advance(1)
    model.eval()
    return curve

"""The likelihood PRM: a causal LM whose log-likelihood of an action, mapped affinely, is the step score.

    Q(s, a) = σ(β · ℓ_θ(a | s) + b),     ℓ_θ(a | s) = Σ_k log π_θ(y_k | s, y_<k)

over the reply tokens y of action a, rendered with the policy's own prompt (`ChoiceAgent.reply_ids`). θ starts
from the policy π0 (AgentPRM initialises its PRM from the policy, arXiv 2502.10325 §3); β is fixed and θ, b
are trained with the soft BCE of AgentPRM on step targets Q̃ ∈ [0, 1] (MC-Q, `proctor.credit`):

    L = −[Q̃ · log σ(z) + (1 − Q̃) · log(1 − σ(z))],     z = β · ℓ_θ(a | s) + b.

With `anchor` (a store of demonstrations, e.g. the SFT data) the loss adds λ · (−ℓ_θ(a* | s) / |a*|), the
per-token NLL of a batch of demonstrated actions (λ = `anchor_weight`). BCE lowers the likelihood of on-policy
actions with low targets, and the mass it frees goes to every other action, off-policy ones included; the
anchor keeps θ a model of the demonstrator there, which the targets (from the policy's own actions) do not reach.
With `anchor_expert` the anchor's actions are an expert's at the states of the anchor store instead of the stored
ones, every episode kept: given the policy's own rollouts, the expert's choice where the policy goes (DAgger's
relabelling, Ross et al. 2011, arXiv 1011.0686), so the anchor reaches the states the PRM is asked about.

∂L/∂θ = β · (σ(z) − Q̃) · ∇ℓ_θ: the likelihood of actions whose target exceeds their score goes up, of the
others down, the form of advantage-weighted regression (Peng et al. 2019, arXiv 1910.00177), so θ stays a
model of actions and ranks them through its LM head. It is the reference-free form, with a bias, of the implicit
PRM β · log π_θ/π_ref (Yuan et al. 2024, arXiv 2412.01981), trained on MC labels instead of outcomes.
On `household` a scalar head on the same small backbone did not learn which object a task names, and this
parametrisation did (README, "A PRM that ranks π0's actions").

A trained likelihood PRM is a `save_pretrained` folder (safetensors) with `likelihood_prm.json` (β, b, the
prompt); `open_scorer` loads it, or any other PRM folder, as the scorer search, evaluation and the trainers use.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from proctor.agents.base import Prefix
from proctor.progress import StageProgress
from proctor.prompts.render import PromptConfig, prefix_at, render_prompt
from proctor.trajectory import Trajectory, TrajectoryStore

LIKELIHOOD_FILE = "likelihood_prm.json"
KIND = "proctor.likelihood_prm"

#: one training example: (trajectory, step index t, the action at s_t, the target)
Example = tuple[Trajectory, int, str, float]


def likelihood_score(logprob: float, beta: float, bias: float) -> float:
    """Q = σ(β·ℓ + b) for a summed action log-likelihood ℓ (module docstring)."""
    z = beta * logprob + bias
    return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))


def is_likelihood_prm(path: str | Path) -> bool:
    return (Path(path) / LIKELIHOOD_FILE).is_file()


class LikelihoodPRMConfig(BaseModel):
    """`proctor prm train-likelihood CONFIG.yaml` (unknown keys are errors).

    Example:

        policy: runs/sft                       # π0: the PRM starts from it
        prompt: {history: 2, memory: true, show_admissible: false, system: ""}   # π0's prompt
        data: [runs/rollouts-labelled]         # trajectory stores whose steps hold targets[target]
        target: mc-q
        output_dir: runs/lik-prm
    """

    model_config = ConfigDict(extra="forbid")

    policy: str = Field(description="the causal LM the PRM starts from (the policy's checkpoint)")
    prompt: PromptConfig = Field(default_factory=PromptConfig, description="the policy's prompt")
    data: list[Path] = Field(min_length=1, description="trajectory stores with `Step.targets[target]`")
    target: str = "mc-q"
    output_dir: Path
    anchor: Path | None = Field(default=None, description="trajectory store of demonstrations whose actions' "
                                "NLL is added to the loss (module docstring); its unsuccessful episodes are "
                                "left out and counted")
    anchor_weight: float = Field(default=0.0, ge=0.0, description="λ, the anchor NLL's weight")
    anchor_expert: str | None = Field(default=None, description="an expert kind of the anchor's env (`proctor "
                                      "envs`; `oracle` reads the recorded info['expert_action']) whose action at "
                                      "each anchor state replaces the stored one; every episode is then kept")
    anchor_batch_size: int | None = Field(default=None, ge=1, description="demonstrated actions per step "
                                          "(None: batch_size); fewer make a step cheaper")
    beta: float = Field(default=1.0, gt=0.0, description="β: scale of the log-likelihood (fixed)")
    steps: int = Field(default=1500, ge=1)
    batch_size: int = Field(default=16, ge=1)
    learning_rate: float = Field(default=3e-4, gt=0.0)
    bias_learning_rate: float = Field(default=1e-2, gt=0.0, description="of b, which starts at 0")
    warmup_steps: int = Field(default=50, ge=0, description="linear warm-up, then linear decay to 0")
    max_grad_norm: float = Field(default=1.0, gt=0.0)
    log_every: int = Field(default=25, ge=1)
    seed: int = 0
    device: str | None = None
    dtype: str = "float32"
    progress: bool = True

    @field_validator("policy")
    @classmethod
    def _model(cls, v: str) -> str:
        from proctor.models.loading import check_model_source

        try:
            return check_model_source(v)
        except FileNotFoundError as e:
            raise ValueError(str(e)) from None

    @field_validator("data")
    @classmethod
    def _stores(cls, v: list[Path]) -> list[Path]:
        for p in v:
            _check_store(p)
        return v

    @field_validator("anchor")
    @classmethod
    def _anchor(cls, v: Path | None) -> Path | None:
        return None if v is None else _check_store(v)

    @model_validator(mode="after")
    def _anchor_pair(self) -> LikelihoodPRMConfig:
        if (self.anchor is None) != (self.anchor_weight == 0.0):
            raise ValueError("anchor and anchor_weight go together: set both (a store and a weight > 0) or neither")
        for name in ("anchor_batch_size", "anchor_expert"):
            if self.anchor is None and getattr(self, name) is not None:
                raise ValueError(f"{name}: there is no anchor (set anchor and anchor_weight, or drop it)")
        return self


def _check_store(p: Path) -> Path:
    if not (Path(p) / "manifest.json").is_file():
        raise ValueError(f"{p}: not a trajectory store (no manifest.json)")
    return p


def labelled_steps(stores: Sequence[Path], target: str) -> tuple[list[Example], dict[str, int]]:
    """Every (trajectory, step index, action, target) of the stores. The replayed prefix of a completion
    (`meta["prefix_len"]` steps, the source's actions) is not the completion's own data and is left out;
    steps without the target are counted. Errors name the store, trajectory, step and field."""
    out: list[Example] = []
    counts = {"replayed": 0, "unlabelled": 0}
    for store in stores:
        before = len(out)
        for traj in TrajectoryStore.open(store).load():
            first = int((traj.meta or {}).get("prefix_len", 0))
            counts["replayed"] += min(first, len(traj.steps))
            for i, step in enumerate(traj.steps[first:], start=first):
                if target not in step.targets:
                    counts["unlabelled"] += 1
                    continue
                y = float(step.targets[target])
                if not 0.0 <= y <= 1.0:
                    raise ValueError(f"{store}: trajectory {traj.id} step {i}: field 'targets.{target}' = {y} "
                                     "is outside [0, 1]")
                out.append((traj, i, step.action, y))
        if len(out) == before:
            raise ValueError(f"{store}: no step has field 'targets.{target}' (label the store first: "
                             f"proctor targets --method {target} ...)")
    return out, counts


def demonstrated_steps(store: Path, expert: str | None = None) -> tuple[list[Example], int]:
    """The anchor's data as (trajectory, step index, action, 1.0), and the number of episodes left out.

    Without `expert`: every step of the store's successful episodes, with its stored action (unsuccessful
    episodes are left out and counted). With `expert`: every step of every episode, with the action the expert
    `expert` of the episode's env takes at that state (module docstring); errors name the store, trajectory
    and step."""
    from proctor.envs.experts import ExpertUnavailable, expert_policy

    trajs = TrajectoryStore.open(store).load()
    if expert is None:
        out = [(traj, i, s.action, 1.0) for traj in trajs if traj.success for i, s in enumerate(traj.steps)]
        if not out:
            raise ValueError(f"{store}: no successful episode to anchor on ({len(trajs)} episodes, none a success)")
        return out, sum(not t.success for t in trajs)
    out, policies = [], {}
    for traj in trajs:
        if traj.env not in policies:
            try:
                policies[traj.env] = expert_policy(traj.env, expert)
            except ExpertUnavailable as e:
                raise ValueError(f"{store}: anchor_expert {expert!r}: {e}") from None
        for i in range(len(traj.steps)):
            try:
                out.append((traj, i, policies[traj.env](prefix_at(traj, i)), 1.0))
            except ExpertUnavailable as e:
                raise ValueError(f"{store}: trajectory {traj.id} step {i}: anchor_expert {expert!r}: {e}") from None
    if not out:
        raise ValueError(f"{store}: no step to anchor on ({len(trajs)} episodes)")
    return out, 0


def _tokenize(agent: Any, examples: Sequence[Example], label: str, progress: bool
              ) -> list[tuple[list[int], list[int], float]]:
    """(prompt ids, reply ids, target) of each (trajectory, step, action, target), rendered as the policy sees
    them."""
    tok, rows = agent.tokenizer, []
    with StageProgress(label, total=len(examples), enabled=progress, unit="steps") as bar:
        for traj, i, action, y in examples:
            prefix = prefix_at(traj, i)
            prompt = tok(render_prompt(tok, prefix, agent.prompt), add_special_tokens=False)["input_ids"]
            rows.append((prompt, agent.reply_ids(prefix, [action])[0], y))
            bar.advance(1)
    return rows


def _lr_lambda(warmup: int, steps: int):
    return lambda k: min(1.0, (k + 1) / max(1, warmup)) * max(0.0, 1.0 - k / steps)


def train_likelihood_prm(cfg: LikelihoodPRMConfig) -> dict[str, Any]:
    """Train a likelihood PRM (module docstring) and save it to `cfg.output_dir`; returns the summary
    (also written to `output_dir/likelihood_prm.json` with β and b)."""
    from proctor.agents.choice import ChoiceAgent
    from proctor.models.sequences import row_logprobs

    start = time.perf_counter()
    examples, counts = labelled_steps(cfg.data, cfg.target)
    demos, failed = demonstrated_steps(cfg.anchor, cfg.anchor_expert) if cfg.anchor is not None else ([], 0)
    torch.manual_seed(cfg.seed)
    agent = ChoiceAgent(cfg.policy, prompt=cfg.prompt, device=cfg.device, dtype=cfg.dtype)
    model, tok = agent.model, agent.tokenizer
    rows = _tokenize(agent, examples, "likelihood prm: tokenize", cfg.progress)
    anchor = _tokenize(agent, demos, "likelihood prm: tokenize anchor", cfg.progress) if demos else []
    bias = torch.zeros((), requires_grad=True, device=model.device)
    opt = torch.optim.AdamW([{"params": list(model.parameters())},
                             {"params": [bias], "lr": cfg.bias_learning_rate}], lr=cfg.learning_rate, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, _lr_lambda(cfg.warmup_steps, cfg.steps))
    rng, order, anchor_order, anchor_shown = random.Random(cfg.seed), [], [], 0
    curve: list[dict[str, float]] = []
    model.train()
    with StageProgress("likelihood prm: train", total=cfg.steps, enabled=cfg.progress, unit="steps") as bar:
        for step in range(cfg.steps):
            while len(order) < cfg.batch_size:  # epochs: a fresh shuffle when the current one runs out
                order += rng.sample(range(len(rows)), len(rows))
            batch = [rows[j] for j in order[:cfg.batch_size]]
            del order[:cfg.batch_size]
            shown: list[tuple[list[int], list[int], float]] = []
            if anchor:
                size = cfg.anchor_batch_size or cfg.batch_size
                while len(anchor_order) < size:
                    anchor_order += rng.sample(range(len(anchor)), len(anchor))
                shown = [anchor[j] for j in anchor_order[:size]]
                del anchor_order[:size]
                anchor_shown += len(shown)
            # the labelled and the demonstrated rows in passes of similar lengths (`row_logprobs`)
            sums, lengths = row_logprobs(model, [(p, r) for p, r, _ in batch + shown], agent.pad_id)
            z = cfg.beta * sums[:len(batch)] + bias
            y = torch.tensor([t for _, _, t in batch], device=z.device)
            loss = torch.nn.functional.binary_cross_entropy_with_logits(z, y)
            if shown:
                loss = loss + cfg.anchor_weight * -(sums[len(batch):] / lengths[len(batch):]).mean()
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
            opt.step()
            sched.step()
            if step % cfg.log_every == 0 or step == cfg.steps - 1:
                curve.append({"step": step, "loss": round(loss.item(), 5), "bias": round(bias.item(), 5)})
                bar.stats = f"loss {loss.item():.4f}"
            bar.advance(1)
    model.eval()
    out = Path(cfg.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    summary = {
        "kind": KIND, "beta": cfg.beta, "bias": bias.item(), "prompt": cfg.prompt.model_dump(),
        "config": cfg.model_dump(mode="json"), "examples": len(rows), "anchor_examples": len(anchor),
        "anchor_shown": anchor_shown,
        "skipped": {**counts, **({"anchor_unsuccessful_episodes": failed} if cfg.anchor is not None else {})},
        "epochs": round(cfg.steps * cfg.batch_size / len(rows), 3), "curve": curve,
        "wall_s": round(time.perf_counter() - start, 1),
    }
    (out / LIKELIHOOD_FILE).write_text(json.dumps(summary, indent=2))
    return summary


class LikelihoodScorer:
    """Scores actions with a saved likelihood PRM, the interface of `PRMScorer` that search, evaluation and
    the trainers use. The PRM renders states with the prompt it was trained with; a `cfg` passed by a caller
    (another PRM's renderer) must be None or that prompt."""

    score_at = "action"

    def __init__(self, path: str | Path, batch_size: int = 16, device: str | None = None, dtype: str = "auto"):
        from proctor.agents.choice import ChoiceAgent

        meta = json.loads((Path(path) / LIKELIHOOD_FILE).read_text())
        if meta.get("kind") != KIND:
            raise ValueError(f"{path}/{LIKELIHOOD_FILE}: field 'kind' is {meta.get('kind')!r}, not {KIND!r}")
        self.beta, self.bias = float(meta["beta"]), float(meta["bias"])
        self.prompt = PromptConfig.model_validate(meta["prompt"])
        self.batch_size = batch_size
        self.agent = ChoiceAgent(path, prompt=self.prompt, device=device, dtype=dtype, batch_size=8 * batch_size)

    def _check(self, cfg: PromptConfig | None) -> None:
        if cfg is not None and PromptConfig.model_validate(cfg) != self.prompt:
            raise ValueError("a likelihood PRM renders states with the prompt it was trained with; got another")

    def score_action_groups(self, prefixes: Sequence[Prefix], actions: Sequence[Sequence[str]],
                            cfg: PromptConfig | None = None, states_per_pass: int | None = None
                            ) -> list[list[float]]:
        """Q(s, a) of every candidate action at every state."""
        self._check(cfg)
        if len(prefixes) != len(actions):
            raise ValueError(f"{len(prefixes)} states but {len(actions)} action lists")
        size = states_per_pass or self.batch_size
        out: list[list[float]] = []
        for i in range(0, len(prefixes), size):
            chunk = [dataclasses.replace(p, info={**p.info, "admissible_actions": list(a)})
                     for p, a in zip(prefixes[i:i + size], actions[i:i + size], strict=True)]
            for cands in self.agent.score(chunk):
                out.append([likelihood_score(c.meta["choice_logprob"], self.beta, self.bias) for c in cands])
        return out

    def score_actions(self, prefix: Prefix, actions: Sequence[str], cfg: PromptConfig | None = None,
                      chunk_size: int | None = None) -> list[float]:
        return self.score_action_groups([prefix], [actions], cfg)[0]

    def score_trajectories(self, trajs: Sequence[Trajectory], cfg: PromptConfig | None = None
                           ) -> list[list[float]]:
        """Per-step Q(s_t, a_t) of stored trajectories, all their states in one call (its passes group states of
        similar lengths: `proctor.models.shared_prefix`)."""
        prefixes = [prefix_at(t, i) for t in trajs for i in range(len(t.steps))]
        flat = self.score_action_groups(prefixes, [[s.action] for t in trajs for s in t.steps], cfg,
                                        states_per_pass=max(1, len(prefixes)))
        out, k = [], 0
        for t in trajs:
            out.append([row[0] for row in flat[k:k + len(t.steps)]])
            k += len(t.steps)
        return out


def open_scorer(path: str | Path, batch_size: int = 16, device: str | None = None, dtype: str = "auto") -> Any:
    """The scorer of the PRM saved in `path`: a `LikelihoodScorer` for a likelihood PRM, a `TextStepScorer` for a
    PRM trained on stepwise text (`proctor.prm.text_scorer`), else a `PRMScorer`."""
    if is_likelihood_prm(path):
        return LikelihoodScorer(path, batch_size, device, dtype)
    from proctor.prm.model import ProcessRewardModel
    from proctor.prm.scoring import PRMScorer
    from proctor.prm.text_scorer import TextStepScorer

    scorer = PRMScorer(ProcessRewardModel.from_pretrained(path, dtype=dtype, device=device), batch_size=batch_size)
    return TextStepScorer(scorer) if scorer.prm.spec.trained_on == "text" else scorer

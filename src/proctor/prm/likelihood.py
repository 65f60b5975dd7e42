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

Training runs on the engine (`proctor.training.fit`): every optimizer step is one global batch of `batch_size`
labelled steps and `anchor_batch_size` demonstrated ones, drawn up front from `random.Random(seed)`, so P
processes (`torchrun`) or G accumulation steps follow the curve of one process (`LikelihoodLoss`).

A trained likelihood PRM is a `save_pretrained` folder (safetensors) with `likelihood_prm.json` (β, b, the
prompt); `proctor.prm.ref.PRMRef.open` loads it, or any other PRM folder, as the scorer search, evaluation and the
trainers use.
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
from pydantic import Field, field_validator, model_validator

from proctor.agents.base import Prefix
from proctor.prm.model import CheckpointingWrapper
from proctor.progress import StageProgress
from proctor.prompts.render import PromptConfig, prefix_at, render_prompt
from proctor.renames import moved_names
from proctor.store import TrajectoryStore
from proctor.training.config import OptimizationConfig
from proctor.training.precision import inference_dtype, resolve_device
from proctor.trajectory import Trajectory

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


class LikelihoodPRMConfig(OptimizationConfig):
    """`proctor prm train-likelihood CONFIG.yaml` (unknown keys are errors); the optimisation fields are
    `OptimizationConfig`'s (the LM trains in float32, bf16 autocast on a CUDA device with bf16).

    Example:

        policy: runs/sft                       # π0: the PRM starts from it
        prompt: {history: 2, memory: true, show_admissible: false, system: ""}   # π0's prompt
        data: [runs/rollouts-labelled]         # trajectory stores whose steps hold targets[target]
        target: mc-q
        output_dir: runs/lik-prm
    """

    policy: str = Field(description="the causal LM the PRM starts from (the policy's checkpoint)")
    prompt: PromptConfig = Field(default_factory=PromptConfig, description="the policy's prompt")
    data: list[Path] = Field(min_length=1, description="trajectory stores with `Step.targets[target]`")
    target: str = Field(default="mc-q", description="the `Step.targets` key learnt (values in [0, 1])")
    output_dir: Path = Field(description="where the PRM folder is written")
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
    steps: int = Field(default=1500, ge=1, description="optimizer steps")
    batch_size: int = Field(default=16, ge=1, description="labelled steps per optimizer step (the global batch, "
                            "split between the processes and the gradient accumulation steps)")
    learning_rate: float = Field(default=3e-4, gt=0.0, description="peak learning rate of the LM (AdamW)")
    bias_learning_rate: float = Field(default=1e-2, gt=0.0, description="peak learning rate of b, which starts at 0")
    warmup_ratio: float = Field(default=1 / 30, ge=0, lt=1, description="share of the steps with a linear "
                                "warm-up (1/30: 50 of the default 1500 steps), then linear decay to 0")
    lr_scheduler_type: str = Field(default="linear", description="a transformers scheduler name")
    max_grad_norm: float | None = Field(default=1.0, gt=0, description="gradient clipping norm of the LM "
                                        "(b is not clipped; None: no clipping)")
    logging_steps: int = Field(default=25, ge=1, description="optimizer steps between the curve's records")

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


@dataclasses.dataclass(frozen=True)
class Row:
    """One row of a global batch: a rendered (state, action) and its target; None marks a demonstrated
    (anchor) action."""

    prompt: list[int]
    reply: list[int]
    target: float | None


class LikelihoodModel(CheckpointingWrapper, torch.nn.Module):
    """What trains: the LM θ (`model`) and the scalar bias b. `forward(pairs, labelled)` returns
    (z = β·ℓ_θ + b of the first `labelled` (prompt, reply) pairs, per-token NLL −ℓ_θ/|a| of the others), all the
    LM's passes inside one call (so DDP sees them)."""

    def __init__(self, model: torch.nn.Module, beta: float, pad_id: int):
        super().__init__()
        self.model, self.beta, self.pad_id = model, beta, pad_id
        self.bias = torch.nn.Parameter(torch.zeros((), device=model.device))

    def forward(self, pairs: list[tuple[list[int], list[int]]], labelled: int) -> tuple[torch.Tensor, torch.Tensor]:
        from proctor.models.sequences import row_logprobs

        # the labelled and the demonstrated rows in passes of similar lengths
        sums, lengths = row_logprobs(self.model, pairs, self.pad_id)
        return self.beta * sums[:labelled] + self.bias, -sums[labelled:] / lengths[labelled:]


class LikelihoodLoss:
    """The likelihood PRM's loss as the engine's `RowLoss`. A step's B labelled rows and A anchor rows give
    L = (1/B)·Σ_i BCE(z_i, Q̃_i) + λ·(1/A)·Σ_j nll_j = (1/B)·[Σ_i BCE(z_i, Q̃_i) + λ·(B/A)·Σ_j nll_j]:
    the bracket is the rows' sum and B, the labelled rows, its weight. Stats (means once divided by B): `bce`
    and `anchor_nll`, (B/A)·Σ_j nll_j."""

    def __init__(self, anchor_weight: float, labelled: int, anchors: int):
        self.anchor_weight = anchor_weight
        self.anchor_share = labelled / anchors if anchors else 0.0  # B/A

    def weight(self, rows: Sequence[Row]) -> float:
        return float(sum(r.target is not None for r in rows))

    def __call__(self, model: Any, rows: Sequence[Row]) -> tuple[torch.Tensor, dict[str, Any]]:
        labelled = [r for r in rows if r.target is not None]
        anchors = [r for r in rows if r.target is None]
        z, nll = model([(r.prompt, r.reply) for r in labelled + anchors], len(labelled))
        y = torch.tensor([r.target for r in labelled], device=z.device)
        bce = torch.nn.functional.binary_cross_entropy_with_logits(z.float(), y, reduction="sum")
        anchor_nll = self.anchor_share * nll.float().sum()
        return bce + self.anchor_weight * anchor_nll, {"bce": bce.detach(), "anchor_nll": anchor_nll.detach()}


def global_batches(rows: Sequence[Row], anchor: Sequence[Row], steps: int, batch_size: int, anchor_size: int,
                   seed: int) -> list[list[Row]]:
    """The rows of every optimizer step: `batch_size` labelled rows, then `anchor_size` anchor rows (if any),
    each drawn without replacement from a fresh shuffle of its set when the current one runs out, all from
    one `random.Random(seed)` (labelled, then anchor, step after step)."""
    rng, order, anchor_order, out = random.Random(seed), [], [], []
    for _ in range(steps):
        while len(order) < batch_size:
            order += rng.sample(range(len(rows)), len(rows))
        batch = [rows[j] for j in order[:batch_size]]
        del order[:batch_size]
        if anchor:
            while len(anchor_order) < anchor_size:
                anchor_order += rng.sample(range(len(anchor)), len(anchor))
            batch += [anchor[j] for j in anchor_order[:anchor_size]]
            del anchor_order[:anchor_size]
        out.append(batch)
    return out


def train_likelihood_prm(cfg: LikelihoodPRMConfig) -> dict[str, Any]:
    """Train a likelihood PRM (module docstring) on the training engine (`proctor.training.fit`: AdamW with
    the LM at `learning_rate` and b at `bias_learning_rate`, no weight decay on b; linear warm-up then linear
    decay; data-parallel under torchrun, each global batch split between the processes) and save it to
    `cfg.output_dir` (the main process writes; float32 unless `save_dtype`); returns the summary (also
    written to `output_dir/likelihood_prm.json` with β and b)."""
    from proctor.agents.choice import ChoiceAgent
    from proctor.training.distributed import world_size
    from proctor.training.engine import fit
    from proctor.training.policy import load_policy, save_policy, saving_state_dict

    start = time.perf_counter()
    if cfg.batch_size < world_size() * cfg.gradient_accumulation_steps:
        raise ValueError(f"batch_size {cfg.batch_size} < processes × gradient_accumulation_steps = "
                         f"{world_size()} × {cfg.gradient_accumulation_steps}: every micro-batch needs a labelled row")
    examples, counts = labelled_steps(cfg.data, cfg.target)
    demos, failed = demonstrated_steps(cfg.anchor, cfg.anchor_expert) if cfg.anchor is not None else ([], 0)
    torch.manual_seed(cfg.seed)
    model, tok = load_policy(cfg.policy, precision=cfg.precision)  # float32 weights; the Trainer places them
    agent = ChoiceAgent(model, tok, prompt=cfg.prompt)
    rows = [Row(p, r, y) for p, r, y in _tokenize(agent, examples, "likelihood prm: tokenize", cfg.progress)]
    anchor = [Row(p, r, None) for p, r, _ in
              _tokenize(agent, demos, "likelihood prm: tokenize anchor", cfg.progress)] if demos else []
    anchor_size = (cfg.anchor_batch_size or cfg.batch_size) if anchor else 0
    batches = global_batches(rows, anchor, cfg.steps, cfg.batch_size, anchor_size, cfg.seed)
    prm = LikelihoodModel(model, cfg.beta, agent.pad_id)

    def groups(module: LikelihoodModel) -> list[dict]:
        return [{"params": list(module.model.parameters()), "weight_decay": cfg.weight_decay},
                {"params": [module.bias], "lr": cfg.bias_learning_rate, "weight_decay": 0.0}]

    result = fit(prm, batches, LikelihoodLoss(cfg.anchor_weight, cfg.batch_size, anchor_size), cfg,
                 Path(cfg.output_dir) / "trainer", label="likelihood prm: train", optimizer_groups=groups,
                 clipped=lambda module: module.model.parameters())  # the LM's gradient, not b's
    trainer = result.trainer
    state_dict = saving_state_dict(trainer)  # every process takes part under FSDP / ZeRO-3
    trained = trainer.accelerator.unwrap_model(trainer.model)
    bias = float(state_dict["bias"] if state_dict is not None else trained.bias.detach())
    curve = [{"step": r["step"], "loss": round(r["loss"], 5), "bce": round(r["bce"], 5),
              "anchor_nll": round(r["anchor_nll"], 5), "lr": r["lr"]}
             for r in result.curve if r["step"] % cfg.logging_steps == 0 or r["step"] == cfg.steps - 1]
    summary = {
        "kind": KIND, "beta": cfg.beta, "bias": bias, "prompt": cfg.prompt.model_dump(),
        "config": cfg.model_dump(mode="json"), "processes": trainer.args.world_size, "examples": len(rows),
        "anchor_examples": len(anchor), "anchor_shown": cfg.steps * anchor_size,
        "skipped": {**counts, **({"anchor_unsuccessful_episodes": failed} if cfg.anchor is not None else {})},
        "epochs": round(cfg.steps * cfg.batch_size / len(rows), 3), "curve": curve,
        "wall_s": round(time.perf_counter() - start, 1),
    }
    out = Path(cfg.output_dir)
    if trainer.is_world_process_zero():
        lm_state = None if state_dict is None else {k.removeprefix("model."): v for k, v in state_dict.items()
                                                    if k != "bias"}
        save_policy(trained.model, tok, out, save_dtype=cfg.save_dtype, state_dict=lm_state)
        (out / LIKELIHOOD_FILE).write_text(json.dumps(summary, indent=2))
    trainer.accelerator.wait_for_everyone()
    return summary


class LikelihoodScorer:
    """Scores actions with a saved likelihood PRM, the interface of `PRMScorer` that search, evaluation and
    the trainers use. The PRM renders states with the prompt it was trained with; a `cfg` passed by a caller
    (another PRM's renderer) must be None or that prompt."""

    score_at = "action"

    def __init__(self, path: str | Path, batch_size: int = 16, device: str | None = "auto", dtype: str = "auto",
                 server: Any = None):
        """`device`: auto (or None) is CUDA when present, else the CPU; `dtype`: auto is bf16 on a CUDA device
        with bf16, float32 elsewhere (`inference_dtype`). `server` (a `ServerRef`): the PRM's LM is served by
        vLLM, which scores the actions (`prompt_logprobs`); the folder gives β, b, the prompt and the tokenizer."""
        from proctor.agents.choice import ChoiceAgent

        meta = json.loads((Path(path) / LIKELIHOOD_FILE).read_text())
        if meta.get("kind") != KIND:
            raise ValueError(f"{path}/{LIKELIHOOD_FILE}: field 'kind' is {meta.get('kind')!r}, not {KIND!r}")
        self.beta, self.bias = float(meta["beta"]), float(meta["bias"])
        self.prompt = PromptConfig.model_validate(meta["prompt"])
        self.batch_size = batch_size
        device = resolve_device(device)
        self.agent = ChoiceAgent(path, prompt=self.prompt, device=device, dtype=inference_dtype(dtype, device),
                                 batch_size=8 * batch_size, server=server.client() if server is not None else None)

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


__getattr__ = moved_names(__name__, {"open_scorer": "proctor.prm.ref:open_scorer"})

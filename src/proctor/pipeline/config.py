"""`PipelineConfig`: the iterated AgentPRM loop in one validated YAML file (`proctor run CONFIG.yaml`).

    demonstrations → SFT → π0;  for k in 0..iterations-1:
        roll out π_k on train tasks → per-step targets (or candidate-action pairs at π_k's states, completed
        by π_k) → PRM Q_k (initialised from π_k) →
        evaluate on test tasks (π_k, search with Q_k, ...) → improve π_k against Q_k (online DPO) → π_{k+1}
    evaluate the last policy

Agent configs in `evaluate` may use the placeholders `$policy` (the iteration's policy folder) and `$prm`
(the iteration's PRM folder); `policy_agent` is how the policy acts (`$policy` is filled in).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from proctor.pipeline.monitor import MonitorSection


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ModelSection(_Section):
    """The starting model: an existing folder or hub name, or a tiny model built here (`build_tiny` args)."""

    path: str | None = None
    tiny: dict[str, Any] | None = Field(default=None, description="proctor.models.build_tiny arguments")

    @model_validator(mode="after")
    def _one(self) -> ModelSection:
        if (self.path is None) == (self.tiny is None):
            raise ValueError("give exactly one of model.path and model.tiny")
        return self


class TaskSection(_Section):
    """Which tasks and how many episodes per task."""

    split: str
    tasks: int | None = Field(default=None, ge=1, description="first N tasks of the split (None: all)")
    samples: int = Field(default=1, ge=1)
    batch: int = Field(default=16, ge=1)


class DemoSection(TaskSection):
    """Expert demonstrations for SFT."""

    split: str = "train"
    agent: dict[str, Any] = Field(default_factory=lambda: {"kind": "expert", "expert": "oracle"})


class EvalEntry(_Section):
    """One policy to evaluate: an agent config (placeholders `$policy`, `$prm`) or a search config
    (`proctor.search`), with the label used in tables."""

    name: str
    agent: dict[str, Any] | None = None
    search: dict[str, Any] | None = None
    iterations: list[int] | None = Field(default=None, description="only at these iterations (None: all)")
    tasks: int | None = Field(default=None, ge=1, description="the first N of the evaluation's tasks, for a "
                              "costly method (None: all of them)")

    @model_validator(mode="after")
    def _one(self) -> EvalEntry:
        if (self.agent is None) == (self.search is None):
            raise ValueError(f"evaluation {self.name!r}: give exactly one of agent and search")
        return self


class EvalSection(TaskSection):
    split: str = "test"
    entries: list[EvalEntry] = Field(min_length=1)


class CandidatesSection(_Section):
    """PRM data from candidate actions at the policy's own states, instead of MC-Q on its rollouts: at
    `per_source` states of each rollout, each candidate action (the expert's, the one taken, `random` other
    admissible ones) is tried and the policy completes the episode `completions` times; the candidates' MC-Q
    (`proctor.credit.candidates`) give Bradley–Terry pairs at a Q̃ margin ≥ `margin` (AgentPRM's relative loss
    on action pairs of one state). The expert candidate needs an env that serves `info["expert_action"]`
    (`expert_hints: true` in `env_kwargs`)."""

    candidates: dict[str, Any] = Field(default_factory=lambda: {"expert": True, "taken": True, "random": 1},
                                       description="proctor.rollout.starts.CandidateConfig fields")
    agent: dict[str, Any] | None = Field(default=None, description="who completes the episodes after a candidate "
                                         "(an agent config; None: the policy, i.e. MC-Q of π_k)")
    completions: int = Field(default=2, ge=1)
    per_source: int | None = Field(default=4, ge=1, description="states per rollout (None: all)")
    margin: float = Field(default=0.2, gt=0, le=1)
    gamma: float = Field(default=0.95, gt=0, le=1)
    batch: int = Field(default=32, ge=1)


#: the loop's own trajectory stores, as config values name them (`proctor.pipeline.run.loop_store`)
LOOP_STORES = ("$demos", "$rollouts")

#: how the loop improves π_k against Q_k (`improve.method`): AgentPRM's online DPO (`proctor.rl.online_dpo`) or
#: best-of-N distillation (`proctor.rl.bon_distill`, whose `init: $prm` starts π_{k+1} from Q_k's LM)
IMPROVE_METHODS = ("online-dpo", "bon-distill")


def check_section(name: str, what: str, config: type[BaseModel], section: dict[str, Any],
                  loop: dict[str, Any]) -> None:
    """Validate the config section `name` before any stage runs, as the stage will build `config` from it:
    `loop` holds the fields the loop sets itself, which the section may not name. Those, and the section's values
    that name the loop's stores (`$demos`, `$rollouts`), are placeholders here: their errors (a folder the loop
    has not made yet) are not the section's. The first problem is one line naming `name.field`."""
    allowed = set(config.model_fields) - set(loop)
    bad = sorted(set(section) - allowed)
    if bad:
        raise ValueError(f"{name}.{bad[0]}: not a field of {what} here (the loop sets {', '.join(sorted(loop))}); "
                         f"fields: {', '.join(sorted(allowed))}")
    try:
        config.model_validate({**section, **loop})
    except ValidationError as e:
        filled = set(loop) | {k for k, v in section.items() if v in LOOP_STORES}
        errors = [err for err in e.errors() if not (err["loc"] and err["loc"][0] in filled)]
        if errors:
            where = "".join(f".{part}" for part in errors[0]["loc"])
            raise ValueError(f"{name}{where}: {errors[0]['msg'].removeprefix('Value error, ')}") from None


def head_prm_config(cfg: PipelineConfig, policy: str, model_dir: str | None, labelled: str, out: str,
                    pairs_of: str | None = None) -> Any:
    """The `PRMTrainConfig` of a PRM head trained by the loop from its `prm` section: regression on the step
    targets of the trajectories in `labelled`, or, with `pairs_of` (the candidates' completions), Bradley–Terry
    on the pairs in `labelled`. `model.backbone` may be `$policy` (π_k, the default) or `$model`."""
    from proctor.prm.config import PRMTrainConfig

    section = {k: v for k, v in cfg.prm.items() if k != "kind"}
    model = {"head": "scalar", "dtype": "float32", "backbone": "$policy", **section.pop("model", {})}
    model["backbone"] = {"$policy": policy, "$model": model_dir}.get(model["backbone"], model["backbone"])
    training = {"save_strategy": "no", "report_to": [], "disable_tqdm": True, "logging_steps": 10,
                "dataloader_pin_memory": False, **section.pop("training", {}), "output_dir": out}
    if pairs_of is None:
        data = {"format": "trajectories", "target": cfg.targets.get("method", "mc-q"), **section.pop("data", {}),
                "train": labelled}
    else:
        data = {"format": "targets", **section.pop("data", {}), "train": labelled, "trajectories": [pairs_of]}
    loss = "bce" if pairs_of is None else "bradley_terry"
    return PRMTrainConfig.model_validate({"loss": loss, "seed": cfg.seed, **section, "model": model,
                                          "training": training, "data": data})


def check_head_prm(cfg: PipelineConfig) -> None:
    """The `prm` section of a PRM head, checked before any stage runs: its fields and values (the loop's own
    folders are placeholders) and the names of its `training` arguments (`transformers.TrainingArguments`)."""
    import dataclasses

    from transformers import TrainingArguments

    try:
        pcfg = head_prm_config(cfg, "$policy", "$model", "$targets", "$out",
                               "$candidates" if cfg.prm_candidates is not None else None)
    except ValidationError as e:
        err = e.errors()[0]
        where = "".join(f".{part}" for part in err["loc"])
        raise ValueError(f"prm{where}: {err['msg'].removeprefix('Value error, ')}") from None
    known = {f.name for f in dataclasses.fields(TrainingArguments)}
    bad = sorted(set(pcfg.training) - known)
    if bad:
        raise ValueError(f"prm.training.{bad[0]}: not an argument of transformers.TrainingArguments")


class PipelineConfig(_Section):
    """The whole loop (see module docstring). Sections not given take the defaults shown."""

    out: Path
    seed: int = 0
    env: str
    env_kwargs: dict[str, Any] = Field(default_factory=dict)
    model: ModelSection
    demos: DemoSection = Field(default_factory=DemoSection)
    sft: dict[str, Any] = Field(default_factory=dict, description="SFTConfig fields (not model/data/output_dir)")
    policy_agent: dict[str, Any] = Field(default_factory=lambda: {"kind": "hf"},
                                         description="how the policy acts; `model` is filled in")
    iterations: int = Field(default=1, ge=0, description="policy-improvement iterations after SFT")
    rollout: TaskSection = Field(default_factory=lambda: TaskSection(split="train", samples=4))
    targets: dict[str, Any] = Field(default_factory=lambda: {"method": "mc-q", "params": {"gamma": 0.95}})
    prm_candidates: CandidatesSection | None = Field(
        default=None, description="train the PRM on candidate-action pairs at the policy's states (None: on "
        "`targets` of its rollouts)")
    prm: dict[str, Any] = Field(default_factory=dict, description="PRMTrainConfig fields: head, loss, training; "
                                "model.backbone defaults to `$policy` (π_k), `$model` is the starting model; or "
                                "`kind: likelihood` and LikelihoodPRMConfig fields (from π_k, its agent's prompt; `anchor: "
                                "$demos` is the loop's demonstrations, `$rollouts` the iteration's rollouts)")
    improve: dict[str, Any] = Field(default_factory=dict,
                                    description="`method: online-dpo` (default) and OnlineDPOConfig fields (not "
                                    "policy/prm/output_dir/env), or `method: bon-distill` and BonDistillConfig "
                                    "fields (`init: $prm`: from Q_k's LM); `states_from: $rollouts` takes the "
                                    "states from the iteration's rollouts")
    evaluate: EvalSection
    monitor: MonitorSection | None = Field(default=None, description="the reward-hacking monitor after each "
                                           "iteration's evaluation (proctor.pipeline.monitor; None: off)")

    @model_validator(mode="after")
    def _prm_kind(self) -> PipelineConfig:
        kind = self.prm.get("kind", "head")
        if kind not in ("head", "likelihood"):
            raise ValueError(f"prm.kind: {kind!r} is not 'head' (a PRM head, `proctor prm train`) or 'likelihood' "
                             "(`proctor.prm.likelihood`)")
        if kind == "likelihood" and self.prm_candidates is not None:
            raise ValueError("prm.kind 'likelihood' trains on step targets, not on candidate pairs (prm_candidates)")
        if kind == "head":
            check_head_prm(self)
        if kind == "likelihood":
            from proctor.prm.likelihood import LikelihoodPRMConfig

            anchor = self.prm.get("anchor")
            if anchor not in (None, *LOOP_STORES) and not (Path(anchor) / "manifest.json").is_file():
                raise ValueError(f"prm.anchor: {anchor!r} is neither `$demos` (the loop's demonstrations), "
                                 "`$rollouts` (the iteration's rollouts) nor a trajectory store (no manifest.json)")
            prompt = self.policy_agent.get("prompt")
            check_section("prm", "the likelihood PRM", LikelihoodPRMConfig,
                          {"seed": self.seed, "target": self.targets.get("method", "mc-q"),
                           **({"prompt": prompt} if prompt is not None else {}),
                           **{k: v for k, v in self.prm.items() if k != "kind"}},
                          {"policy": "$policy", "data": ["$targets"], "output_dir": "$out"})
        return self

    @model_validator(mode="after")
    def _sft_fields(self) -> PipelineConfig:
        from proctor.rl.sft import SFTConfig

        check_section("sft", "SFT", SFTConfig, {"seed": self.seed, **self.sft},
                      {"model": "$model", "data": "$demos", "output_dir": "$out"})
        return self

    @model_validator(mode="after")
    def _improve_fields(self) -> PipelineConfig:
        method = self.improve.get("method", "online-dpo")
        if method not in IMPROVE_METHODS:
            raise ValueError(f"improve.method: {method!r} is not one of {', '.join(IMPROVE_METHODS)}")
        section = {k: v for k, v in self.improve.items() if k != "method"}
        states = section.get("states_from")
        if states not in (None, "$rollouts") and not (Path(states) / "manifest.json").is_file():
            raise ValueError(f"improve.states_from: {states!r} is neither `$rollouts` (the iteration's rollouts) "
                             "nor a trajectory store (no manifest.json)")
        if method == "online-dpo":
            from proctor.rl.online_dpo import OnlineDPOConfig

            check_section("improve", "online DPO", OnlineDPOConfig, {"seed": self.seed, "agent": self.policy_agent,
                                                                      **section},
                          {"policy": "$policy", "prm": "$prm", "output_dir": "$out", "env": self.env,
                           "env_kwargs": self.env_kwargs})
            return self
        from proctor.rl.bon_distill import BonDistillConfig

        if self.policy_agent.get("kind") != "choice":
            raise ValueError(f"improve.method: bon-distill needs the `choice` policy agent (it distils over the env's "
                             f"admissible actions); policy_agent.kind is {self.policy_agent.get('kind')!r}")
        if "states_from" not in section:
            raise ValueError("improve.states_from: bon-distill needs its states: `$rollouts` (the iteration's "
                             "rollouts of π_k) or a trajectory store")
        init = section.get("init")
        if init not in (None, "$prm", "$policy") and not Path(init).is_dir():
            raise ValueError(f"improve.init: {init!r} is neither `$prm` (Q_k's LM), `$policy` (π_k) nor a model "
                             "folder")
        check_section("improve", "best-of-N distillation", BonDistillConfig,
                      {"seed": self.seed, "prompt": self.policy_agent.get("prompt") or {}, **section},
                      {"policy": "$policy", "prm": "$prm", "output_dir": "$out"})
        return self

    @model_validator(mode="after")
    def _monitored_entry(self) -> PipelineConfig:
        if self.monitor is not None:
            self.monitored_entry()
        return self

    def monitored_entry(self) -> EvalEntry:
        """The evaluation entry the monitor re-labels: `monitor.entry`, or the first entry whose agent does not
        use the PRM (the policy itself; its evaluation is scored by the PRM)."""
        assert self.monitor is not None
        for e in self.evaluate.entries:
            plain = e.agent is not None and "$prm" not in json.dumps(e.agent)
            if (e.name == self.monitor.entry) if self.monitor.entry else plain:
                if not plain:
                    raise ValueError(f"monitor.entry: {e.name!r} uses the PRM; the monitor re-labels the "
                                     "policy's own actions (an agent entry without $prm)")
                return e
        raise ValueError(f"monitor.entry: no evaluation entry {self.monitor.entry!r}" if self.monitor.entry
                         else "monitor: no evaluation entry of the policy itself (an agent without $prm)")

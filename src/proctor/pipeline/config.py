"""`PipelineConfig`: the iterated AgentPRM loop in one validated YAML file (`proctor run CONFIG.yaml`).

    demonstrations → SFT → π0;  for k in 0..iterations-1:
        roll out π_k on train tasks → per-step targets (or candidate-action pairs at π_k's states, completed
        by π_k) → PRM Q_k (initialised from π_k) →
        evaluate on test tasks (π_k, search with Q_k, ...) → improve π_k against Q_k (online DPO) → π_{k+1}
    evaluate the last policy

Agent configs in `evaluate` may use the placeholders `$policy` (the iteration's policy folder) and `$prm`
(the iteration's PRM folder); `policy_agent` is how the policy acts (`$policy` is filled in). The agent and search
configs (`policy_agent`, `demos.agent`, `prm_candidates`, the evaluation entries) are kept as written and checked
against their registries at validation (`proctor.pipeline.agent_fields`): a bad one is one line naming its path
(`evaluate.entries[1].agent.n: ...`).

`workers` (and `step_timeout`) host the envs of every stage that steps them in worker processes: the
demonstrations, rollouts, candidate completions, evaluations (search included), the monitor, and online DPO's
rollouts (`improve.workers`, the pipeline's unless set). The task sections (`demos`, `rollout`, `evaluate`, and
online DPO's `improve`) take the first N tasks of a split, a list of task ids, or a `panel` file of ids (a fixed
panel; `tasks: N` then takes its first N); each stage's config in `manifest.json` records the ids it ran.
`proctor run CONFIG --dry-run` prints the stages without running them, each with its command (`proctor.pipeline.run`).

The trainer sections (`sft`, `prm`, `improve`, `targets`) are typed: each is made by `section_model` from its
stage's config class (`SFTConfig`, `PRMTrainConfig` or `LikelihoodPRMConfig` by `prm.kind`, `OnlineDPOConfig` or
`BonDistillConfig` by `improve.method`, `TargetsConfig`) with the same fields, less those the loop sets itself.
Some fields default to the pipeline's own values (`seed`, the policy agent's `prompt`, ...: None until the stage
is built) and some may name the loop's folders by placeholder (`$policy`, `$prm`, `$model`, `$demos`,
`$rollouts`: `LoopRef`). The loop builds each stage's config with `StageSection.stage_config`, and validation
builds it once already with the folders as placeholders, so that a bad field or value is one line naming
`section.field` before any stage runs.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from operator import attrgetter
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    SerializationInfo,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    create_model,
    field_serializer,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo

from proctor.agents.registry import agent_class
from proctor.credit.stage import TargetsConfig
from proctor.envs.ref import EnvRef, TaskChoice
from proctor.pipeline.agent_fields import EVAL_FILLS, POLICY_FILLS, check_agent, check_fields, check_search
from proctor.pipeline.launch import DevicePlan, LaunchSection
from proctor.pipeline.monitor import MonitorSection
from proctor.pipeline.prm_server import PRMServingSection
from proctor.prm.config import DataSection as PRMDataSection
from proctor.prm.config import ModelSection as PRMModelSection
from proctor.prm.config import PRMTrainConfig, upgrade_old_fields
from proctor.prm.likelihood import LikelihoodPRMConfig
from proctor.registry import did_you_mean
from proctor.rl.bon_distill import BonDistillConfig
from proctor.rl.on_policy import NOT_A_MODEL
from proctor.rl.online_dpo import OnlineDPOConfig
from proctor.rl.served_policy import GenerationBackend
from proctor.rl.sft import SFTConfig
from proctor.rollout.starts import CandidateConfig


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StartModelSection(_Section):
    """The starting model: an existing folder or hub name, or a tiny model built here (`build_tiny` args)."""

    path: str | None = Field(default=None, description="the starting model: a folder or a hub name (give this or "
                             "`tiny`)")
    tiny: dict[str, Any] | None = Field(default=None, description="proctor.models.build_tiny arguments")

    @model_validator(mode="after")
    def _one(self) -> StartModelSection:
        if (self.path is None) == (self.tiny is None):
            raise ValueError("give exactly one of model.path and model.tiny")
        return self


def read_panel(path: Path) -> list[str]:
    """The task ids of a panel file: one a line, in order; blank lines and `#` comments are skipped."""
    if not path.is_file():
        raise ValueError(f"panel {str(path)!r}: no such file")
    ids = [line.split("#", 1)[0].strip() for line in path.read_text().splitlines()]
    ids = [i for i in ids if i]
    if not ids:
        raise ValueError(f"panel {str(path)!r}: no task ids in it")
    if len(set(ids)) != len(ids):
        raise ValueError(f"panel {str(path)!r}: has duplicate task ids")
    return ids


class TaskSection(TaskChoice, _Section):
    """Which tasks (`TaskChoice`: the train split by default) and how many episodes per task: the split's tasks in
    the env's order, or a fixed panel of task ids (`tasks` as a list, or a `panel` file), which the stages' configs
    in `manifest.json` record id by id."""

    split: str = TaskChoice.field_with("split", default="train")
    panel: Path | None = Field(default=None, description="a file of task ids, one a line (`#` comments), read when "
                               "the config is validated (relative to the working directory): the tasks instead of "
                               "the split's own order (`tasks: N`: its first N)")
    samples: int = Field(default=1, ge=1, description="episodes per task (K), each with its own episode seed")
    batch: int = Field(default=16, ge=1, description="envs stepped together (B)")
    _panel_ids: list[str] | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _panel(self) -> TaskSection:
        if self.panel is not None:
            if isinstance(self.tasks, list):
                raise ValueError("give a panel file or a list of tasks, not both (`tasks: N` takes the panel's first N)")
            self._panel_ids = read_panel(self.panel)
        return self

    def task_ids(self) -> int | list[str] | None:
        """What the stage's config takes as `tasks`: the panel's ids (its first `tasks`), the listed ids, a count
        of the split's first tasks, or None (all)."""
        if self._panel_ids is not None:
            return self._panel_ids[:self.tasks] if isinstance(self.tasks, int) else list(self._panel_ids)
        return list(self.tasks) if isinstance(self.tasks, list) else self.tasks


class DemoSection(TaskSection):
    """Expert demonstrations for SFT (from the train split by default)."""

    agent: dict[str, Any] = Field(default_factory=lambda: {"kind": "expert", "expert": "oracle"},
                                  description="the demonstrating agent's config (an expert: its successful "
                                  "episodes are SFT's data)")

    def check_agents(self, where: str) -> None:
        """The agent against the agent registry (`proctor.pipeline.agent_fields`; no placeholder here)."""
        check_agent(self.agent, f"{where}.agent", {})


class EvalEntry(_Section):
    """One policy to evaluate: an agent config (placeholders `$policy`, `$prm`) or a search config
    (`proctor.search`), with the label used in tables."""

    name: str = Field(description="the row's label in tables and the report (its folder's name, made safe)")
    agent: dict[str, Any] | None = Field(default=None, description="an agent config to evaluate; `$policy` and "
                                         "`$prm` stand for π_k and Q_k (give this or `search`)")
    search: dict[str, Any] | None = Field(default=None, description="or a search method's config {method: beam, "
                                          "...} (`proctor.search`), with the same placeholders")
    iterations: list[int] | None = Field(default=None, description="only at these iterations (None: all)")
    tasks: int | None = Field(default=None, ge=1, description="the first N of the evaluation's tasks (of `panel`, "
                              "with one), for a costly method (None: all of them)")
    panel: Path | None = Field(default=None, description="a file of task ids of the evaluation's split, one a line "
                               "(as `TaskSection.panel`): this entry runs its first `tasks` instead of the "
                               "evaluation's, e.g. a costly method on games spread over task types")

    @model_validator(mode="after")
    def _one(self) -> EvalEntry:
        if (self.agent is None) == (self.search is None):
            raise ValueError(f"evaluation {self.name!r}: give exactly one of agent and search")
        if self.panel is not None:
            read_panel(self.panel)
        return self

    def check_agents(self, where: str) -> None:
        """The agent or search config against its registry (`proctor.pipeline.agent_fields`), with `$policy` and
        `$prm` for the loop's folders."""
        if self.agent is not None:
            check_agent(self.agent, f"{where}.agent", EVAL_FILLS)
        else:
            check_search(self.search, f"{where}.search", EVAL_FILLS)

    def section(self, evaluate: EvalSection) -> TaskSection:
        """The tasks this entry runs: the evaluation's, or its own panel's in the evaluation's split."""
        if self.panel is None:
            return evaluate
        return TaskSection(split=evaluate.split, panel=self.panel, tasks=self.tasks, samples=evaluate.samples,
                           batch=evaluate.batch)


class EvalSection(TaskSection):
    """The evaluations of each iteration: which tasks (the test split by default), and one entry per policy or
    search method."""

    split: str = TaskChoice.field_with("split")
    entries: list[EvalEntry] = Field(min_length=1, description="the evaluated rows, each on the same tasks and "
                                     "episode seeds (paired comparisons)")

    @model_validator(mode="after")
    def _entries_within(self) -> EvalSection:
        """An entry's panel is paired with the other rows on their common tasks: it must lie within listed ones."""
        listed = self.task_ids()
        if not isinstance(listed, list):
            return self
        known = set(listed)
        for entry in self.entries:
            if entry.panel is not None:
                outside = [t for t in entry.section(self).task_ids() if t not in known]
                if outside:
                    raise ValueError(f"evaluation {entry.name!r}: panel {str(entry.panel)!r}: {len(outside)} of the "
                                     f"entry's tasks are not among the evaluation's, e.g. {outside[0]!r}")
        return self

    def check_agents(self, where: str) -> None:
        """Each entry's agent or search config (`EvalEntry.check_agents`)."""
        for i, entry in enumerate(self.entries):
            entry.check_agents(f"{where}.entries[{i}]")


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
    completions: int = Field(default=2, ge=1, description="episodes completed after each candidate (its MC-Q "
                             "averages them)")
    per_source: int | None = Field(default=4, ge=1, description="states per rollout (None: all)")
    margin: float = Field(default=0.2, gt=0, le=1, description="a pair needs Q̃(chosen) − Q̃(rejected) ≥ this, on "
                          "the [0, 1] scale")
    gamma: float = Field(default=0.95, gt=0, le=1, description="γ: the discount of the candidates' MC-Q returns")
    batch: int = Field(default=32, ge=1, description="envs stepped together while completing")

    def check_agents(self, where: str) -> None:
        """The candidates and the completing agent (`$policy` for π_k) as their stage will validate them."""
        check_fields(CandidateConfig, self.candidates, f"{where}.candidates", {})
        if self.agent is not None:
            check_agent(self.agent, f"{where}.agent", POLICY_FILLS)


# -- the trainer sections -----------------------------------------------------------------------------------

#: the loop's folders as the trainer sections' loop fields name them (`StageSection.loop`): validation builds
#: each stage's config with these placeholders standing for folders the loop has not made yet
PLACEHOLDERS = ("$policy", "$prm", "$model", "$demos", "$rollouts", "$targets", "$candidates", "$out")

#: a pipeline value for a section field left None (`inherit`) or a trainer field the section does not have
PipelineValue = Callable[["PipelineConfig"], Any]


def _is_store(path: str) -> bool:
    return (Path(path) / "manifest.json").is_file()


@dataclasses.dataclass(frozen=True)
class LoopRef:
    """A section field that may name one of the loop's folders by a placeholder (`placeholders`: placeholder and
    what the loop fills in), which does not exist when the config is validated; any other value must be
    `other` (`exists`, when given, checks it now). The loop fills the placeholder in (`StageSection.stage_config`)."""

    placeholders: tuple[tuple[str, str], ...]
    other: str
    exists: Callable[[str], bool] | None = None

    def __call__(self, value: Any) -> Any:
        if value is None or str(value) in dict(self.placeholders):
            return value
        if str(value).startswith("$") or (self.exists is not None and not self.exists(str(value))):
            names = ", ".join(f"`{p}` ({what})" for p, what in self.placeholders)
            raise ValueError(f"{str(value)!r} is neither {names} nor {self.other}")
        return value

    def describe(self) -> str:
        return "; or " + ", ".join(f"`{p}`: {what}" for p, what in self.placeholders)


class _Part(_Section):
    """A typed part of a trainer section: `trainer`'s fields (the config class, or the sub-config, it becomes)
    but those the loop sets. Class attributes (set by `section_model`): what it is (messages), the fields the
    loop sets, the fields that take a pipeline value when None (`inherit`), and those that may name a loop's
    folder (`refs`)."""

    trainer: ClassVar[type[BaseModel]]
    what: ClassVar[str]
    loop_sets: ClassVar[tuple[str, ...]] = ()
    inherit: ClassVar[dict[str, PipelineValue]] = {}
    refs: ClassVar[dict[str, LoopRef]] = {}

    def values(self, cfg: PipelineConfig, folders: Mapping[str, str]) -> dict[str, Any]:
        """The trainer's input from this part: its values, with the loop's `folders` for placeholders and the
        pipeline's values for the `inherit` fields left None (omitted when the pipeline has none either: the
        trainer's default)."""
        dumped = self.model_dump()
        out: dict[str, Any] = {}
        for name in type(self).model_fields:
            value = getattr(self, name)
            if name not in self.trainer.model_fields:  # the union's tag (`kind`, `method`)
                continue
            if isinstance(value, _Part):
                out[name] = value.values(cfg, folders)
            elif name in self.refs and str(value) in folders:
                out[name] = folders[str(value)]
            elif name in self.inherit and value is None:
                if (inherited := self.inherit[name](cfg)) is not None:
                    out[name] = inherited
            else:
                out[name] = dumped[name]
        return out

    def placeholder_paths(self) -> list[tuple[str, ...]]:
        """Where this part names one of the loop's folders by placeholder."""
        paths: list[tuple[str, ...]] = [(name,) for name in self.refs if str(getattr(self, name)) in PLACEHOLDERS]
        for name in type(self).model_fields:
            if isinstance(part := getattr(self, name), _Part):
                paths += [(name, *p) for p in part.placeholder_paths()]
        return paths

    @classmethod
    def not_a_field(cls, name: str) -> str:
        fields = sorted(cls.model_fields)
        return (f"not a field of {cls.what} here" + (f" (the loop sets {', '.join(cls.loop_sets)})" if cls.loop_sets
                                                     else "")
                + did_you_mean(name, fields) + f"; fields: {', '.join(fields)}")

    @classmethod
    def error_line(cls, where: str, loc: tuple[Any, ...], error: Mapping[str, Any]) -> str:
        """One line for a validation error at `loc` in this part: `where.field: problem`."""
        owner: type[_Part] | None = cls
        for step in loc[:-1]:  # the part that holds the field
            field = owner.model_fields.get(str(step)) if owner is not None else None
            owner = field.annotation if field is not None and isinstance(field.annotation, type) and \
                issubclass(field.annotation, _Part) else None
        field = owner.model_fields.get(str(loc[-1])) if owner is not None and loc else None
        if error["type"] == "extra_forbidden" and owner is not None and loc:
            message = owner.not_a_field(str(loc[-1]))
        elif error["type"] == "missing" and owner is not None and field is not None:
            message = f"required by {owner.what}: {field.description}"
        else:
            message = error["msg"].removeprefix("Value error, ")
        return f"{'.'.join([where, *map(str, loc)])}: {message}"


class StageSection(_Part):
    """A trainer section: the loop builds its stage's config from it (`stage_config`). `loop` holds the fields
    the loop sets (a dotted path for a field of a part) with the placeholders of the folders they take; `forced`
    the trainer fields set from the pipeline (`env`)."""

    loop: ClassVar[dict[str, Any]] = {}
    forced: ClassVar[dict[str, PipelineValue]] = {}

    def stage_config(self, cfg: PipelineConfig, folders: Mapping[str, Any]) -> BaseModel:
        """The stage's validated config: this section's `values` and the pipeline's `forced` ones, with the
        `loop` fields set to the `folders` they name (a field whose folder is not given is left out)."""
        given = {key: str(value) for key, value in folders.items() if value is not None}
        data = {**self.values(cfg, given), **{name: get(cfg) for name, get in self.forced.items()}}
        for path, template in self.loop.items():
            names = template if isinstance(template, list) else [template]
            if any(str(n).startswith("$") and n not in given for n in names):
                continue
            value = [given.get(n, n) for n in names] if isinstance(template, list) else given.get(template, template)
            *parents, leaf = path.split(".")
            target = data
            for parent in parents:
                target = target.setdefault(parent, {})
            target[leaf] = value
        return self.trainer.model_validate(data)

    def check(self, name: str, cfg: PipelineConfig) -> None:
        """Build the stage's config now, with the loop's folders as placeholders: the first problem that is not
        the placeholders' (a folder the loop has not made yet) is one line naming `name.field`."""
        try:
            self.stage_config(cfg, {p: p for p in PLACEHOLDERS})
        except ValidationError as e:
            filled = [tuple(path.split(".")) for path in self.loop] + self.placeholder_paths()
            errors = [err for err in e.errors() if not any(err["loc"][:len(p)] == p for p in filled)]
            if errors:
                more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
                raise ValueError(self.error_line(name, errors[0]["loc"], errors[0]) + more) from None


def section_model(name: str, trainer: type[BaseModel], what: str, doc: str, *, base: type[_Part] = StageSection,
                  loop: Mapping[str, Any] | None = None, forced: Mapping[str, PipelineValue] | None = None,
                  exclude: tuple[str, ...] = (), inherit: Mapping[str, tuple[str, PipelineValue]] | None = None,
                  refs: Mapping[str, LoopRef] | None = None, defaults: Mapping[str, Any] | None = None,
                  fields: Mapping[str, tuple[Any, FieldInfo]] | None = None,
                  descriptions: Mapping[str, str] | None = None) -> type[_Part]:
    """A section model with `trainer`'s fields (their types, constraints, defaults and descriptions) but those the
    loop sets (`loop`'s top-level fields, `forced`, `exclude`), replaced or added by `fields`: an `inherit` field
    is None by default, its pipeline value then (`name: (what, value)`); a `refs` field may name a loop's folder
    (`LoopRef`); `defaults` are the loop's own defaults; `descriptions` describe trainer fields that have none."""
    loop, forced, inherit, refs = dict(loop or {}), dict(forced or {}), dict(inherit or {}), dict(refs or {})
    fields, defaults, descriptions = dict(fields or {}), dict(defaults or {}), dict(descriptions or {})
    left_out = {path for path in loop if "." not in path} | set(forced) | set(exclude)
    # the added fields (a union's tag) first, then the trainer's in its order (a validator may read earlier ones)
    model_fields: dict[str, Any] = {key: value for key, value in fields.items() if key not in trainer.model_fields}
    for field_name, info in trainer.model_fields.items():
        if field_name in left_out:
            continue
        annotation: Any = info.annotation  # its constraints and validators are in `info`
        if field_name in fields:
            annotation, info = fields[field_name]
        description = info.description or descriptions.get(field_name)
        if field_name in inherit:
            annotation = annotation | None
            info = FieldInfo.merge_field_infos(info, default=None, default_factory=None,
                                               description=f"{description} (None: {inherit[field_name][0]})")
        elif field_name in defaults:
            info = FieldInfo.merge_field_infos(info, default=defaults[field_name], default_factory=None,
                                               description=description)
        else:
            info = FieldInfo.merge_field_infos(info, description=description)
        if field_name in refs:
            annotation = Annotated[annotation, BeforeValidator(refs[field_name])]
            info = FieldInfo.merge_field_infos(info, description=f"{info.description}{refs[field_name].describe()}")
        model_fields[field_name] = (annotation, info)
    model = create_model(name, __base__=base, __doc__=doc, __module__=__name__, **model_fields)
    model.trainer, model.what = trainer, what
    model.loop_sets = tuple(sorted({*loop, *forced, *exclude}))
    model.inherit = {field_name: value for field_name, (_, value) in inherit.items()}
    model.refs = refs
    if issubclass(model, StageSection):
        model.loop, model.forced = loop, forced
    return model


def _seed(cfg: PipelineConfig) -> int:
    return cfg.seed


def _policy_prompt(cfg: PipelineConfig) -> Any:
    return cfg.policy_agent.get("prompt")


def _candidate_pairs(cfg: PipelineConfig) -> bool:
    return cfg.prm_candidates is not None


SEED = ("the pipeline's seed", _seed)
POLICY_PROMPT = ("the policy agent's prompt", _policy_prompt)
#: a trajectory store of the loop's, or one that exists now
ROLLOUTS_REF = LoopRef((("$rollouts", "the iteration's rollouts"),), "a trajectory store (no manifest.json)", _is_store)
ANCHOR_REF = LoopRef((("$demos", "the loop's demonstrations"), ("$rollouts", "the iteration's rollouts")),
                     "a trajectory store (no manifest.json)", _is_store)

SFTSection = section_model(
    "SFTSection", SFTConfig, "SFT", "SFT of π0 on the loop's demonstrations (`proctor.rl.sft`).",
    loop={"model": "$model", "data": "$demos", "output_dir": "$out"}, inherit={"seed": SEED})

class _HeadPRM(StageSection):
    @model_validator(mode="before")
    @classmethod
    def _old_fields(cls, data: Any) -> Any:
        """A section written for the earlier PRM trainer (`training:`, `model.dtype`) in today's fields, with a
        note for each (`proctor.prm.config.upgrade_old_fields`)."""
        return upgrade_old_fields(data, "prm.") if isinstance(data, dict) else data


HeadPRMModel = section_model(
    "HeadPRMModel", PRMModelSection, "the PRM head's model", "The PRM head's backbone and head.", base=_Part,
    refs={"backbone": LoopRef((("$policy", "π_k"), ("$model", "the starting model")), "a model folder or hub name")},
    defaults={"backbone": "$policy"},
    descriptions={"head": "the head on the backbone (`proctor.prm.heads`)",
                  "reward_tokens": "(bad, good) tokens of the `token` head", "trust_remote_code":
                  "let transformers run the backbone's own modelling code"})
HeadPRMData = section_model(
    "HeadPRMData", PRMDataSection, "the PRM head's data", "What the PRM head reads; the loop sets the data.",
    base=_Part, exclude=("train", "trajectories"),
    inherit={"format": ("`trajectories` (the step targets), `targets` with `prm_candidates` (the pairs)",
                        lambda cfg: "targets" if _candidate_pairs(cfg) else "trajectories"),
             "target": ("`targets.method`", lambda cfg: None if _candidate_pairs(cfg) else cfg.targets.method)},
    descriptions={"eval": "evaluation data (None: none)", "allow_missing_targets": "keep trajectories with a "
                  "step whose target is missing", "format": "how the data is stored"})
HeadPRMSection = section_model(
    "HeadPRMSection", PRMTrainConfig, "the PRM head",
    "A PRM head (`proctor prm train`) trained by the loop on π_k's step targets (regression), or on candidate "
    "pairs with `prm_candidates` (Bradley–Terry).", base=_HeadPRM,
    loop={"data.train": "$targets", "data.trajectories": ["$candidates"], "output_dir": "$out"},
    inherit={"seed": SEED, "loss": ("bce on step targets, bradley_terry on candidate pairs",
                                    lambda cfg: "bradley_terry" if _candidate_pairs(cfg) else "bce")},
    fields={"kind": (Literal["head"], Field(default="head", description="a PRM head (`proctor prm train`; the "
                                            "default)")),
            "model": (HeadPRMModel, Field(default_factory=HeadPRMModel, description="the backbone (default `$policy`: "
                                          "π_k) and its head")),
            "data": (HeadPRMData, Field(default_factory=HeadPRMData, description="how the targets are read"))},
    descriptions={"tokenization": "how steps become tokens (`proctor.prm.tokenize`)", "loss": "the objective "
                  "(`proctor.prm.objectives`)", "packing": "several examples per row (attention kept within "
                  "each)"})

LikelihoodPRMSection = section_model(
    "LikelihoodPRMSection", LikelihoodPRMConfig, "the likelihood PRM",
    "The likelihood PRM σ(β·log π_θ(a|s) + b) from π_k (`proctor.prm.likelihood`), on the step targets.",
    loop={"policy": "$policy", "data": ["$targets"], "output_dir": "$out"},
    inherit={"seed": SEED, "prompt": POLICY_PROMPT, "target": ("`targets.method`", lambda cfg: cfg.targets.method)},
    refs={"anchor": ANCHOR_REF},
    fields={"kind": (Literal["likelihood"], Field(description="the likelihood PRM (`proctor.prm.likelihood`)"))})


class _PanelTasks(StageSection):
    """A trainer section that picks tasks (`tasks`, `split`) and may take them from a panel file (`panel`, as
    `TaskSection`'s): the trainer gets the panel's ids (its first `tasks`)."""

    _panel_ids: list[str] | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _panel(self) -> _PanelTasks:
        panel = getattr(self, "panel", None)
        if panel is not None:
            if isinstance(getattr(self, "tasks", None), list):
                raise ValueError("give a panel file or a list of tasks, not both (`tasks: N` takes the panel's first N)")
            self._panel_ids = read_panel(panel)
        return self

    def values(self, cfg: PipelineConfig, folders: Mapping[str, str]) -> dict[str, Any]:
        out = super().values(cfg, folders)
        if self._panel_ids is not None:
            tasks = getattr(self, "tasks", None)
            out["tasks"] = self._panel_ids[:tasks] if isinstance(tasks, int) else list(self._panel_ids)
        return out


OnlineDPOSection = section_model(
    "OnlineDPOSection", OnlineDPOConfig, "online DPO",
    "Online DPO of π_k against Q_k (`proctor.rl.online_dpo`; the default improvement).", base=_PanelTasks,
    loop={"policy": "$policy", "prm": "$prm", "output_dir": "$out"},
    forced={name: attrgetter(name) for name in EnvRef.model_fields},
    inherit={"seed": SEED, "agent": ("`policy_agent`", lambda cfg: cfg.policy_agent),
             "workers": ("the pipeline's `workers`", lambda cfg: cfg.workers)},
    refs={"states_from": ROLLOUTS_REF},
    fields={"method": (Literal["online-dpo"], Field(default="online-dpo", description="online DPO "
                                                    "(`proctor.rl.online_dpo`; the default)")),
            "agent": (dict[str, Any] | None, Field(
                default=None, description="the policy's agent config while it samples, without `model` (the loop's; "
                "None: `policy_agent`)")),
            "panel": (Path | None, Field(default=None, description="a file of task ids of `split`, one a line "
                                         "(`#` comments): the rollouts' tasks (`tasks: N`: its first N)"))})

BonDistillSection = section_model(
    "BonDistillSection", BonDistillConfig, "best-of-N distillation",
    "Best-of-N(π_k, Q_k) distilled into a student (`proctor.rl.bon_distill`); needs the `choice` policy agent.",
    loop={"policy": "$policy", "prm": "$prm", "output_dir": "$out"},
    inherit={"seed": SEED, "prompt": POLICY_PROMPT},
    refs={"states_from": ROLLOUTS_REF,
          "init": LoopRef((("$prm", "Q_k's LM"), ("$policy", "π_k")), "a model folder", lambda p: Path(p).is_dir())},
    fields={"method": (Literal["bon-distill"], Field(description="best-of-N distillation "
                                                     "(`proctor.rl.bon_distill`)"))})


class _Targets(StageSection):
    @field_validator("method", check_fields=False)
    @classmethod
    def _registered(cls, method: str) -> str:
        import proctor.credit  # noqa: F401  (fills the registry)
        from proctor.credit.registry import get_method

        try:
            get_method(method)
        except KeyError as e:
            raise ValueError(e.args[0]) from None
        return method

    @field_validator("params", check_fields=False)
    @classmethod
    def _params(cls, params: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        from proctor.credit.registry import make_config

        if "method" in info.data:
            make_config(info.data["method"], params)
        return params


TargetsSection = section_model(
    "TargetsSection", TargetsConfig, "the targets stage",
    "Per-step targets of π_k's rollouts (`proctor.credit`): a registered method and its parameters.", base=_Targets,
    loop={"input": "$rollouts", "out": "$out", "split": "keep", "write_back": "$targets"},
    fields={"method": (str, Field(default="mc-q", description="a registered credit method (`proctor targets "
                                  "--help`)"))},
    descriptions={"fractions": "train/valid/test shares of a split by task (unused: the loop keeps the splits)",
                  "seed": "seed of a split by task (unused: the loop keeps the splits)"})

PRMSection = Annotated[HeadPRMSection | LikelihoodPRMSection, Field(discriminator="kind")]
ImproveSection = Annotated[OnlineDPOSection | BonDistillSection, Field(discriminator="method")]
#: the trainer sections: (the union's tag, its members by tag, the first the default; untagged: None, {"": model})
TRAINER_SECTIONS: dict[str, tuple[str | None, dict[str, type[_Part]]]] = {
    "sft": (None, {"": SFTSection}), "prm": ("kind", {"head": HeadPRMSection, "likelihood": LikelihoodPRMSection}),
    "improve": ("method", {"online-dpo": OnlineDPOSection, "bon-distill": BonDistillSection}),
    "targets": (None, {"": TargetsSection})}


#: the sections that say how a run is executed, not what it computes: left out of its identity (`identity`)
EXECUTION_SECTIONS = ("launch", "devices", "prm_serving")


class PipelineConfig(EnvRef, _Section):
    """The whole loop (see module docstring): its env (`EnvRef`, the same for every stage) and its sections.
    Sections not given take the defaults shown."""

    out: Path = Field(description="the run folder: every stage's output, manifest.json, summary.json and "
                      "report.html (re-run to resume)")
    seed: int = Field(default=0, description="the run's seed: every stage's seed derives from it")
    workers: int = Field(default=0, ge=0, description="env worker processes of every stage that steps envs "
                         "(demonstrations, rollouts, candidates, evaluations, the monitor, online DPO's rollouts; "
                         "0: in the stage's own process)")
    step_timeout: float | None = Field(default=60.0, gt=0, description="with workers: seconds before an env reset "
                                       "or step counts as hung (its episode ends with env_error)")
    model: StartModelSection = Field(description="the starting model SFT fine-tunes into π0: a folder or hub "
                                     "name, or a tiny model built here")
    demos: DemoSection = Field(default_factory=DemoSection, description="the demonstrations SFT learns from")
    sft: SFTSection = Field(default_factory=SFTSection,
                            description="SFT of π0: SFTConfig fields but model/data/output_dir (the loop's)")
    policy_agent: dict[str, Any] = Field(default_factory=lambda: {"kind": "hf"},
                                         description="how the policy acts; `model` is filled in")
    iterations: int = Field(default=1, ge=0, description="policy-improvement iterations after SFT")
    rollout: TaskSection = Field(default_factory=lambda: TaskSection(split="train", samples=4),
                                 description="π_k's rollouts each iteration, whose step targets train Q_k")
    targets: TargetsSection = Field(
        default_factory=lambda: TargetsSection(method="mc-q", params={"gamma": 0.95}),
        description="the step targets of π_k's rollouts: a credit method and its params (`proctor.credit`)")
    prm_candidates: CandidatesSection | None = Field(
        default=None, description="train the PRM on candidate-action pairs at the policy's states (None: on "
        "`targets` of its rollouts)")
    prm: PRMSection = Field(default_factory=HeadPRMSection,
                            description="Q_k: `kind: head` (default) and PRMTrainConfig fields (model.backbone "
                            "`$policy`, π_k, or `$model`, the starting model), or `kind: likelihood` and "
                            "LikelihoodPRMConfig fields (from π_k, its agent's prompt; `anchor: $demos` is the "
                            "loop's demonstrations, `$rollouts` the iteration's rollouts)")
    improve: ImproveSection = Field(default_factory=OnlineDPOSection,
                                    description="π_{k+1}: `method: online-dpo` (default) and OnlineDPOConfig fields "
                                    "(not policy/prm/output_dir/env), or `method: bon-distill` and "
                                    "BonDistillConfig fields (`init: $prm`: from Q_k's LM); `states_from: "
                                    "$rollouts` takes the states from the iteration's rollouts")
    evaluate: EvalSection = Field(description="the evaluations after each iteration (and of π0)")
    generation: GenerationBackend = Field(default_factory=GenerationBackend, description="where π_k's samples for "
                                         "rollouts, candidates and evaluations are generated: `engine: vllm` serves "
                                         "each iterate with a managed vLLM server (`proctor.rl.served_policy`); the "
                                         "improvement samples from it too (attached), unless the `improve` section "
                                         "sets a vLLM `generation` of its own")
    monitor: MonitorSection | None = Field(default=None, description="the reward-hacking monitor after each "
                                           "iteration's evaluation (proctor.pipeline.monitor; None: off)")
    launch: LaunchSection = Field(default_factory=LaunchSection, description="how the training stages (SFT, the "
                                  "PRM, the improvement) run: in this process, or in N processes per node under "
                                  "torchrun / accelerate launch, on one or several nodes (proctor.pipeline.launch)")
    devices: DevicePlan = Field(default_factory=DevicePlan, description="which CUDA devices the vLLM server and the "
                                "launched training stages get (None for both: every part on every GPU, the server "
                                "stopped while a stage trains)")
    prm_serving: PRMServingSection = Field(default_factory=PRMServingSection, description="where the evaluations "
                                           "score with Q_k: loaded by each (local), or served by the loop's own "
                                           "`proctor prm serve` process (server; proctor.pipeline.prm_server)")

    @field_validator("policy_agent")
    @classmethod
    def _policy_agent(cls, agent: dict[str, Any]) -> dict[str, Any]:
        """An agent of the policy's model (the loop sets its `model` to π_k), against the agent registry."""
        kind = agent.get("kind")
        config = agent_class(kind) if isinstance(kind, str) else None
        if config is not None and "model" not in config.model_fields:
            raise ValueError(f"policy_agent.kind: {NOT_A_MODEL.format(kind=kind)}")
        check_agent({**agent, "model": "$policy"}, "policy_agent", POLICY_FILLS)
        return agent

    @field_validator("demos", "prm_candidates", "evaluate")
    @classmethod
    def _section_agents(cls, section: Any, info: ValidationInfo) -> Any:
        """The section's agent and search configs against their registries: one line naming the field's path
        (`evaluate.entries[1].agent.n: ...`) before any stage runs."""
        if section is not None:
            section.check_agents(info.field_name)
        return section

    @model_validator(mode="after")
    def _devices_fit(self) -> PipelineConfig:
        """The device plan agrees with the processes and the server's parallelism it feeds."""
        training, generation = self.devices.training, self.devices.generation
        if training is not None:
            if self.launch.nodes > 1:
                raise ValueError("devices.training: a device plan is for one node (on several, each node's launcher "
                                 "takes its GPUs)")
            if self.launch.processes != len(training):
                raise ValueError(f"devices.training: {len(training)} GPUs, but launch.processes is "
                                 f"{self.launch.processes} (one process each)")
        if generation is not None:
            server = self.generation.server
            if self.generation.engine != "vllm":
                raise ValueError("devices.generation: the GPUs of the vLLM server, but generation.engine is not vllm")
            if server.tensor_parallel_size * server.data_parallel_size != len(generation):
                raise ValueError(f"devices.generation: {len(generation)} GPUs, but the server's tensor × data "
                                 f"parallel size is {server.tensor_parallel_size} × {server.data_parallel_size}")
        return self

    @field_validator(*TRAINER_SECTIONS, mode="wrap")
    @classmethod
    def _section(cls, value: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo) -> Any:
        """A trainer section (its union's tag defaults to the first member's); its first problem is one line
        naming `section.field`."""
        name = info.field_name
        assert name is not None
        tag, members = TRAINER_SECTIONS[name]
        default_tag = tag is not None and isinstance(value, dict) and tag not in value
        if default_tag:
            value = {tag: next(iter(members)), **value}
        try:
            section = handler(value)
            if default_tag:  # the default, not given (`_as_given`)
                section.model_fields_set.discard(tag)
            return section
        except ValidationError as e:
            err, loc, model = e.errors()[0], e.errors()[0]["loc"], next(iter(members.values()))
            if err["type"] == "union_tag_invalid":
                raise ValueError(f"{name}.{tag}: {value.get(tag)!r} is not one of {', '.join(members)}") from None
            if tag is not None and loc and loc[0] in members:
                model, loc = members[str(loc[0])], loc[1:]
            more = f" (and {e.error_count() - 1} more)" if e.error_count() > 1 else ""
            raise ValueError(model.error_line(name, loc, err) + more) from None

    @field_serializer(*TRAINER_SECTIONS)
    def _as_given(self, section: _Part, info: SerializationInfo) -> dict[str, Any]:
        """A trainer section is dumped as given (in `manifest.json`, the config a resume must match): the fields it
        sets, not the trainer's defaults, which a later version may add to; each stage records its whole config."""
        return section.model_dump(mode=info.mode, exclude_unset=True)

    @model_validator(mode="after")
    def _likelihood_on_step_targets(self) -> PipelineConfig:
        if isinstance(self.prm, LikelihoodPRMSection) and self.prm_candidates is not None:
            raise ValueError("prm.kind 'likelihood' trains on step targets, not on candidate pairs (prm_candidates)")
        return self

    @model_validator(mode="after")
    def _bon_distill_chooses(self) -> PipelineConfig:
        if isinstance(self.improve, BonDistillSection) and self.policy_agent.get("kind") != "choice":
            raise ValueError(f"improve.method: bon-distill needs the `choice` policy agent (it distils over the env's "
                             f"admissible actions); policy_agent.kind is {self.policy_agent.get('kind')!r}")
        return self

    @model_validator(mode="after")
    def _stages_build(self) -> PipelineConfig:
        """Every trainer section makes its stage's config now (`StageSection.check`), before any stage runs."""
        for name in TRAINER_SECTIONS:
            getattr(self, name).check(name, self)
        return self

    @model_validator(mode="after")
    def _monitored_entry(self) -> PipelineConfig:
        if self.monitor is not None:
            self.monitored_entry()
        return self

    def identity(self) -> dict[str, Any]:
        """What a run folder's manifest records as this run's config, which a resume must match: every field but
        the execution sections (`EXECUTION_SECTIONS`: how many processes, which GPUs, where Q_k is scored), which
        change where the run goes, not what it computes."""
        return self.model_dump(mode="json", exclude=set(EXECUTION_SECTIONS))

    @classmethod
    def recorded_identity(cls, recorded: Any) -> dict[str, Any]:
        """A recorded `identity` as this version of the code reads it (fields added since take their defaults,
        renamed ones move, each with its note); a ValueError when it no longer validates."""
        return cls.model_validate(recorded).identity()

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

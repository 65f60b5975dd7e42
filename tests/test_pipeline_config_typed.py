"""`PipelineConfig`'s trainer sections are typed: each is its stage's config class less the fields the loop sets
(`proctor.pipeline.config.section_model`), `prm` and `improve` are unions tagged by `kind` and `method`, a bad
field is one line naming `section.field` at validation, and the loop builds its stages' configs from them."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from proctor.credit.stage import TargetsConfig
from proctor.pipeline import PipelineConfig
from proctor.pipeline.config import (
    TRAINER_SECTIONS,
    BonDistillSection,
    HeadPRMData,
    HeadPRMModel,
    HeadPRMSection,
    LikelihoodPRMSection,
    OnlineDPOSection,
    SFTSection,
    TargetsSection,
)
from proctor.prm.config import PRMTrainConfig
from proctor.rl.online_dpo import OnlineDPOConfig
from proctor.rl.sft import SFTConfig
from test_pipeline import toy_config

BON = {"method": "bon-distill", "init": "$prm", "states_from": "$rollouts"}
SECTIONS = [SFTSection, HeadPRMSection, HeadPRMModel, HeadPRMData, LikelihoodPRMSection, OnlineDPOSection,
            BonDistillSection, TargetsSection]


def config(tmp_path, **sections) -> PipelineConfig:
    return PipelineConfig.model_validate({**toy_config(tmp_path), **sections})


def one_line(tmp_path, **sections) -> str:
    """The one error of validating the toy config with `sections`: a single line."""
    with pytest.raises(ValidationError) as info:
        config(tmp_path, **sections)
    [error] = info.value.errors()
    assert "\n" not in error["msg"]
    return error["msg"].removeprefix("Value error, ")


def test_prm_and_improve_are_tagged_unions_with_defaults(tmp_path):
    cfg = config(tmp_path)
    assert type(cfg.prm) is HeadPRMSection and cfg.prm.kind == "head"  # `kind` left out: a PRM head
    assert type(cfg.improve) is OnlineDPOSection and cfg.improve.method == "online-dpo"
    assert type(cfg.sft) is SFTSection and type(cfg.targets) is TargetsSection
    cfg = config(tmp_path, prm={"kind": "likelihood", "anchor": "$demos", "anchor_weight": 1.0}, improve=BON)
    assert type(cfg.prm) is LikelihoodPRMSection and str(cfg.prm.anchor) == "$demos"
    assert type(cfg.improve) is BonDistillSection and cfg.improve.init == "$prm"
    # the sections round-trip through the manifest's JSON, where they are recorded as given (the resume key)
    dumped = cfg.model_dump(mode="json")
    assert PipelineConfig.model_validate(dumped) == cfg
    assert dumped["prm"] == {"kind": "likelihood", "anchor": "$demos", "anchor_weight": 1.0} and dumped["improve"] == BON
    assert config(tmp_path).model_dump(mode="json")["prm"] == toy_config(tmp_path)["prm"]  # no `kind: head` added
    assert config(tmp_path, prm={}).prm == config(tmp_path, prm={"kind": "head"}).prm
    assert one_line(tmp_path, prm={"kind": "lik"}) == "prm.kind: 'lik' is not one of head, likelihood"
    assert one_line(tmp_path, improve={"method": "dpo"}) == "improve.method: 'dpo' is not one of online-dpo, bon-distill"


@pytest.mark.parametrize(("section", "values", "message"), [
    ("sft", {"stesp": 3}, ("sft.stesp: not a field of SFT here (the loop sets data, model, output_dir) (did you mean "
                          "'steps'?); fields: ")),
    ("sft", {"output_dir": "x"}, "sft.output_dir: not a field of SFT here (the loop sets"),
    ("sft", {"steps": 0}, "sft.steps: Input should be greater than or equal to 1"),
    ("prm", {"los": "bce"}, "prm.los: not a field of the PRM head here"),
    ("prm", {"model": {"backbone": "$modle"}}, ("prm.model.backbone: '$modle' is neither `$policy` (π_k), `$model` "
                                               "(the starting model) nor a model folder or hub name")),
    ("prm", {"data": {"train": "x"}}, ("prm.data.train: not a field of the PRM head's data here (the loop sets train, "
                                      "trajectories)")),
    ("prm", {"stesp": 3}, ("prm.stesp: not a field of the PRM head here (the loop sets data.train, data.trajectories, "
                          "output_dir) (did you mean 'steps'?)")),
    ("prm", {"training": {"output_dir": "x"}}, "prm.output_dir: not a field of the PRM head here (the loop sets"),
    ("prm", {"loss": "bradley_terry"}, "prm: loss 'bradley_terry' reads preference pairs"),  # the trainer's own check
    ("prm", {"kind": "likelihood", "policy": "x"}, "prm.policy: not a field of the likelihood PRM here"),
    ("prm", {"kind": "likelihood", "anchor": "$demo"}, "prm.anchor: '$demo' is neither `$demos`"),
    ("improve", {"learning_rte": 1e-5}, ("improve.learning_rte: not a field of online DPO here (the loop sets env, "
                                        "env_kwargs, env_module, output_dir, policy, prm) (did you mean 'learning_rate'?)")),
    ("improve", {"states_from": "$rollout"}, "improve.states_from: '$rollout' is neither `$rollouts`"),
    ("improve", {"training_args": {"optimm": "adamw_torch"}}, ("improve.training_args: training_args.optimm: not a "
                                                              "transformers.TrainingArguments field")),
    ("improve", {"method": "bon-distill"}, "improve.states_from: required by best-of-N distillation: "),
    ("improve", {**BON, "n_actions": 4}, "improve.n_actions: not a field of best-of-N distillation here"),
    ("improve", {**BON, "init": "$pr"}, ("improve.init: '$pr' is neither `$prm` (Q_k's LM), `$policy` (π_k) nor a "
                                        "model folder")),
    ("targets", {"method": "mc-qq"}, "targets.method: unknown credit method 'mc-qq'"),
    ("targets", {"params": {"gamma": 2.0}}, "targets.params: bad parameters for method 'mc-q': gamma"),
    ("targets", {"write_back": "x"}, "targets.write_back: not a field of the targets stage here"),
])
def test_a_bad_field_is_one_line_naming_section_and_field(tmp_path, section, values, message):
    assert one_line(tmp_path, **{section: values}).startswith(message)


def test_the_loop_builds_typed_stage_configs_from_the_sections(tmp_path):
    cfg = config(tmp_path, seed=7)
    sft = cfg.sft.stage_config(cfg, {"$model": "m", "$demos": "d", "$out": "o"})
    assert isinstance(sft, SFTConfig) and sft.seed == 7 and sft.steps == 3 and str(sft.data) == "d"  # seed: the pipeline's
    prm = cfg.prm.stage_config(cfg, {"$policy": "p", "$targets": "t", "$out": "o"})
    assert isinstance(prm, PRMTrainConfig) and prm.model.backbone == "p" and prm.loss == "bce"
    assert (prm.data.format, prm.data.target, prm.data.train) == ("trajectories", "mc-q", "t")
    assert prm.steps == 3 and prm.batch_size == 4 and str(prm.output_dir) == "o" and prm.training_args == {}
    dpo = cfg.improve.stage_config(cfg, {"$policy": "p", "$prm": "q", "$out": "o"})
    assert isinstance(dpo, OnlineDPOConfig) and dpo.env == "household" and dpo.agent.temperature == 4.0
    assert dpo.agent.model == "p"  # the loop's policy, in the agent the section gives
    targets = cfg.targets.stage_config(cfg, {"$rollouts": "r", "$out": "o", "$targets": "o/trajectories"})
    assert isinstance(targets, TargetsConfig) and targets.split == "keep" and str(targets.write_back) == "o/trajectories"
    # placeholders: `$model` for the head's backbone, `$demos` / `$rollouts` for a likelihood PRM's anchor
    cfg = config(tmp_path, prm={"model": {"backbone": "$model"}, "data": {"target": "td"}})
    prm = cfg.prm.stage_config(cfg, {"$policy": "p", "$model": "start", "$targets": "t", "$out": "o"})
    assert prm.model.backbone == "start" and prm.data.target == "td"  # a field given wins over the pipeline's
    cfg = config(tmp_path, prm={"kind": "likelihood", "anchor": "$demos", "anchor_weight": 1.0})
    assert cfg.prm.values(cfg, {"$demos": "run/demos"})["anchor"] == "run/demos"
    assert cfg.prm.values(cfg, {})["prompt"] == {"history": 2, "memory": True}  # the policy agent's prompt


def test_the_schema_types_every_trainer_section(tmp_path):
    schema = PipelineConfig.model_json_schema()
    defs = schema["$defs"]

    def members(prop: dict) -> list[dict]:
        refs = [prop] if "$ref" in prop else prop.get("oneOf", prop.get("anyOf", []))
        return [defs[r["$ref"].rsplit("/", 1)[-1]] for r in refs]

    for name, (tag, models) in TRAINER_SECTIONS.items():
        prop = schema["properties"][name]
        found = members(prop)
        assert [d["title"] for d in found] == [m.__name__ for m in models.values()], name
        for d in found:  # closed objects with their fields, not a free `additionalProperties: true` dict
            assert d["type"] == "object" and d["additionalProperties"] is False and d["properties"], name
        if tag is not None:
            assert prop["discriminator"]["propertyName"] == tag
    assert defs["HeadPRMSection"]["properties"]["model"] == {"$ref": "#/$defs/HeadPRMModel",
                                                             "description": "the backbone (default `$policy`: π_k) "
                                                                            "and its head"}


def test_every_section_field_has_a_description():
    for model in SECTIONS:
        missing = [name for name, field in model.model_fields.items() if not field.description]
        assert missing == [], model.__name__
    for name in TRAINER_SECTIONS:
        assert PipelineConfig.model_fields[name].description


def entries(tmp_path, i: int, **fields) -> dict:
    """The toy config's `evaluate` section with entry i's fields replaced."""
    evaluate = toy_config(tmp_path)["evaluate"]
    return {**evaluate, "entries": [{**e, **fields} if j == i else e for j, e in enumerate(evaluate["entries"])]}


POLICY = {"kind": "choice", "model": "$policy"}


@pytest.mark.parametrize(("field", "value", "message"), [
    ("policy_agent", {"kind": "choice", "temperture": 1.0}, ("policy_agent.temperture: not a field of agent kind "
                                                            "'choice' (did you mean 'temperature'?); fields: ")),
    ("policy_agent", {"kind": "choice", "temperature": "hot"}, "policy_agent.temperature: Input should be a valid "),
    ("policy_agent", {"kind": "expert"}, "policy_agent.kind: agent kind 'expert' does not sample from a model"),
    ("policy_agent", {"kind": "choise"}, "policy_agent.kind: unknown agent kind 'choise' (did you mean 'choice'?)"),
    ("demos", {"agent": {"kind": "expert", "expert": "orcle"}}, "demos.agent.expert: unknown expert 'orcle'"),
    ("demos", {"agent": {"kind": "hf", "model": "$policy"}}, ("demos.agent.model: '$policy' is not a placeholder the "
                                                              "loop fills in here (here: none)")),
    ("prm_candidates", {"candidates": {"randm": 2}}, ("prm_candidates.candidates.randm: not a field of "
                                                     "CandidateConfig (did you mean 'random'?)")),
    ("prm_candidates", {"agent": {**POLICY, "n": 2}}, "prm_candidates.agent.n: not a field of agent kind 'choice'"),
    ("prm_candidates", {"agent": {**POLICY, "model": "$prm"}}, ("prm_candidates.agent.model: '$prm' is not a "
                                                                 "placeholder the loop fills in here (here: `$policy`")),
    ("evaluate", (1, {"agent": {"kind": "best-of-n", "n": "x", "prm": "$prm", "agent": POLICY}}),
     "evaluate.entries[1].agent.n: Input should be a valid integer"),
    ("evaluate", (1, {"agent": {"kind": "best-of-n", "prm": "$prn", "agent": POLICY}}),
     "evaluate.entries[1].agent.prm: '$prn' is not a placeholder the loop fills in here"),
    ("evaluate", (1, {"agent": {"kind": "best-of-n", "prm": "nowhere", "agent": POLICY}}),
     "evaluate.entries[1].agent.prm: nowhere: no PRM folder there"),
    ("evaluate", (0, {"agent": {"kind": "mixture", "components": [{"agent": {"kind": "random", "sed": 1},
                                                                    "weight": 1}]}}),
     "evaluate.entries[0].agent.components[0].agent.sed: not a field of agent kind 'random' (did you mean 'seed'?)"),
    ("evaluate", (2, {"search": {"method": "beem"}}), "evaluate.entries[2].search.method: unknown search method 'beem'"),
    ("evaluate", (2, {"search": {"method": "beam", "agent": {"kind": "hff"}, "prm": "$prm"}}),
     "evaluate.entries[2].search.agent: unknown agent kind 'hff' (did you mean 'hf'?)"),
])
def test_a_bad_agent_field_is_one_line_naming_its_path(tmp_path, field, value, message):
    if field == "evaluate":
        value = entries(tmp_path, value[0], **value[1])
    line = one_line(tmp_path, **{field: value})
    assert line.startswith(message), line


def test_agents_are_checked_as_written_and_recorded_as_written(tmp_path):
    """Placeholders where the loop fills in a folder validate; the sections' agent and search configs are dumped
    (the run's identity) as given, with no defaults added."""
    raw = toy_config(tmp_path)
    cfg = config(tmp_path, prm_candidates={"agent": POLICY, "candidates": {"random": 2}})
    dumped = cfg.identity()
    assert dumped["policy_agent"] == raw["policy_agent"] and dumped["demos"]["agent"] == raw["demos"]["agent"]
    assert [e.get("agent") or e.get("search") for e in dumped["evaluate"]["entries"]] == [
        e.get("agent") or e.get("search") for e in raw["evaluate"]["entries"]]
    assert dumped["prm_candidates"]["agent"] == POLICY and dumped["prm_candidates"]["candidates"] == {"random": 2}
    assert PipelineConfig.recorded_identity(dumped) == dumped  # a resume reads its recorded config the same

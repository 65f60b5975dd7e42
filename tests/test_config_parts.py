"""Config parts (`proctor.parts`): the env reference, the task choice, the optimisation and the clipped policy
gradient are each declared once and composed into the configs that share them; the configs keep their flat keys
and their own defaults, the env is checked at validation in each, and the reference documents each part once."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from proctor.envs.ref import EnvRef, TaskChoice
from proctor.evaluation import EvalConfig
from proctor.parts import Part, is_part
from proctor.pipeline import PipelineConfig
from proctor.pipeline.run import plan_stages
from proctor.rl.archer import ArCHerConfig
from proctor.rl.grpo import GRPOConfig
from proctor.rl.ppo import PPOConfig
from proctor.rl.step_rows import ClippedPolicyGradient
from proctor.rollout import RolloutConfig
from proctor.search.run import SearchRunConfig
from proctor.training.config import OptimizationConfig, TaskSelection
from test_docs import hook
from test_pipeline import toy_config

#: documented fields that share a part field's name but are another thing (config → what it is)
NAMESAKES = {
    ("env", "QuickstartConfig"): "the preset's env",
    ("env", "VLLMServerConfig"): "environment variables",
    ("split", "TargetsConfig"): "assign splits, or keep them",
    ("tasks", "EvalEntry"): "the first N of the evaluation's tasks",
    ("aggregation", "BeamConfig"): "the step scores' aggregation (search)",
    ("aggregation", "DVTSConfig"): "the step scores' aggregation (search)",
    ("aggregation", "TrajectoryBestOfNConfig"): "the step scores' aggregation (search)",
}


def test_every_documented_field_of_a_parts_name_is_the_parts_field():
    """No config declares its own `env_kwargs`, `tasks`, `clip_low`, ... (with a drifted description)."""
    models = hook().config_models()
    drifted = [(name, model.__name__) for part in (EnvRef, TaskChoice, ClippedPolicyGradient)
               for name, field in part.model_fields.items() for model in models
               if name in model.model_fields and model.model_fields[name].description != field.description
               and (name, model.__name__) not in NAMESAKES]
    assert drifted == []
    for config in (RolloutConfig, EvalConfig, SearchRunConfig, TaskSelection, PipelineConfig):
        assert issubclass(config, EnvRef) and is_part(config) == (config is TaskSelection)
    assert all(is_part(p) and issubclass(p, Part) for p in (EnvRef, TaskChoice, OptimizationConfig,
                                                            ClippedPolicyGradient, TaskSelection))


def test_each_config_keeps_its_defaults():
    pg = ("ppo_epochs", "minibatch_size", "clip_low", "clip_high", "aggregation", "kl_coef", "kl_estimator")

    def defaults(config: type, names: tuple[str, ...]) -> tuple:
        return tuple(config.model_fields[n].default for n in names)

    assert defaults(GRPOConfig, pg) == (1, 16, 0.2, None, "token-mean", 0.0, "k3")
    assert defaults(PPOConfig, pg) == (2, 16, 0.2, None, "token-mean", 0.0, "k3")
    assert defaults(ArCHerConfig, ("minibatch_size", "aggregation", "kl_coef", "kl_estimator")) == (
        16, "seq-mean-token-sum", 0.0, "k3")
    with pytest.raises(ValidationError, match="ppo_epochs"):  # a redeclared default keeps the part's constraint
        PPOConfig.model_validate({"policy": "p", "output_dir": "o", "env": "household", "ppo_epochs": 0})
    for config in (RolloutConfig, EvalConfig, SearchRunConfig):
        assert config.model_fields["split"].default == "test"
    assert TaskSelection.model_fields["split"].default == "train"
    cfg = PipelineConfig.model_validate({**toy_config("run"), "demos": {}, "rollout": {"samples": 2}})
    assert (cfg.demos.split, cfg.rollout.split, cfg.evaluate.split) == ("train", "train", "test")


@pytest.mark.parametrize("config", [RolloutConfig, EvalConfig, SearchRunConfig, GRPOConfig, PipelineConfig])
def test_the_env_is_checked_at_validation_in_every_config(config, tmp_path):
    data = {RolloutConfig: {"out": str(tmp_path / "o")}, EvalConfig: {"out": str(tmp_path / "o"), "agent": "random"},
            SearchRunConfig: {"out": str(tmp_path / "o"), "search": {"method": "beam"}},
            GRPOConfig: {"policy": "p", "output_dir": str(tmp_path / "o")},
            PipelineConfig: toy_config(tmp_path / "run")}[config]
    with pytest.raises(ValidationError) as err:
        config.model_validate({**data, "env": "household", "env_kwargs": {"max_step": 3}})
    first = err.value.errors()[0]
    assert first["loc"] == ("env_kwargs",) and "has no argument 'max_step' (did you mean 'max_steps'?)" in first["msg"]
    with pytest.raises(ValidationError) as err:
        config.model_validate({**data, "env": "housheold"})
    first = err.value.errors()[0]
    assert first["loc"] == ("env",) and "unknown environment 'housheold' (did you mean 'household'?)" in first["msg"]


def test_the_pipelines_env_module_reaches_its_stages(tmp_path):
    cfg = PipelineConfig.model_validate({**toy_config(tmp_path / "run"), "env_module": "test_rollout_envs"})
    stages = {stage.key: stage for stage in plan_stages(cfg)}
    assert stages["demos"].config().env_module == "test_rollout_envs"
    assert stages["iter-0/rollouts"].config().env_module == "test_rollout_envs"
    dpo = cfg.improve.stage_config(cfg, {"$policy": "p", "$prm": "q", "$out": "o"})
    assert (dpo.env, dpo.env_module) == ("household", "test_rollout_envs")  # the loop sets them: not section fields
    assert "env_module" not in type(cfg.improve).model_fields


def test_the_reference_documents_each_part_once_with_its_users():
    ref = hook()
    pages = {uri: make() for uri, make in ref.PAGES.items() if uri.startswith("reference/config/")}
    parts = pages.pop("reference/config/parts.md")
    for part, users in ((EnvRef, ["RolloutConfig", "EvalConfig", "PipelineConfig", "TaskSelection"]),
                        (ClippedPolicyGradient, ["GRPOConfig", "PPOConfig"]),
                        (OptimizationConfig, ["SFTConfig", "OnlineConfig"])):
        heading = f"## {part.__name__} {{#"
        assert parts.count(heading) == 1 and all(heading not in page for page in pages.values())
        used = parts.split(heading, 1)[1].split("\n\n", 2)[1]
        assert all(f"`{u}`" in used for u in users), used
    rollout = pages["reference/config/rollout.md"].split("## RolloutConfig", 1)[1].split("\n## ", 1)[0]
    assert "[EnvRef](parts.md#envref)" in rollout and "| `env_kwargs`" not in rollout and "| `agent`" in rollout
    ppo = pages["reference/config/trainers.md"].split("## train ppo", 1)[1].split("\n## ", 1)[0]
    assert "| `ppo_epochs` | `int` | `2` |" in ppo and "| `clip_low`" not in ppo  # its own default, listed

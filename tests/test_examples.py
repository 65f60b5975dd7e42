"""Every recipe under examples/ loads into its config class (docs/reference/examples.md).

Most recipes name folders that an earlier stage writes (a policy, a PRM, a trajectory store), and some config
classes check at validation that those exist. Those configs are validated in a folder of stand-ins (a model folder
with an empty `config.json`, an empty trajectory store with its `manifest.json`): every field and value is checked,
the folders' contents are not. The household quickstart's config is also checked against the quickstart's preset.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
#: folders of examples/ that other recipes own (each with its own tests)
ELSEWHERE = ("alfworld", "trl")

#: example → (config class, the stand-ins it needs: model folders, trajectory stores)
CONFIGS: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "pipeline/quickstart-household.yaml": ("proctor.pipeline.config:PipelineConfig", (), ()),
    "household/smollm2.yaml": ("proctor.pipeline.config:PipelineConfig", (), ()),
    "household/tiny-equal-data.yaml": ("proctor.pipeline.config:PipelineConfig", (), ()),
    "stages/prm.yaml": ("proctor.prm.config:PRMTrainConfig", (), ()),
    "stages/candidates.yaml": ("proctor.rollout.config:RolloutConfig", (), ()),
    "prm/big.yaml": ("proctor.prm.config:PRMTrainConfig", (), ()),
    "prm/lik.yaml": ("proctor.prm.likelihood:LikelihoodPRMConfig", ("runs/sft-exp/sft",),
                     ("runs/big/labelled", "runs/cand/targets-candidates/labelled", "runs/sft-exp/demos")),
    "prm/lik-dagger.yaml": ("proctor.prm.likelihood:LikelihoodPRMConfig", ("runs/sft-exp/sft",),
                            ("runs/big/labelled", "runs/cand/targets-candidates/labelled")),
    "rollout/cand16.yaml": ("proctor.rollout.config:RolloutConfig", (), ()),
    "rl/dpo.yaml": ("proctor.rl.online_dpo:OnlineDPOConfig", (), ()),
    "rl/dpo-anchored.yaml": ("proctor.rl.online_dpo:OnlineDPOConfig", (), ()),
    "rl/bon.yaml": ("proctor.rl.bon_distill:BonDistillConfig", (), ()),
    "rl/ppo.yaml": ("proctor.rl.ppo:PPOConfig", (), ()),
    "rl/gigpo.yaml": ("proctor.rl.grpo:GRPOConfig", (), ()),
    "rl/archer.yaml": ("proctor.rl.archer:ArCHerConfig", (), ()),
    "rl/archer-lik.yaml": ("proctor.rl.archer:ArCHerConfig", (), ()),
    "rl/archer-q0.yaml": ("proctor.rl.archer:ArCHerConfig", (), ()),
}


def _class(ref: str) -> type:
    module, name = ref.split(":")
    return getattr(importlib.import_module(module), name)


def _stand_ins(root: Path, models: tuple[str, ...], stores: tuple[str, ...]) -> None:
    for model in models:
        (root / model).mkdir(parents=True, exist_ok=True)
        (root / model / "config.json").write_text("{}")
    for store in stores:
        (root / store).mkdir(parents=True, exist_ok=True)
        (root / store / "manifest.json").write_text(json.dumps({"format": "proctor-trajectories"}))


def test_every_example_config_is_listed():
    found = {p.relative_to(EXAMPLES).as_posix() for p in EXAMPLES.rglob("*.yaml")
             if p.relative_to(EXAMPLES).parts[0] not in ELSEWHERE}
    assert found == set(CONFIGS), f"unlisted: {sorted(found - set(CONFIGS))}; gone: {sorted(set(CONFIGS) - found)}"
    page = (ROOT / "docs" / "reference" / "examples.md").read_text()
    assert [name for name in CONFIGS if f"`examples/{name}`" not in page] == [], "docs/reference/examples.md"


@pytest.mark.parametrize("name", list(CONFIGS))
def test_example_loads_into_its_config_class(name, tmp_path, monkeypatch):
    ref, models, stores = CONFIGS[name]
    data = yaml.safe_load((EXAMPLES / name).read_text())
    assert data, name
    _stand_ins(tmp_path, models, stores)
    monkeypatch.chdir(tmp_path)  # relative paths resolve against the stand-ins, not against this checkout
    cfg = _class(ref).model_validate(data)
    assert cfg.model_dump(mode="json")


def test_the_quickstart_example_is_the_quickstart():
    from proctor.pipeline.config import PipelineConfig
    from proctor.quickstart import QuickstartConfig, pipeline_config

    data = yaml.safe_load((EXAMPLES / "pipeline" / "quickstart-household.yaml").read_text())
    example = PipelineConfig.model_validate(data)
    preset = pipeline_config(QuickstartConfig(env="household", out=Path(data["out"]), seed=data["seed"]))
    assert example.model_dump(mode="json") == preset.model_dump(mode="json")


def test_the_measured_options_are_in_the_examples():
    """What the results pages say each recipe holds (the rows they reproduce)."""
    from proctor.rl.archer import ArCHerConfig
    from proctor.rl.online_dpo import OnlineDPOConfig

    def load(name: str, cls: type) -> object:
        return cls.model_validate(yaml.safe_load((EXAMPLES / name).read_text()))

    q0 = load("rl/archer-q0.yaml", ArCHerConfig)
    assert (q0.baseline, q0.actor_loss, q0.actor_epochs, q0.critic_kind) == ("expected", "ppo-clip", 3, "likelihood")
    anchored = load("rl/dpo-anchored.yaml", OnlineDPOConfig)
    assert (anchored.n_actions, anchored.beta, anchored.loss) == (8, 0.5, "sigmoid")
    lik = yaml.safe_load((EXAMPLES / "prm" / "lik.yaml").read_text())
    assert (lik["steps"], lik["anchor_weight"]) == (4000, 1.0)


def test_the_household_smollm2_recipes_compare_at_equal_data():
    """examples/household/: tiny-equal-data.yaml shares smollm2.yaml's env, seed and demonstrations (so `--reuse`
    copies them) and its 200 test tasks, and its model and SFT are the quickstart's; SmolLM2's π0, Q0 and π1 follow
    the quickstart's recipe (choice policy, anchored likelihood PRM, best-of-8 distillation), every row on the
    same 200 test tasks."""
    from proctor.pipeline.config import PipelineConfig

    def load(name: str) -> PipelineConfig:
        return PipelineConfig.model_validate(yaml.safe_load((EXAMPLES / name).read_text()))

    smol, tiny = load("household/smollm2.yaml"), load("household/tiny-equal-data.yaml")
    quickstart = load("pipeline/quickstart-household.yaml")
    for field in ("env", "env_kwargs", "seed", "workers", "step_timeout", "demos"):
        assert getattr(tiny, field) == getattr(smol, field) == getattr(quickstart, field), field
    assert smol.model.path == "../runs/smollm2" and tiny.model == quickstart.model
    assert tiny.sft.model_dump(exclude_unset=True) == quickstart.sft.model_dump(exclude_unset=True)
    test_tasks = {(c.evaluate.split, c.evaluate.tasks, c.evaluate.samples) for c in (smol, tiny, quickstart)}
    assert test_tasks == {("test", 200, 1)}
    assert [e.name for e in tiny.evaluate.entries] == ["policy"] and tiny.iterations == 0
    assert [e.name for e in smol.evaluate.entries] == ["policy", "best-of-8 (PRM Q0)"] and smol.iterations == 1
    assert smol.policy_agent["kind"] == "choice" and smol.policy_agent["prompt"] == quickstart.policy_agent["prompt"]
    assert (smol.prm.kind, str(smol.prm.anchor), smol.improve.method, smol.improve.init) == (
        "likelihood", "$demos", "bon-distill", "$prm")

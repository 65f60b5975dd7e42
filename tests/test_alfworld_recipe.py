"""The ALFWorld recipe (`examples/alfworld/`): both example configs validate, the task panels are fixed and
disjoint, ALFWorld runs are reproducible (50-step limit, package versions in every manifest), and, slow, the
tiny example scaled down to a few games runs the whole `proctor run` loop end to end."""

from __future__ import annotations

import inspect
import json
import time
from pathlib import Path

import pytest
import yaml

from proctor.pipeline import PipelineConfig

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "alfworld"
PANELS = EXAMPLES / "panels"


def example(name: str) -> dict:
    """An example config as its YAML holds it, its panel paths made absolute (the examples run from the root)."""
    data = yaml.safe_load((EXAMPLES / name).read_text())
    for section in ("demos", "rollout", "evaluate"):
        if "panel" in data.get(section, {}):
            data[section]["panel"] = str(ROOT / data[section]["panel"])
    return data


def panel(name: str) -> list[str]:
    from proctor.pipeline.config import read_panel

    return read_panel(PANELS / name)


@pytest.mark.parametrize("name", ["tiny.yaml", "smollm2.yaml"])
def test_the_example_configs_validate(name):
    """The configs as committed (no data needed to validate): demonstrations and rollouts on the fitting panel's
    train games, every evaluation on all 134 valid_unseen games, 50 steps, 2 env workers."""
    cfg = PipelineConfig.model_validate(example(name))
    assert cfg.env == "alfworld" and cfg.env_kwargs["max_steps"] == 50 and cfg.workers == 2
    assert cfg.demos.agent == {"kind": "expert", "expert": "oracle"}
    assert cfg.demos.task_ids() == panel("train-fit.txt") and cfg.demos.split == "train"
    assert cfg.rollout.split == "train" and cfg.rollout.task_ids() == panel("train-fit.txt")[:cfg.rollout.tasks]
    assert cfg.evaluate.split == "test" and cfg.evaluate.tasks is None and cfg.evaluate.panel is None
    # every entry on all 134 but beam search, whose env copies replay the episode: 24 games, 4 of each type
    assert [e.tasks for e in cfg.evaluate.entries] == [None, None, 24]
    beam = cfg.evaluate.entries[2].section(cfg.evaluate)
    assert beam.split == "test" and beam.task_ids() == panel("valid-unseen.txt")[:24]
    assert cfg.policy_agent["kind"] == "choice" and cfg.prm.kind == "head" and cfg.iterations == 1
    assert cfg.improve.method == "bon-distill" and cfg.improve.init == "$policy"
    names = [e.name for e in cfg.evaluate.entries]
    assert names == ["policy", "best-of-8 (PRM Q0)", "beam 2x2 (PRM Q0)"]
    assert (cfg.model.tiny is not None) == (name == "tiny.yaml")


def test_the_gpu_variant_in_the_readme_validates():
    """The README's Llama-3.2-3B block, merged into smollm2.yaml: only the model, the folder, the learning rates
    and the improvement (online DPO generating with vLLM, on the fitting panel) change; the device stays auto."""
    import re

    text = (EXAMPLES / "README.md").read_text()
    block = re.search(r"```yaml\n(# gpu overrides.*?)```", text, re.DOTALL)
    assert block, "the README's GPU block (```yaml starting with '# gpu overrides')"
    overrides = yaml.safe_load(block.group(1))
    overrides["improve"]["panel"] = str(ROOT / overrides["improve"]["panel"])
    base = example("smollm2.yaml")
    assert set(overrides) == {"out", "model", "sft", "prm", "improve"}
    cfg = PipelineConfig.model_validate({**base, **overrides})
    assert cfg.model.path == "meta-llama/Llama-3.2-3B-Instruct" and cfg.improve.method == "online-dpo"
    dpo = cfg.improve.stage_config(cfg, {"$policy": "p", "$prm": "q", "$out": "o"})
    assert dpo.generation.engine == "vllm" and dpo.workers == 2 and dpo.device == "auto"
    assert dpo.tasks == panel("train-fit.txt")[:240] and dpo.agent.kind == "choice"
    assert cfg.evaluate == PipelineConfig.model_validate(base).evaluate  # the same evaluation


def test_the_panels_are_fixed_disjoint_and_stratified():
    from collections import Counter

    from proctor.envs.alfworld import TASK_TYPES, task_type

    held, fit = panel("train-heldout.txt"), panel("train-fit.txt")
    assert (len(held), len(fit)) == (120, 761) and not set(held) & set(fit)
    assert all(t.startswith("train/") for t in held + fit)
    assert set(Counter(map(task_type, fit[:120])).values()) == {20}  # the first N spread over all six types
    assert set(Counter(map(task_type, held)).keys()) == set(TASK_TYPES)
    unseen = panel("valid-unseen.txt")
    assert len(unseen) == 134 and all(t.startswith("valid_unseen/") for t in unseen)
    assert set(Counter(map(task_type, unseen[:24])).values()) == {4}


@pytest.mark.data
def test_the_panels_are_the_split_games(shared_data):
    import importlib.util

    data = shared_data / "alfworld" / "json_2.1.1"
    if not data.is_dir():
        pytest.skip(f"ALFWorld games not found at {data}")
    spec = importlib.util.spec_from_file_location("make_panels", EXAMPLES / "make_panels.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    ids = module.split_games(data, "train")
    assert sorted(panel("train-heldout.txt") + panel("train-fit.txt")) == ids and len(ids) == 881
    held, fit = module.panels(ids, 120, seed=0)  # the script makes the committed files again
    assert (held, fit) == (panel("train-heldout.txt"), panel("train-fit.txt"))
    unseen = module.split_games(data, "valid_unseen")
    assert module.round_robin(module.shuffled_by_type(unseen, 0)) == panel("valid-unseen.txt")


def test_alfworld_defaults_and_recorded_versions(tmp_path):
    from proctor.envs.alfworld import ALFWorldEnv
    from proctor.envs.versions import env_versions, package_version
    from proctor.pipeline.manifest import Manifest

    assert inspect.signature(ALFWorldEnv).parameters["max_steps"].default == 50
    assert ALFWorldEnv.packages == ("alfworld", "textworld")
    assert env_versions("alfworld") == {"alfworld": package_version("alfworld"),
                                        "textworld": package_version("textworld")}
    assert env_versions("household") == {} and env_versions("no-such-env") == {}
    packages = Manifest(tmp_path, {}, seed=0, env="alfworld").data["environment"]["packages"]
    assert {k: packages[k] for k in ("alfworld", "textworld", "torch")} == {**env_versions("alfworld"),
                                                                           "torch": package_version("torch")}
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'alfworld = ["alfworld==0.4.2"]' in pyproject


#: games of the fitting panel that ALFWorld's expert wins in at most 8 steps (4 to 8; most take 15 to 40)
SHORT_GAMES = ["train/pick_and_place_simple-SoapBottle-None-Toilet-413/trial_T20190909_042914_071706",
               "train/look_at_obj_in_light-AlarmClock-None-DeskLamp-309/trial_T20190908_062818_332126",
               "train/pick_cool_then_place_in_recep-Potato-None-Microwave-25/trial_T20190910_225453_476809",
               "train/pick_and_place_simple-Newspaper-None-Ottoman-210/trial_T20190907_144808_904739"]


def scaled_down(out: Path, data_dir: Path) -> dict:
    """tiny.yaml at toy sizes: 4 listed train games of the fitting panel that the expert wins within the 8-step
    limit for the demonstrations, the panel's first 2 for π0's rollouts, 2 listed valid_unseen games (beam
    search: the first), a 1-layer model, a few steps of each trainer. Everything else (stages, agents, PRM,
    improvement, 2 workers) as the example."""
    cfg = example("tiny.yaml")
    test_games = ["valid_unseen/pick_heat_then_place_in_recep-Mug-None-Cabinet-10/trial_T20190909_021247_306737",
                  "valid_unseen/look_at_obj_in_light-AlarmClock-None-DeskLamp-308/trial_T20190908_222917_366542"]
    cfg.update(out=str(out), env_kwargs={"max_steps": 8, "data_dir": str(data_dir)},
               model={"tiny": {"hidden_size": 32, "layers": 1, "heads": 2, "vocab_size": 400}})
    del cfg["demos"]["panel"]
    cfg["demos"]["tasks"] = SHORT_GAMES
    cfg["sft"] |= {"steps": 4, "batch_size": 4}
    cfg["rollout"] |= {"tasks": 2, "samples": 2}
    cfg["prm"] |= {"steps": 3, "batch_size": 4}
    cfg["improve"] |= {"max_states": 4, "n": 2, "epochs": 1, "batch_size": 2}
    cfg["evaluate"]["tasks"] = test_games
    entries = cfg["evaluate"]["entries"]
    entries[1] = {**entries[1], "name": "best-of-2 (PRM Q0)", "agent": {**entries[1]["agent"], "n": 2}}
    entries[2] = {**{k: v for k, v in entries[2].items() if k != "panel"}, "tasks": 1}  # the first listed game
    return cfg


@pytest.mark.slow
@pytest.mark.data
@pytest.mark.extra
def test_the_recipe_runs_end_to_end_at_a_tiny_scale(shared_data, tmp_path):
    """45 s on one idle core (2.5 min on a loaded one): `proctor run` on the scaled-down tiny example; the table
    and report.html carry every evaluation row, the manifests the ALFWorld versions, and the run records exactly
    the planned stages."""
    pytest.importorskip("alfworld", reason="needs the alfworld extra: pip install 'proctor[alfworld]'")
    data = shared_data / "alfworld" / "json_2.1.1"
    if not data.is_dir():
        pytest.skip(f"ALFWorld games not found at {data}")
    from typer.testing import CliRunner

    from proctor.cli import app
    from proctor.envs.versions import env_versions
    from proctor.pipeline.run import plan_stages

    out = tmp_path / "run"
    config = scaled_down(out, data)
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    dry = CliRunner().invoke(app, ["run", str(tmp_path / "tiny.yaml"), "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "alfworld train: 4 tasks listed" in dry.output and "alfworld test: 2 tasks listed" in dry.output
    assert "alfworld train: 2 tasks of panel" in dry.output
    start = time.monotonic()
    res = CliRunner().invoke(app, ["run", str(tmp_path / "tiny.yaml")])
    seconds = time.monotonic() - start
    assert res.exit_code == 0, res.output
    summary = json.loads((out / "summary.json").read_text())
    rows = [(r["iteration"], r["policy"], r["episodes"]) for r in summary["results"]]
    assert rows == [(0, "policy", 2), (0, "best-of-2 (PRM Q0)", 2), (0, "beam 2x2 (PRM Q0)", 1), (1, "policy", 2),
                    (1, "best-of-2 (PRM Q0)", 2)]
    assert all("vs_first" in r for r in summary["results"][1:])  # each paired with π0 (McNemar)
    for _, name, _ in rows:
        assert name in res.output  # the printed table
    report = (out / "report.html").read_text()
    assert all(name in report for _, name, _ in rows)
    # reproducibility: the versions in the pipeline's manifest and in every store; the panel's games id by id
    versions = env_versions("alfworld")
    assert versions["alfworld"] is not None and versions["textworld"] is not None
    manifest = json.loads((out / "manifest.json").read_text())
    assert {k: manifest["environment"]["packages"][k] for k in versions} == versions
    for store in ("demos", "iter-0/rollouts", "iter-0/eval/policy/trajectories",
                  "iter-0/eval/beam-2x2--PRM-Q0/trajectories"):
        assert json.loads((out / store / "manifest.json").read_text())["meta"]["rollout"]["env_versions"] == versions
    assert manifest["stages"]["iter-0/rollouts"]["config"]["tasks"] == panel("train-fit.txt")[:2]
    assert manifest["stages"]["demos"]["config"]["workers"] == 2
    assert set(SHORT_GAMES) <= set(panel("train-fit.txt"))
    assert manifest["stages"]["demos"]["result"]["successes"] == 4
    cfg = PipelineConfig.model_validate(config)
    assert sorted(manifest["stages"]) == sorted(s.key for s in plan_stages(cfg))
    print(f"scaled-down ALFWorld recipe: {seconds:.0f} s; stages: "
          f"{ {k: v['seconds'] for k, v in manifest['stages'].items()} }")

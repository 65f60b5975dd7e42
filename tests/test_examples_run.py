"""The short recipes under examples/ run, at a tiny scale, through the library function their CLI verb calls.

Each recipe is loaded as shipped; `tiny()` overrides only (1) the folders it reads and writes (a model folder →
the session's tiny model, a PRM built on it once per module, or a small trajectory store made once per module;
an output folder → the test's tmp_path) and (2) its size fields (`SIZES`: tasks, iterations, steps, batch
sizes, ...; only the keys the recipe has). The result is validated into the recipe's config class and run
through what `proctor train METHOD` (the trainer registry), `proctor prm train`, `proctor prm train-likelihood`
or `proctor rollout --config` calls; each test checks what the run wrote. `tests/test_examples.py` checks the
recipes load; a new recipe under examples/ (outside alfworld/ and pipeline/, which have their own tests) fails
`test_every_short_recipe_is_run` until it is added to `RECIPES`. The whole module takes about 25 s on one CPU
thread, so it is not marked slow; its tests share one xdist worker (the stand-ins are built once).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from proctor.store import TrajectoryStore

pytestmark = pytest.mark.xdist_group("examples_run")

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
#: folders of examples/ whose recipes are run by their own tests (the quickstart, tests/test_alfworld_recipe.py;
#: household/'s `proctor run` recipes by `test_the_household_recipes_run_at_a_tiny_scale` below)
ELSEWHERE = ("alfworld", "pipeline", "household")

#: the size fields (dotted keys) and the tiny values they get, set only where the recipe has the key
SIZES: dict[str, Any] = {
    "tasks": 2, "iterations": 2, "warmup_iterations": 1, "rollouts_per_task": 2, "group_size": 2, "batch": 4,
    "agent.max_new_tokens": 8,
    "n_actions": 2, "batch_size": 2, "minibatch_size": 4, "ppo_epochs": 1, "actor_epochs": 2,
    "critic_updates": 2, "critic_batch_size": 4,
    "max_states": 4, "n": 2, "epochs": 1,
    "steps": 2,
    "start.per_source": 1, "start.completions": 2, "start.candidates.random": 1,
}
#: the episodes' length, `env_kwargs.max_steps`, of every recipe that names an env (set where the recipe leaves
#: it at the env's default too: dpo.yaml's household episodes would run 30 steps, archer.yaml's 20 questions)
MAX_STEPS = 3
#: the fields naming folders a recipe writes: they move under the test's tmp_path
OUTPUTS = ("output_dir", "out")
#: the folders the recipes read (written by earlier stages) → which of the module's stand-ins replaces each
READS: dict[str, str] = {
    "runs/sft": "policy", "runs/sft-exp/sft": "policy", "runs/sft-20q": "policy", "runs/tiny": "policy",
    "runs/qs/iter-0/policy": "policy", "runs/quickstart/iter-0/policy": "policy",
    "runs/prm": "scalar-prm",
    "runs/lik-prm-anchored": "likelihood-prm", "runs/lik-prm-a3": "likelihood-prm",
    "runs/qs/iter-0/prm": "likelihood-prm", "runs/quickstart/iter-0/prm": "likelihood-prm",
    "runs/qs/iter-0/rollouts": "rollouts", "runs/r": "rollouts",
    "runs/cand": "candidates", "runs/pairs/targets.parquet": "pairs",
    "runs/big/labelled": "labelled", "runs/cand/targets-candidates/labelled": "labelled",
    "runs/cand/targets-test/labelled": "labelled",
    "runs/sft-exp/demos": "demos",
}
PROMPT = {"history": 2, "memory": True, "show_admissible": False, "system": ""}
#: the stores' episodes: household's small preset with the expert's hints (the candidates need them), no longer
#: than the recipes' own episodes (a candidate start replays a stored prefix within the recipe's step limit)
HOUSEHOLD = {"env": "household", "env_kwargs": {"preset": "small", "max_steps": MAX_STEPS, "expert_hints": True}}


def _get(data: dict[str, Any], dotted: str) -> tuple[dict[str, Any], str] | None:
    *parents, key = dotted.split(".")
    for p in parents:
        data = data.get(p)
        if not isinstance(data, dict):
            return None
    return (data, key) if key in data else None


def tiny(name: str, runs: dict[str, Path], out: Path) -> tuple[dict[str, Any], set[str], set[str]]:
    """The recipe `examples/NAME` as shipped, with its size fields at `SIZES`' values, its output folders under
    `out` and the folders it reads replaced by the module's stand-ins (`runs`: stand-in name → folder). Returns
    the config mapping, the dotted keys whose sizes were set and the folders replaced. A folder the maps do not
    know is an error."""
    data = yaml.safe_load((EXAMPLES / name).read_text())
    sized, read = set(), set()
    for dotted, value in SIZES.items():
        if (found := _get(data, dotted)) is not None:
            found[0][found[1]] = value
            sized.add(dotted)
    if "env" in data:
        data.setdefault("env_kwargs", {})["max_steps"] = MAX_STEPS
        sized.add("env_kwargs.max_steps")
    for dotted in OUTPUTS:
        if (found := _get(data, dotted)) is not None:
            found[0][found[1]] = str(out / found[0][found[1]])

    def reads(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: reads(v) for k, v in value.items()}
        if isinstance(value, list):
            return [reads(v) for v in value]
        if isinstance(value, str) and value.startswith("runs/"):
            assert value in READS, f"examples/{name} reads {value}: add it to READS (which stand-in replaces it)"
            read.add(value)
            return str(runs[READS[value]])
        return value

    return reads(data), sized, read


def assert_model_folder(path: Path, config: str = "config.json") -> None:
    assert (path / config).is_file(), f"{path}: no {config}"
    assert list(path.glob("*.safetensors")), f"{path}: no safetensors"


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tiny_model_dir, scalar_prm_dir) -> dict[str, Path]:
    """What the recipes read, small: the tiny model as every policy, a scalar PRM and a likelihood PRM on it,
    random-agent household episodes, the same with MC-Q targets, candidate actions at their states (the expert
    finishing each) with their Bradley–Terry pairs, and expert demonstrations."""
    from proctor.credit.stage import TargetsConfig, run_targets
    from proctor.prm.likelihood import LikelihoodPRMConfig, train_likelihood_prm
    from proctor.rollout import RolloutConfig, run_rollout

    root = tmp_path_factory.mktemp("runs")
    run_rollout(RolloutConfig(**HOUSEHOLD, out=root / "rollouts", split="train", tasks=3, samples=2, seed=1,
                              progress=False))
    run_targets(TargetsConfig(method="mc-q", params={"gamma": 0.95}, input=root / "rollouts", out=root / "targets",
                              write_back=root / "labelled"))
    candidates = {"source": root / "rollouts", "prefix_lengths": "states", "per_source": 1, "completions": 1,
                  "candidates": {"expert": True, "random": 1}}
    run_rollout(RolloutConfig(env="household", env_kwargs={**HOUSEHOLD["env_kwargs"], "max_steps": 20},
                              agent={"kind": "expert"}, start=candidates, out=root / "candidates", progress=False))
    run_targets(TargetsConfig(method="candidate-pairs", params={"gamma": 0.9, "margin": 0.02},
                              input=root / "candidates", out=root / "pairs"))
    run_rollout(RolloutConfig(env="household", env_kwargs={"preset": "small"}, agent={"kind": "expert"},
                              out=root / "demos", split="train", tasks=2, progress=False))
    assert any(t.success for t in TrajectoryStore.open(root / "demos").load())  # an anchor needs a success
    train_likelihood_prm(LikelihoodPRMConfig(policy=str(tiny_model_dir), prompt=PROMPT, data=[root / "labelled"],
                                             output_dir=root / "likelihood-prm", steps=1, batch_size=4,
                                             progress=False))
    return {"policy": tiny_model_dir, "scalar-prm": scalar_prm_dir, "likelihood-prm": root / "likelihood-prm",
            "pairs": root / "pairs" / "targets.parquet",
            **{name: root / name for name in ("rollouts", "labelled", "candidates", "demos")}}


# --- the runners: what each CLI verb calls, and what the run must have written


def run_trainer(method: str) -> Callable[[dict[str, Any]], None]:
    """`proctor train METHOD CONFIG`: the registry's config class and function."""

    def run(data: dict[str, Any]) -> None:
        from proctor.rl.trainers import trainer

        config_class, train = trainer(method).load()
        cfg = config_class.model_validate(data)
        result = train(cfg)
        if isinstance(result, Path):  # bon-distill: the student's folder and its metrics
            assert_model_folder(result)
            metrics = json.loads((cfg.output_dir / trainer(method).metrics_file).read_text())
            assert metrics["states"] == cfg.max_states, metrics
            return
        assert_model_folder(result.policy_dir)
        assert len(result.iterations) == cfg.iterations
        summary = json.loads((cfg.output_dir / "summary.json").read_text())
        assert summary["policy_dir"] == str(result.policy_dir) and len(summary["iterations"]) == cfg.iterations
        for k in range(1, cfg.iterations + 1):
            assert (cfg.output_dir / f"iter-{k}" / "metrics.json").is_file()
        last = result.iterations[-1]
        assert last["rollout"]["episodes"] == len(cfg.tasks if isinstance(cfg.tasks, list) else range(cfg.tasks)) \
            * cfg.rollouts_per_task, last["rollout"]
        if last.get("groups_with_signal") == 0:
            # GRPO / GiGPO: no tiny-scale episode succeeds, so no group has a signal and no step is taken
            assert last["samples"] == 0 and last["train"]["steps"] == 0, last
        else:
            assert last["train"]["steps"] > 0, last  # the last iteration trains the policy
        if method == "archer":
            assert all(it["critic"]["steps"] == cfg.critic_updates for it in result.iterations)
            assert (result.critic_dir).is_dir() and any(result.critic_dir.iterdir())

    return run


def run_prm_train(data: dict[str, Any]) -> None:
    """`proctor prm train CONFIG`."""
    from proctor.prm.config import PRMTrainConfig
    from proctor.prm.trainer import train_prm

    cfg = PRMTrainConfig.model_validate(data)
    result = train_prm(cfg)
    assert result.steps == len(result.losses) == cfg.steps
    assert_model_folder(cfg.output_dir, "prm_config.json")


def run_prm_train_likelihood(data: dict[str, Any]) -> None:
    """`proctor prm train-likelihood CONFIG`."""
    from proctor.prm.likelihood import LIKELIHOOD_FILE, LikelihoodPRMConfig, train_likelihood_prm

    cfg = LikelihoodPRMConfig.model_validate(data)
    summary = train_likelihood_prm(cfg)
    labelled = [s for store in cfg.data for t in TrajectoryStore.open(store).load() for s in t.steps
                if cfg.target in s.targets]
    assert summary["examples"] == len(labelled) > 0 and summary["curve"], summary
    anchor = TrajectoryStore.open(cfg.anchor).load()  # an expert's actions: every episode; else the successes
    kept = anchor if cfg.anchor_expert else [t for t in anchor if t.success]
    assert summary["anchor_examples"] == sum(len(t.steps) for t in kept) > 0, summary
    assert_model_folder(cfg.output_dir, LIKELIHOOD_FILE)


def run_rollout_config(data: dict[str, Any]) -> None:
    """`proctor rollout --config CONFIG`."""
    from proctor.rollout import RolloutConfig, run_rollout

    cfg = RolloutConfig.model_validate(data)
    result = run_rollout(cfg)
    trajs = TrajectoryStore.open(cfg.out).load()
    sources = TrajectoryStore.open(cfg.start.source).load()
    # per source: per_source states × (the expert's action + `random` others) × completions
    per_state = (1 + cfg.start.candidates.random) * cfg.start.completions
    assert len(trajs) == len(sources) * cfg.start.per_source * per_state == result.summary.episodes, len(trajs)
    assert all(t.termination != "agent_error" for t in trajs), [t.error for t in trajs]


#: recipe → the runner of its CLI verb
RECIPES: dict[str, Callable[[dict[str, Any]], None]] = {
    "rl/dpo.yaml": run_trainer("dpo"),
    "rl/dpo-anchored.yaml": run_trainer("dpo"),
    "rl/bon.yaml": run_trainer("bon-distill"),
    "rl/ppo.yaml": run_trainer("ppo"),
    "rl/gigpo.yaml": run_trainer("grpo"),
    "rl/archer.yaml": run_trainer("archer"),
    "rl/archer-lik.yaml": run_trainer("archer"),
    "rl/archer-q0.yaml": run_trainer("archer"),
    "prm/big.yaml": run_prm_train,
    "stages/prm.yaml": run_prm_train,
    "prm/lik.yaml": run_prm_train_likelihood,
    "prm/lik-dagger.yaml": run_prm_train_likelihood,
    "rollout/cand16.yaml": run_rollout_config,
    "stages/candidates.yaml": run_rollout_config,
}


def test_every_short_recipe_is_run():
    found = {p.relative_to(EXAMPLES).as_posix() for p in EXAMPLES.rglob("*.yaml")
             if p.relative_to(EXAMPLES).parts[0] not in ELSEWHERE}
    assert found == set(RECIPES), f"not run: {sorted(found - set(RECIPES))}; gone: {sorted(set(RECIPES) - found)}"


def test_every_override_is_used(tmp_path):
    """Each size key and each read folder of the maps is in some recipe (a renamed field fails here)."""
    stand_ins = {name: tmp_path / name for name in set(READS.values())}
    done = [tiny(name, stand_ins, tmp_path) for name in RECIPES]
    sized, read = set().union(*(d[1] for d in done)), set().union(*(d[2] for d in done))
    assert sized == {*SIZES, "env_kwargs.max_steps"}, f"in no recipe: {sorted(set(SIZES) - sized)}"
    assert read == set(READS), f"in no recipe: {sorted(set(READS) - read)}"


@pytest.mark.parametrize("name", list(RECIPES))
def test_recipe_runs_at_a_tiny_scale(name, runs, tmp_path):
    data, sized, _ = tiny(name, runs, tmp_path)
    assert sized, f"examples/{name}: no size field was made small"
    RECIPES[name](data)


def household_tiny(name: str, out: Path, model: Path) -> dict[str, Any]:
    """A `proctor run` recipe of examples/household/ at toy sizes: a few tasks, episodes and trainer steps, the
    episodes 8 steps long (the searching expert wins some of the 6 demonstration tasks in 8), `model.path` the
    session's tiny model (`model.tiny` a smaller one), best-of-2; the stages, agents, PRM kind and improvement as
    shipped."""
    data = yaml.safe_load((EXAMPLES / name).read_text())
    data["out"] = str(out)
    data["env_kwargs"]["max_steps"] = 8
    data["model"] = {"path": str(model)} if "path" in data["model"] else {
        "tiny": {"hidden_size": 32, "layers": 1, "heads": 2, "vocab_size": 400}}
    data["demos"] |= {"tasks": 6}
    data["sft"] |= {"steps": 2, "batch_size": 2}
    data["rollout"] |= {"tasks": 2, "samples": 2, "batch": 4}
    data["prm"] |= {"steps": 2, "batch_size": 2} | ({"anchor_batch_size": 2} if "anchor" in data["prm"] else {})
    if "improve" in data:
        data["improve"] |= {"max_states": 4, "n": 2, "epochs": 1, "batch_size": 2}
    data["evaluate"] |= {"tasks": 2, "batch": 2}
    for entry in data["evaluate"]["entries"]:
        if entry["agent"]["kind"] == "best-of-n":
            entry["agent"]["n"] = 2
    return data


@pytest.mark.slow
def test_the_household_recipes_run_at_a_tiny_scale(tiny_model_dir, tmp_path):
    """examples/household/: smollm2.yaml's loop runs end to end (on the tiny model), every row paired with π0, and
    tiny-equal-data.yaml run with `--reuse` of it copies its demonstrations and trains its own π0 on them."""
    from proctor.pipeline import PipelineConfig, run_pipeline

    smol = PipelineConfig.model_validate(household_tiny("household/smollm2.yaml", tmp_path / "smollm2", tiny_model_dir))
    summary = run_pipeline(smol)
    rows = [(r["iteration"], r["policy"], r["episodes"]) for r in summary["results"]]
    assert rows == [(0, "policy", 2), (0, "best-of-8 (PRM Q0)", 2), (1, "policy", 2)]
    assert all(r["vs_first"]["iteration"] == 0 for r in summary["results"][1:])
    tiny = PipelineConfig.model_validate(household_tiny("household/tiny-equal-data.yaml", tmp_path / "tiny",
                                                        tiny_model_dir))
    summary = run_pipeline(tiny, reuse=smol.out)
    assert [(r["iteration"], r["policy"], r["episodes"]) for r in summary["results"]] == [(0, "policy", 2)]
    stages = json.loads((tiny.out / "manifest.json").read_text())["stages"]
    assert stages["demos"]["reused_from"] == str(smol.out) and "reused_from" not in stages["iter-0/sft"]
    assert TrajectoryStore.open(tiny.out / "demos").load() == TrajectoryStore.open(smol.out / "demos").load()

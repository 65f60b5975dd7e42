"""`proctor run`: the whole loop end to end at toy sizes (tiny model, a few tasks), its manifest (lineage),
resume at stage granularity, and the report built from the run directory."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from proctor.pipeline import PipelineConfig, run_pipeline
from proctor.pipeline.table import result_tables
from proctor.store import TrajectoryStore

PROMPT = {"history": 2, "memory": True}


def toy_config(out) -> dict:
    policy = {"kind": "choice", "model": "$policy", "temperature": 1.0, "prompt": PROMPT}
    return {
        "out": str(out), "seed": 0, "env": "household", "env_kwargs": {"preset": "small", "max_steps": 6},
        "model": {"tiny": {"hidden_size": 32, "layers": 1, "heads": 2, "vocab_size": 400}},
        "demos": {"agent": {"kind": "expert", "expert": "search"}, "tasks": 4},
        "sft": {"steps": 3, "batch_size": 4, "prompt": PROMPT},
        "policy_agent": {"kind": "choice", "temperature": 1.0, "prompt": PROMPT},
        "iterations": 1,
        "rollout": {"split": "train", "tasks": 3, "samples": 2},
        "prm": {"steps": 3, "batch_size": 4},
        # this barely trained policy puts nearly all mass on one action: sample it hot to get distinct actions
        "improve": {"tasks": 2, "n_actions": 4, "batch_size": 4,
                    "agent": {"kind": "choice", "temperature": 4.0, "prompt": PROMPT}},
        "monitor": {"states": 2, "completions": 2},
        "evaluate": {"split": "test", "tasks": 2, "entries": [
            {"name": "policy", "agent": policy},
            {"name": "best-of-2", "agent": {"kind": "best-of-n", "n": 2, "prm": "$prm", "agent": policy}},
            {"name": "beam", "iterations": [0], "tasks": 1,
             "search": {"method": "beam", "agent": policy, "prm": "$prm", "beams": 2, "expansions": 2}},
        ]},
    }


@pytest.mark.slow
def test_the_loop_runs_records_lineage_resumes_and_reports(tmp_path):
    from proctor.evaluation.report import build_report

    out = tmp_path / "run"
    seen: list[str] = []
    summary = run_pipeline(PipelineConfig.model_validate(toy_config(out)), lambda stage, rec: seen.append(stage))
    rows = [(r["iteration"], r["policy"]) for r in summary["results"]]
    assert rows == [(0, "policy"), (0, "best-of-2"), (0, "beam"), (1, "policy"), (1, "best-of-2")]
    assert [r["episodes"] for r in summary["results"]] == [2, 2, 1, 2, 2]  # beam: its first task only
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["stages"]["iter-0/prm"]["inputs"] == ["iter-0/policy", "iter-0/targets/trajectories"]
    assert manifest["stages"]["iter-0/improve"]["outputs"] == ["iter-1/policy/config.json"]
    # each stage's config is recorded whole: the agent's own fields, not only those of the base agent config
    policy_eval = manifest["stages"]["iter-1/eval/policy"]["config"]["agent"]
    assert policy_eval["model"] == str(out / "iter-1" / "policy") and policy_eval["temperature"] == 1.0
    assert manifest["stages"]["iter-0/eval/best-of-2"]["config"]["agent"]["agent"]["prompt"]["history"] == 2
    assert manifest["stages"]["iter-0/improve"]["config"]["agent"]["temperature"] == 4.0
    assert (out / "iter-1" / "policy" / "model.safetensors").exists()
    assert seen[:3] == ["model", "demos", "sft"] and "improve" in seen
    # the reward-hacking monitor: success, the PRM's score of the policy's actions, their MC re-labels
    assert [m["iteration"] for m in summary["monitor"]] == [0, 1] and (out / "monitor.png").stat().st_size > 0
    for m in summary["monitor"]:
        assert m["relabelled"] == 2 and m["completions"] == 4 and 0 <= m["mc_q_mean"] <= 1
        assert m["drift"] == pytest.approx(m["prm_mean_relabelled"] - m["mc_q_mean"])
        assert m["success_rate"] == next(r["success_rate"] for r in summary["results"]
                                         if r["iteration"] == m["iteration"] and r["policy"] == "policy")
    # every row after π0's is paired with it on the (task, sample) keys both ran, counted here from the stores
    def outcomes(row: dict) -> dict:
        return {(t.task_id, t.sample): t.success for t in TrajectoryStore.open(out / row["dir"] / "trajectories").load()}

    first = outcomes(summary["results"][0])
    assert "vs_first" not in summary["results"][0]
    for row in summary["results"][1:]:
        mine, vs = outcomes(row), row["vs_first"]
        keys = first.keys() & mine.keys()
        assert (vs["policy"], vs["iteration"], vs["pairs"]) == ("policy", 0, len(keys))
        assert vs["b01"] == sum(mine[k] and not first[k] for k in keys)
        assert vs["b10"] == sum(first[k] and not mine[k] for k in keys)
        assert vs["diff"] == pytest.approx((vs["b01"] - vs["b10"]) / len(keys)) and 0 < vs["p_value"] <= 1
    tables = result_tables(summary)
    assert [t.row_count for t in tables] == [5, 4]
    # resume: everything is recorded, nothing runs again
    seen.clear()
    again = run_pipeline(PipelineConfig.model_validate(toy_config(out)), lambda stage, rec: seen.append(stage))
    assert [r["success_rate"] for r in again["results"]] == [r["success_rate"] for r in summary["results"]]
    assert json.loads((out / "manifest.json").read_text())["stages"] == manifest["stages"]
    # another config in the same directory is refused
    other = {**toy_config(out), "seed": 1}
    with pytest.raises(ValueError, match="another config"):
        run_pipeline(PipelineConfig.model_validate(other))
    report = build_report(out)
    assert report.exists() and "best-of-2" in report.read_text()


def test_config_errors_name_the_field(tmp_path):
    bad = toy_config(tmp_path)
    bad["evaluate"]["entries"][0] = {"name": "x"}
    with pytest.raises(ValueError, match="give exactly one of agent and search"):
        PipelineConfig.model_validate(bad)
    with pytest.raises(ValueError, match="monitor.entry: no evaluation entry 'nope'"):
        PipelineConfig.model_validate({**toy_config(tmp_path), "monitor": {"entry": "nope"}})
    (tmp_path / "run.yaml").write_text(yaml.safe_dump({**toy_config(tmp_path), "model": {}}))
    from typer.testing import CliRunner

    from proctor.cli import app

    res = CliRunner().invoke(app, ["run", str(tmp_path / "run.yaml")])
    assert res.exit_code == 2 and "model" in res.output
    # a PRM head's section: fields, values and TrainingArguments names, before any stage runs
    cases = [({"los": "bce"}, "prm.los: not a field of the PRM head here"),
             ({"model": {"head": "scaler"}}, "prm.model.head: Input should be"),
             ({"loss": "bradley_terry"}, "prm: loss 'bradley_terry' reads preference pairs"),
             ({"max_step": 10}, "prm.max_step: not a field of the PRM head here"),
             ({"training_args": {"max_step": 10}}, "prm.training_args: training_args.max_step: not a transformers.")]
    for section, message in cases:
        with pytest.raises(ValueError, match=re.escape(message)):
            PipelineConfig.model_validate({**toy_config(tmp_path), "prm": section})


def test_an_evaluation_row_can_run_on_its_own_panel_within_the_evaluation(tmp_path):
    """A costly row on a fixed panel's first N tasks of the evaluation's split, paired with the rows that run all of
    them; a panel with tasks the evaluation does not run is refused (no pairs), as is a missing file."""
    from proctor.pipeline.run import plan_stages

    T = "household/small/s0/test/0000"

    (tmp_path / "panel.txt").write_text("# household test tasks\n" + "".join(f"{T}{n}\n" for n in (5, 2, 9)))
    cfg = toy_config(tmp_path / "run")
    cfg["evaluate"]["entries"][2] |= {"panel": str(tmp_path / "panel.txt"), "tasks": 2}
    parsed = PipelineConfig.model_validate(cfg)
    beam = parsed.evaluate.entries[2].section(parsed.evaluate)
    assert (beam.split, beam.task_ids(), beam.samples) == ("test", [f"{T}5", f"{T}2"], 1)
    assert parsed.evaluate.entries[0].section(parsed.evaluate) is parsed.evaluate
    line = next(s for s in plan_stages(parsed) if s.key == "iter-0/eval/beam")
    assert "household test: 2 tasks of panel" in line.runs
    cfg["evaluate"]["tasks"] = [f"{T}5", f"{T}1"]
    with pytest.raises(ValueError, match=re.escape("evaluation 'beam': panel") + ".*: 1 of the entry's tasks are not "
                       f"among the evaluation's, e.g. '{T}2'"):
        PipelineConfig.model_validate(cfg)
    cfg["evaluate"]["entries"][2]["panel"] = str(tmp_path / "missing.txt")
    with pytest.raises(ValueError, match="no such file"):
        PipelineConfig.model_validate(cfg)


@pytest.mark.slow
def test_prm_candidates_train_the_prm_on_action_pairs_at_the_policys_states(tmp_path):
    cfg = toy_config(tmp_path / "run")
    cfg["env_kwargs"] = {"preset": "small", "max_steps": 16, "expert_hints": True}
    cfg["iterations"] = 0
    # completed by an expert/random mixture (the untrained policy never wins); the PRM on the starting model
    cfg["prm_candidates"] = {"candidates": {"expert": True, "random": 1}, "completions": 2, "per_source": 8,
                             "margin": 0.2, "agent": {"kind": "epsilon", "epsilon": 0.2}}
    cfg["prm"]["model"] = {"backbone": "$model"}
    cfg["evaluate"]["entries"] = cfg["evaluate"]["entries"][1:2]
    del cfg["monitor"]
    summary = run_pipeline(PipelineConfig.model_validate(cfg))
    assert [r["policy"] for r in summary["results"]] == ["best-of-2"]
    stages = json.loads((tmp_path / "run" / "manifest.json").read_text())["stages"]
    assert "iter-0/targets" not in stages
    start = stages["iter-0/candidates"]["config"]["start"]
    assert start["per_source"] == 8 and start["source"].endswith("iter-0/rollouts")
    assert stages["iter-0/candidate-pairs"]["result"]["records"] > 0
    assert stages["iter-0/candidate-pairs"]["config"]["method"] == "candidate-pairs"
    assert stages["iter-0/candidates"]["config"]["agent"]["kind"] == "epsilon"
    assert stages["iter-0/prm"]["inputs"] == ["model", "iter-0/candidate-pairs", "iter-0/candidates"]
    assert stages["iter-0/prm"]["config"]["loss"] == "bradley_terry"


def test_a_likelihood_prm_is_one_prm_option_of_the_loop(tmp_path):
    cfg = toy_config(tmp_path / "run")
    cfg["prm"] = {"kind": "likelihood", "steps": 3, "batch_size": 4, "anchor": "$demos", "anchor_weight": 1.0}
    cfg["improve"] |= {"states_from": "$rollouts", "max_states": 6}  # DPO's states: π0's rollouts for Q0
    cfg["evaluate"]["entries"] = cfg["evaluate"]["entries"][:2]
    summary = run_pipeline(PipelineConfig.model_validate(cfg))
    assert [r["policy"] for r in summary["results"]] == ["policy", "best-of-2"] * 2
    assert all(r["prm_mean_score"] is not None for r in summary["results"])  # the monitor's PRM scores
    stages = json.loads((tmp_path / "run" / "manifest.json").read_text())["stages"]
    prm = stages["iter-0/prm"]
    assert prm["outputs"] == ["iter-0/prm/likelihood_prm.json"] and prm["result"]["examples"] > 0
    assert prm["config"]["prompt"]["history"] == 2 and prm["config"]["policy"].endswith("iter-0/policy")
    assert prm["config"]["anchor"] == str(tmp_path / "run" / "demos")  # `$demos`: the loop's demonstrations
    improve = stages["iter-0/improve"]
    assert improve["result"]["iterations"][0]["pairs"] > 0  # online DPO scored by it
    assert improve["result"]["iterations"][0]["states_from"] == str(tmp_path / "run" / "iter-0" / "rollouts")
    assert improve["result"]["iterations"][0]["states"] == 6 and "iter-0/rollouts" in improve["inputs"]
    cfg = toy_config(tmp_path / "run2")
    cfg["prm"] = {"kind": "likelihood"}
    cfg["prm_candidates"] = {"candidates": {"expert": True, "random": 1}}
    cfg["env_kwargs"]["expert_hints"] = True
    with pytest.raises(ValueError, match="trains on step targets, not on candidate pairs"):
        PipelineConfig.model_validate(cfg)
    cfg["prm"] = {"kind": "lik"}
    with pytest.raises(ValueError, match="prm.kind: 'lik' is not"):
        PipelineConfig.model_validate(cfg)
    del cfg["prm_candidates"]
    cfg["prm"] = {"kind": "likelihood", "anchor": "$demo", "anchor_weight": 1.0}
    with pytest.raises(ValueError, match=r"prm.anchor: '\$demo' is neither `\$demos`"):
        PipelineConfig.model_validate(cfg)
    cfg["prm"] = {"kind": "likelihood", "anchor": "$rollouts", "anchor_weight": 1.0, "anchor_expert": "search"}
    valid = PipelineConfig.model_validate(cfg)
    assert str(valid.prm.anchor) == "$rollouts"
    # the loop fills its folders in: `$demos` its demonstrations, `$rollouts` the iteration's labelled rollouts
    folders = {"$demos": "run/demos", "$rollouts": "run/iter-0/targets/trajectories"}
    assert [valid.prm.model_copy(update={"anchor": a}).values(valid, folders)["anchor"]
            for a in ("$demos", "$rollouts", Path("data/x"))] == [*folders.values(), Path("data/x")]
    for key in ("output_dir", "training"):
        cfg["prm"] = {"kind": "likelihood", key: "x"}
        with pytest.raises(ValueError, match=f"prm.{key}: not a field of the likelihood PRM here"):
            PipelineConfig.model_validate(cfg)
    cfg["prm"] = {"kind": "likelihood"}
    for key in ("prm", "n_action"):  # the loop's own field, and a typo: refused before any stage runs
        cfg["improve"] = {key: "x"}
        with pytest.raises(ValueError, match=f"improve.{key}: not a field of online DPO here"):
            PipelineConfig.model_validate(cfg)
    cfg["improve"] = {"states_from": "$rollout"}
    with pytest.raises(ValueError, match=r"improve.states_from: '\$rollout' is neither `\$rollouts`"):
        PipelineConfig.model_validate(cfg)
    # the values too, before any stage runs (the loop's own folders do not exist yet and are not checked)
    cases = [("improve", {"states_from": "$rollouts", "beta": -1.0}, "improve.beta: Input should be greater than 0"),
             ("improve", {"agent": {"kind": "random"}}, "improve: agent kind 'random' does not sample from a model"),
             ("improve", {"pairing": "all"}, "improve.pairing: Input should be 'best-worst' or 'best-rest'"),
             ("prm", {"kind": "likelihood", "anchor": "$demos", "steps": 0}, "prm.steps: Input should be greater"),
             ("sft", {"step": 10}, "sft.step: not a field of SFT here"),
             ("sft", {"data": "x"}, "sft.data: not a field of SFT here (the loop sets data, model, output_dir)"),
             ("sft", {"learning_rate": -1.0}, "sft.learning_rate: Input should be greater than 0")]
    for section, values, message in cases:
        cfg["improve"], cfg["prm"], cfg["sft"] = {}, {"kind": "likelihood"}, {}
        cfg[section] = values
        with pytest.raises(ValueError, match=re.escape(message)):
            PipelineConfig.model_validate(cfg)


def test_the_manifest_records_the_environment_and_a_resume_elsewhere_is_named(tmp_path, caplog):
    import logging

    import torch

    from proctor.pipeline.manifest import Manifest, environment_changes

    first = Manifest(tmp_path, {"a": 1}, seed=0)
    env = first.data["environment"]
    assert env["packages"]["torch"].startswith(torch.__version__.split("+")[0])
    assert env["torch_threads"] == torch.get_num_threads() and env["python"].count(".") == 2
    data = json.loads(first.path.read_text())
    data["environment"] = {**env, "packages": {**env["packages"], "transformers": "5.0.0"}, "torch_threads": 99}
    first.path.write_text(json.dumps(data))
    with caplog.at_level(logging.WARNING, logger="proctor.pipeline.manifest"):
        Manifest(tmp_path, {"a": 1}, seed=0)
    message = caplog.records[-1].getMessage()
    assert "resuming in another environment" in message
    assert f"torch_threads: 99 → {torch.get_num_threads()}" in message
    assert f"transformers: 5.0.0 → {env['packages']['transformers']}" in message
    assert environment_changes(env, env) == []


def test_a_prm_that_prefers_nothing_skips_dpo_and_says_so(tmp_path, caplog):
    """No pair has a PRM score gap above the margin: π1 is π0, the manifest and the log say why."""
    import logging

    from safetensors.torch import load_file

    cfg = toy_config(tmp_path / "run")
    cfg["improve"]["margin"] = 1.0  # scores lie in [0, 1]: no gap exceeds it
    cfg["evaluate"]["entries"] = cfg["evaluate"]["entries"][:1]
    cfg["monitor"] = None
    with caplog.at_level(logging.WARNING, logger="proctor.pipeline.run"):
        run_pipeline(PipelineConfig.model_validate(cfg))
    rec = json.loads((tmp_path / "run/manifest.json").read_text())["stages"]["iter-0/improve"]
    assert rec["result"]["skipped"].startswith("iteration 1: no preference pairs from")
    assert any("online DPO skipped, π_1 = π_0" in r.getMessage() for r in caplog.records)
    before = load_file(tmp_path / "run/iter-0/policy/model.safetensors")
    after = load_file(tmp_path / "run/iter-1/policy/model.safetensors")
    assert before.keys() == after.keys() and all((before[k] == after[k]).all() for k in before)


@pytest.mark.slow
def test_best_of_n_distillation_improves_the_policy_in_the_loop(tmp_path):
    cfg = toy_config(tmp_path / "run")
    cfg["prm"] = {"kind": "likelihood", "steps": 3, "batch_size": 4}
    cfg["improve"] = {"method": "bon-distill", "init": "$prm", "states_from": "$rollouts", "max_states": 5,
                      "n": 4, "epochs": 1, "batch_size": 2}
    cfg["evaluate"]["entries"] = cfg["evaluate"]["entries"][:1]
    summary = run_pipeline(PipelineConfig.model_validate(cfg))
    assert [(r["iteration"], r["policy"]) for r in summary["results"]] == [(0, "policy"), (1, "policy")]
    improve = json.loads((tmp_path / "run" / "manifest.json").read_text())["stages"]["iter-0/improve"]
    assert improve["config"]["init"] == improve["config"]["prm"] == str(tmp_path / "run" / "iter-0" / "prm")
    assert improve["config"]["policy"] == str(tmp_path / "run" / "iter-0" / "policy")
    assert improve["config"]["prompt"]["history"] == 2  # the policy agent's prompt
    assert 0 < improve["result"]["states"] <= 5 and improve["result"]["curve"]
    assert (tmp_path / "run" / "iter-1" / "policy" / "model.safetensors").is_file()
    # its config errors, before any stage runs
    cases = [({"method": "bon"}, "improve.method: 'bon' is not one of online-dpo, bon-distill"),
             ({"method": "bon-distill"}, "improve.states_from: required by best-of-N distillation"),
             ({"method": "bon-distill", "states_from": "$rollouts", "n_actions": 8},
              "improve.n_actions: not a field of best-of-N distillation here"),
             ({"method": "bon-distill", "states_from": "$rollouts", "n": 0}, "improve.n: Input should be greater"),
             ({"method": "bon-distill", "states_from": "$rollouts", "init": "$pr"},
              "improve.init: '$pr' is neither `$prm` (Q_k's LM), `$policy` (π_k) nor a model folder")]
    for improve_section, message in cases:
        cfg["improve"] = improve_section
        with pytest.raises(ValueError, match=re.escape(message)):
            PipelineConfig.model_validate(cfg)
    cfg["improve"] = {"method": "bon-distill", "states_from": "$rollouts"}
    cfg["policy_agent"] = {"kind": "hf", "temperature": 1.0}
    with pytest.raises(ValueError, match="bon-distill needs the `choice` policy agent"):
        PipelineConfig.model_validate(cfg)

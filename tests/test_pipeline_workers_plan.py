"""`proctor run`: env workers for every stage that steps envs (`workers`, `step_timeout`), fixed task panels
(`tasks: [ids]`, `panel: FILE`), `--dry-run` (the stages, nothing run), and the env's package versions in the
manifests."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from proctor.cli import app
from proctor.pipeline import PipelineConfig, run_pipeline
from proctor.pipeline.run import plan_stages
from proctor.store import TrajectoryStore
from test_pipeline import toy_config

TOY_STAGES = ["model", "demos", "iter-0/sft", "iter-0/rollouts", "iter-0/targets", "iter-0/prm",
              "iter-0/eval/policy", "iter-0/eval/best-of-2", "iter-0/eval/beam", "iter-0/monitor", "iter-0/improve",
              "iter-1/eval/policy", "iter-1/eval/best-of-2", "iter-1/monitor"]


def test_dry_run_prints_every_stage_and_runs_nothing(tmp_path):
    cfg = {**toy_config(tmp_path / "run"), "workers": 2}
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(cfg))
    res = CliRunner().invoke(app, ["run", str(tmp_path / "run.yaml"), "--dry-run"])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert "env household(max_steps=6, preset=small), seed 0, workers 2, 1 iteration(s)" in lines[0]
    stage_lines = [line for line in lines if "iteration " in line and "→" in line]
    assert [line.split()[0] for line in stage_lines] == TOY_STAGES
    assert "household train: first 4 tasks of 2000 × 1 sample  | expert(search)" in stage_lines[1]
    assert "household train: first 3 tasks of 2000 × 2 samples  | choice(π0, temperature=1.0)" in stage_lines[3]
    assert "household test: first 1 task of 200 × 1 sample  | beam(beams=2, expansions=2, agent=choice(π0, " \
           "temperature=1.0), prm=Q0)" in stage_lines[8]
    assert "π0 against Q0 → π1" in stage_lines[10] and stage_lines[10].endswith(str(tmp_path / "run/iter-1/policy"))
    assert "choice(π1, temperature=1.0)" in stage_lines[11]
    assert lines[-1] == f"{len(TOY_STAGES)} stages; nothing was run (--dry-run)"
    assert not (tmp_path / "run").exists()
    # a bad config fails as without --dry-run: one line, exit 2
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump({**cfg, "sft": {"stesp": 3}}))
    res = CliRunner().invoke(app, ["run", str(tmp_path / "bad.yaml"), "--dry-run"])
    assert res.exit_code == 2 and "sft.stesp: not a field of SFT here" in res.output
    assert len(res.output.strip().splitlines()) == 1
    # an env that cannot be built here is a note, not a failure (the config itself is valid)
    (tmp_path / "nodata.yaml").write_text(yaml.safe_dump({**cfg, "env_kwargs": {"preset": "nope"}}))
    res = CliRunner().invoke(app, ["run", str(tmp_path / "nodata.yaml"), "--dry-run"])
    assert res.exit_code == 0 and "note: env 'household' could not be built here" in res.output
    assert "household train: first 4 tasks × 1 sample" in res.output


def test_workers_go_to_every_stage_config(tmp_path):
    cfg = PipelineConfig.model_validate({**toy_config(tmp_path), "workers": 2, "step_timeout": 30})
    dpo = cfg.improve.stage_config(cfg, {"$policy": "p", "$prm": "q", "$out": "o"})
    assert dpo.workers == 2  # online DPO's rollouts: the pipeline's workers
    cfg = PipelineConfig.model_validate({**toy_config(tmp_path), "workers": 2,
                                         "improve": {**toy_config(tmp_path)["improve"], "workers": 1}})
    assert cfg.improve.stage_config(cfg, {"$policy": "p", "$prm": "q", "$out": "o"}).workers == 1  # its own wins
    assert PipelineConfig.model_validate(toy_config(tmp_path)).workers == 0
    with pytest.raises(ValueError, match="workers"):
        PipelineConfig.model_validate({**toy_config(tmp_path), "workers": -1})


def test_task_panels_by_id_and_file(tmp_path):
    from proctor.envs import make
    from proctor.pipeline.run import Pipeline

    test_ids = make("household", preset="small").task_ids("test")
    panel = tmp_path / "panel.txt"
    panel.write_text("# a comment line\n" + "".join(f"{t}  # why\n" for t in test_ids[5:9]) + "\n")
    base = toy_config(tmp_path / "run")
    cfg = PipelineConfig.model_validate({**base, "evaluate": {**base["evaluate"], "panel": str(panel), "tasks": 3}})
    assert cfg.evaluate.task_ids() == test_ids[5:8]
    cfg = PipelineConfig.model_validate({**base, "evaluate": {**base["evaluate"], "panel": str(panel), "tasks": None}})
    assert cfg.evaluate.task_ids() == test_ids[5:9]
    listed = PipelineConfig.model_validate({**base, "rollout": {"split": "test", "tasks": test_ids[:2]}})
    assert listed.rollout.task_ids() == test_ids[:2]
    pipeline = Pipeline(listed)
    assert pipeline.resolve_tasks(listed.rollout) == test_ids[:2]
    wrong = PipelineConfig.model_validate({**toy_config(tmp_path / "run2"),
                                           "rollout": {"split": "train", "tasks": test_ids[:2]}})
    with pytest.raises(ValueError, match="2 task ids are not tasks of split 'train' of env 'household'"):
        Pipeline(wrong).resolve_tasks(wrong.rollout)
    for section, message in [({"panel": str(tmp_path / "none.txt")}, "no such file"),
                             ({"panel": str(panel), "tasks": ["a"]}, "give a panel file or a list of tasks"),
                             ({"tasks": ["a", "a"]}, "duplicate task ids"), ({"tasks": 0}, "must be >= 1")]:
        with pytest.raises(ValueError, match=message):
            PipelineConfig.model_validate({**base, "rollout": {"split": "test", **section}})
    # online DPO's rollouts take a panel too
    improve = {**base["improve"], "split": "test", "panel": str(panel), "tasks": 2}
    cfg = PipelineConfig.model_validate({**base, "improve": improve})
    assert cfg.improve.stage_config(cfg, {"$policy": "p", "$prm": "q", "$out": "o"}).tasks == test_ids[5:7]
    assert cfg.model_dump(mode="json")["improve"]["panel"] == str(panel)  # the config records the file
    with pytest.raises(ValueError, match="give a panel file or a list of tasks"):
        PipelineConfig.model_validate({**base, "improve": {**improve, "tasks": ["a"]}})
    (tmp_path / "dup.txt").write_text("a\nb\na\n")
    with pytest.raises(ValueError, match="has duplicate task ids"):
        PipelineConfig.model_validate({**base, "rollout": {"split": "test", "panel": str(tmp_path / "dup.txt")}})


def _episodes(root) -> list[tuple]:
    return sorted((t.task_id, t.sample, tuple(t.actions), t.success, t.termination)
                  for t in TrajectoryStore.open(root).load())


@pytest.mark.slow
def test_a_two_worker_run_makes_the_same_stores_with_env_workers(tmp_path, monkeypatch):
    """10-25 s: the toy loop with 0 and with 2 env workers. Every stage that steps envs (demos, rollouts, the three
    evaluations, beam search, the monitor, online DPO's rollouts) makes its envs in worker processes, and the
    stores are the same episodes. The run records exactly the stages `--dry-run` plans."""
    from proctor.rollout.pools import InProcessEnvPool
    from proctor.rollout.worker_process import ProcessEnvPool

    made: dict[str, int] = {"in_process": 0, "processes": 0}
    for cls, key in ((InProcessEnvPool, "in_process"), (ProcessEnvPool, "processes")):
        def spy(self, *args, _init=cls.__init__, _key=key, **kwargs):
            made[_key] += 1
            _init(self, *args, **kwargs)
        monkeypatch.setattr(cls, "__init__", spy)
    runs = {}
    for n in (0, 2):
        made.update(in_process=0, processes=0)
        cfg = PipelineConfig.model_validate({**toy_config(tmp_path / f"w{n}"), "workers": n})
        runs[n] = run_pipeline(cfg), dict(made)
        manifest = json.loads((tmp_path / f"w{n}" / "manifest.json").read_text())
        assert sorted(manifest["stages"]) == sorted(s.key for s in plan_stages(cfg)) == sorted(TOY_STAGES)
    (_, zero), (_, two) = runs[0], runs[2]
    assert zero["processes"] == 0 and zero["in_process"] >= 9
    assert two["in_process"] == 0 and two["processes"] == zero["in_process"]
    stages = json.loads((tmp_path / "w2" / "manifest.json").read_text())["stages"]
    assert stages["iter-0/improve"]["config"]["workers"] == 2
    assert stages["iter-0/eval/beam"]["config"]["workers"] == 2
    stores = ["demos", "iter-0/rollouts", "iter-0/monitor", "iter-0/improve/iter-1/rollouts"] + [
        f"iter-{k}/eval/{name}/trajectories" for k, names in ((0, ["policy", "best-of-2", "beam"]),
                                                              (1, ["policy", "best-of-2"])) for name in names]
    for store in stores:
        assert _episodes(tmp_path / "w0" / store) == _episodes(tmp_path / "w2" / store), store
    assert [r["success_rate"] for r in runs[0][0]["results"]] == [r["success_rate"] for r in runs[2][0]["results"]]


def test_stores_record_the_env_packages_versions_and_a_resume_under_others_warns(tmp_path, monkeypatch, caplog):
    import logging

    from proctor.agents.simple import RandomAgent
    from proctor.envs import EnvSpec, make
    from proctor.rollout import engine

    spec = EnvSpec("household", {"preset": "small", "max_steps": 3})
    tasks = make("household", preset="small").task_ids("test")[:2]
    monkeypatch.setattr(engine, "env_versions", lambda env: {"somepkg": "1.0"})
    engine.rollout(spec, RandomAgent(seed=0), tasks[:1], tmp_path / "store", progress=False)
    assert TrajectoryStore.open(tmp_path / "store").meta["rollout"]["env_versions"] == {"somepkg": "1.0"}
    monkeypatch.setattr(engine, "env_versions", lambda env: {"somepkg": "2.0"})
    with caplog.at_level(logging.WARNING, logger="proctor.rollout.engine"):
        engine.rollout(spec, RandomAgent(seed=0), tasks, tmp_path / "store", progress=False)
    assert any("other versions of the env's packages" in r.getMessage() and "somepkg: 1.0 → 2.0" in r.getMessage()
               for r in caplog.records)
    assert len(TrajectoryStore.open(tmp_path / "store").load()) == 2  # resumed, not refused

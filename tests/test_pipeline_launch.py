"""`proctor run`'s `launch` section: training stages in several processes under torchrun, a failed rank as one
line naming the stage, the rank and its log, and the loop as a plan of stages with the command of each."""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from proctor.cli import app
from proctor.pipeline import PipelineConfig, run_pipeline
from proctor.pipeline.launch import DevicePlan, LaunchSection, RankFailure, rank_error, root_cause
from proctor.pipeline.run import improves_on_loop_server, plan_stages
from test_pipeline import toy_config

#: the end of what torchrun printed when rank 1 of 2 was killed (torch 2.13), as `root_cause` reads it
KILLED = """
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
======================================================
proctor FAILED
------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-29_01:33:18
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: 9370)  (SIGKILL)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 9370
======================================================
"""


def test_root_cause_reads_the_first_failed_rank(tmp_path):
    assert root_cause(KILLED) == {"rank": 1, "local_rank": 1, "exitcode": -9, "signal": "SIGKILL",
                                  "error_file": None}
    assert rank_error(root_cause(KILLED), None) == "killed by SIGKILL"
    raised = KILLED.replace("-9 (pid: 9370)  (SIGKILL)", "1 (pid: 9370) ").replace(
        "<N/A>", str(tmp_path / "error.json"))
    (tmp_path / "error.json").write_text(json.dumps({"message": {"message": "Traceback ...\nValueError: boom"}}))
    cause = root_cause(raised)
    assert (cause["exitcode"], cause["signal"]) == (1, None)
    assert rank_error(cause, None) == "ValueError: boom"
    (tmp_path / "stderr.log").write_text("loading\nerror: the config is wrong\n\n")
    assert rank_error({**cause, "error_file": None}, tmp_path / "stderr.log") == "error: the config is wrong"
    assert root_cause("nothing failed") is None


def test_too_many_processes_or_a_missing_cluster_is_one_line_before_any_stage(tmp_path):
    cpus = os.cpu_count()
    with pytest.raises(ValueError, match=f"launch.processes: {cpus + 1} processes, but this machine has {cpus} CPUs"):
        PipelineConfig.model_validate({**toy_config(tmp_path), "launch": {"processes": cpus + 1}})
    with pytest.raises(ValueError, match="launch.nodes: 2 nodes need launch.ray_address"):
        LaunchSection(nodes=2)
    with pytest.raises(ValueError, match="accelerate_config is read by `launcher: accelerate` only"):
        LaunchSection(accelerate_config=tmp_path)
    (tmp_path / "run.yaml").write_text(yaml.safe_dump({**toy_config(tmp_path / "run"), "launch": {"processes": 999}}))
    res = CliRunner().invoke(app, ["run", str(tmp_path / "run.yaml")])
    assert res.exit_code == 2 and "launch.processes: 999 processes" in res.output
    assert len(res.output.strip().splitlines()) == 1 and not (tmp_path / "run").exists()


def test_the_plan_gives_each_stage_its_command_and_launcher(tmp_path):
    cfg = PipelineConfig.model_validate({**toy_config(tmp_path / "run"), "launch": {"processes": 2,
                                                                                    "stages": ["sft", "prm"]}})
    from proctor.pipeline.run import Pipeline

    pipeline = Pipeline(cfg)
    commands = {s.key: pipeline.command(s) for s in pipeline.plan()}
    config = tmp_path / "run" / "config.yaml"
    assert commands["iter-0/sft"] == f"torchrun --standalone --nproc-per-node 2 -m proctor run {config} --stage iter-0/sft"
    assert commands["iter-0/prm"].startswith("torchrun --standalone --nproc-per-node 2 -m proctor run")
    assert commands["iter-0/improve"] == f"proctor run {config} --stage iter-0/improve"  # not in launch.stages
    assert commands["iter-0/eval/policy"] == f"proctor run {config} --stage iter-0/eval/policy"
    words = LaunchSection(launcher="accelerate", processes=2).words()
    assert words[:2] == ["accelerate", "launch"] and words[-2:] == ["-m", "proctor"]
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(cfg.model_dump(mode="json")))
    res = CliRunner().invoke(app, ["run", str(tmp_path / "run.yaml"), "--dry-run"])
    assert res.exit_code == 0, res.output
    assert f"$ torchrun --standalone --nproc-per-node 2 -m proctor run {config} --stage iter-0/sft" in res.output
    assert "training stages (sft, prm): 2 process(es) on each of 1 node(s) under torchrun" in res.output


def test_a_stage_runs_by_its_command_into_the_same_run_folder(tmp_path):
    """`proctor run RUN/config.yaml --stage KEY` runs one stage and records it, with its command, in the manifest;
    a stage whose inputs are not there yet is one line naming the input."""
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(toy_config(tmp_path / "run")))
    runner = CliRunner()
    res = runner.invoke(app, ["run", str(tmp_path / "run.yaml"), "--stage", "iter-0/sft"])
    assert res.exit_code == 2 and "stage iter-0/sft: its input" in res.output and "demos is not there yet" in res.output
    res = runner.invoke(app, ["run", str(tmp_path / "run.yaml"), "--stage", "nope"])
    assert res.exit_code == 2 and "no stage 'nope' in this run; its stages are: model, demos, iter-0/sft" in res.output
    for key in ("model", "demos"):
        res = runner.invoke(app, ["run", str(tmp_path / "run.yaml"), "--stage", key])
        assert res.exit_code == 0, res.output
    config = tmp_path / "run" / "config.yaml"
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert sorted(manifest["stages"]) == ["demos", "model"]
    assert manifest["stages"]["demos"]["command"] == f"proctor run {config} --stage demos"
    # the run folder's config runs the next stage as the user's config does
    res = runner.invoke(app, ["run", str(config), "--stage", "iter-0/sft"])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "run" / "iter-0" / "policy" / "config.json").is_file()


def _losses(run: Path) -> dict[str, list[float]]:
    sft = json.loads((run / "iter-0" / "policy" / "sft.json").read_text())
    prm = json.loads((run / "iter-0" / "prm" / "prm_train.json").read_text())
    return {"sft": sft["losses"], "prm": [r["loss"] for r in prm["curve"]]}


@pytest.mark.slow
def test_training_stages_in_two_processes_follow_the_in_process_run(tmp_path):
    """~90 s: the toy loop in one process, then with SFT, the PRM head and online DPO each in 2 gloo processes
    under torchrun: the same stages, the losses within 1e-3 of the in-process curve at every step, the
    evaluation rows made, each rank's log kept."""
    one = PipelineConfig.model_validate(toy_config(tmp_path / "one"))
    two = PipelineConfig.model_validate({**toy_config(tmp_path / "two"), "launch": {"processes": 2}})
    first, second = run_pipeline(one), run_pipeline(two)
    for name, curve in _losses(tmp_path / "one").items():
        assert _losses(tmp_path / "two")[name] == pytest.approx(curve, abs=1e-3), name
    assert [r["policy"] for r in second["results"]] == [r["policy"] for r in first["results"]]
    manifest = json.loads((tmp_path / "two" / "manifest.json").read_text())
    assert manifest["stages"]["iter-0/sft"]["command"].startswith("torchrun --standalone --nproc-per-node 2")
    assert sorted(manifest["stages"]) == sorted(s.key for s in plan_stages(two))
    for rank in (0, 1):
        assert list((tmp_path / "two" / "logs" / "iter-0-sft").glob(f"*/attempt_0/{rank}/stderr.log"))


def _kill_rank(run: Path, key: str, rank: int, stop: threading.Event) -> None:
    """SIGKILL the process of `rank` that runs stage `key` of `run` once it has started."""
    while not stop.is_set():
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if key.encode() in cmdline and str(run).encode() in b" ".join(cmdline) and f"RANK={rank}".encode() in environ:
                time.sleep(1.0)  # mid-stage: the rank is importing or training
                os.kill(int(pid), signal.SIGKILL)
                return
        time.sleep(0.2)


@pytest.mark.slow
def test_a_killed_rank_fails_the_stage_in_one_line_and_the_same_command_resumes(tmp_path):
    """~60 s: rank 1 of the SFT stage is killed mid-stage: the run fails with one line naming the stage, the rank
    and its log file, SFT is not recorded, and the same run resumes from SFT to the end."""
    cfg = {**toy_config(tmp_path / "run"), "launch": {"processes": 2, "stages": ["sft"]}, "iterations": 0}
    cfg["evaluate"]["entries"] = cfg["evaluate"]["entries"][:1]
    cfg.pop("monitor")
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(cfg))
    stop = threading.Event()
    killer = threading.Thread(target=_kill_rank, args=(tmp_path / "run", "iter-0/sft", 1, stop), daemon=True)
    killer.start()
    res = CliRunner().invoke(app, ["run", str(tmp_path / "run.yaml")])
    stop.set()
    assert res.exit_code == 2, res.output
    line = res.output.strip().splitlines()[-1]
    assert "stage iter-0/sft failed on rank 1 (exit code -9, SIGKILL)" in line, res.output
    assert "logs/iter-0-sft" in line and "the same `proctor run` resumes from this stage" in line
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert "iter-0/sft" not in manifest["stages"] and "demos" in manifest["stages"]
    res = CliRunner().invoke(app, ["run", str(tmp_path / "run.yaml")])
    assert res.exit_code == 0, res.output
    assert "iter-0/eval/policy" in json.loads((tmp_path / "run" / "manifest.json").read_text())["stages"]


def test_a_failed_launch_raises_rank_failure_with_its_log(tmp_path):
    """A rank that raises: its error file's message and its own log, through a real torchrun."""
    from proctor.pipeline.launch import run_launched

    script = tmp_path / "stage.py"
    script.write_text("import os, sys\nfrom torch.distributed.elastic.multiprocessing.errors import record\n"
                      "@record\ndef main():\n    if os.environ['RANK'] == '1':\n"
                      "        raise ValueError('rank one cannot go on')\nmain()\n")
    words = ["torchrun", "--standalone", "--nproc-per-node", "2", str(script)]
    with pytest.raises(RankFailure) as failed:
        run_launched("iter-0/sft", words, [], tmp_path / "logs", tmp_path / "result.json")
    e = failed.value
    assert (e.stage, e.rank, e.exitcode) == ("iter-0/sft", 1, "exit code 1")
    assert e.error == "ValueError: rank one cannot go on" and e.log.name == "stderr.log" and e.log.is_file()
    assert str(e).count("\n") == 0


@pytest.mark.slow
@pytest.mark.extra
def test_sft_on_two_nodes_of_a_local_ray_cluster_follows_one_process(tmp_path):
    """~60 s: a local Ray cluster of two nodes (one CPU each); the SFT stage runs one torchrun on each node, Ray
    placing them (STRICT_SPREAD), torch's c10d rendezvous joining them, and follows the in-process curve."""
    cluster_utils = pytest.importorskip("ray.cluster_utils", reason="the ray extra: pip install -e '.[ray]'")
    import ray

    from proctor.pipeline.run import Pipeline

    cluster = cluster_utils.Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    cluster.add_node(num_cpus=1)
    try:
        curves = {}
        for name, launch in (("one", {}), ("two", {"nodes": 2, "ray_address": cluster.address, "stages": ["sft"]})):
            cfg = PipelineConfig.model_validate({**toy_config(tmp_path / name), "launch": launch})
            pipeline = Pipeline(cfg)
            for stage in pipeline.stages():
                pipeline.execute(stage)
                if stage.key == "iter-0/sft":
                    break
            curves[name] = json.loads((tmp_path / name / "iter-0" / "policy" / "sft.json").read_text())["losses"]
        assert curves["two"] == pytest.approx(curves["one"], abs=1e-3)
        manifest = json.loads((tmp_path / "two" / "manifest.json").read_text())
        assert "--nnodes 2" in manifest["stages"]["iter-0/sft"]["command"]
        assert sorted(p.name for p in (tmp_path / "two" / "logs" / "iter-0-sft").iterdir()) == ["node-0", "node-1",
                                                                                              "result.json"]
    finally:
        ray.shutdown()
        cluster.shutdown()


def test_a_device_plan_must_fit_what_torch_sees(tmp_path, monkeypatch):
    """On this machine torch sees no CUDA device: any GPU named is one line at validation. With 8 seen (the count
    is all the plan reads of the machine), the server on 0–3 and training on 4–7 run apart: the server's tensor
    parallelism and the training processes must match their GPUs, and each gets them as CUDA_VISIBLE_DEVICES."""
    from proctor.pipeline import launch
    from proctor.pipeline.run import Pipeline, served_generation

    base = toy_config(tmp_path / "run")
    with pytest.raises(ValueError, match=r"devices.training: GPU 0 is not a CUDA device torch sees here \(it sees 0\)"):
        PipelineConfig.model_validate({**base, "devices": {"training": [0]}})
    monkeypatch.setattr(launch, "_cuda_count", lambda: 8)
    vllm = {"engine": "vllm", "server": {"tensor_parallel_size": 4, "python": "/bin/true"}}
    plan = {**base, "generation": vllm, "launch": {"processes": 4}, "devices": {"generation": [0, 1, 2, 3],
                                                                              "training": [4, 5, 6, 7]}}
    cfg = PipelineConfig.model_validate(plan)
    assert cfg.devices.apart and DevicePlan.visible(cfg.devices.training) == {"CUDA_VISIBLE_DEVICES": "4,5,6,7"}
    server = served_generation(cfg).server
    assert server.config.env["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"
    assert server.command()[server.command().index("--tensor-parallel-size") + 1] == "4"
    sft = next(s for s in Pipeline(cfg).plan() if s.key == "iter-0/sft")
    assert Pipeline(cfg).launched(sft)
    for change, message in [({"devices": {"training": [8]}}, "devices.training: GPU 8 is not a CUDA device"),
                            ({"launch": {"processes": 2}}, "devices.training: 4 GPUs, but launch.processes is 2"),
                            ({"generation": {"engine": "vllm"}}, "tensor × data parallel size is 1 × 1"),
                            ({"devices": {"training": [1, 1]}}, "devices.training: give distinct GPU indices")]:
        with pytest.raises(ValueError, match=re.escape(message)):
            PipelineConfig.model_validate({**plan, **change})
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(cfg.model_dump(mode="json")))
    res = CliRunner().invoke(app, ["run", str(tmp_path / "run.yaml"), "--dry-run"])
    assert res.exit_code == 0, res.output
    assert "devices: the vLLM server on GPUs [0, 1, 2, 3], training on GPUs [4, 5, 6, 7]" in res.output


def test_a_bad_env_argument_is_one_line_before_any_stage(tmp_path):
    (tmp_path / "run.yaml").write_text(yaml.safe_dump({**toy_config(tmp_path / "run"),
                                                       "env_kwargs": {"presett": "small"}}))
    res = CliRunner().invoke(app, ["run", str(tmp_path / "run.yaml")])
    assert res.exit_code == 2 and "environment 'household' has no argument 'presett' (did you mean 'preset'?)" in \
        res.output
    assert len(res.output.strip().splitlines()) == 1 and not (tmp_path / "run").exists()


def test_a_run_resumes_with_other_execution_settings_and_across_a_version_that_added_a_field(tmp_path):
    """The manifest records the config without `launch`, `devices` and `prm_serving`, so a resume may launch on
    more processes; a config recorded before a field existed is read as this version reads it (the field at its
    default) and resumes; any other difference is still refused, naming the field."""
    from proctor.pipeline.run import Pipeline

    base = toy_config(tmp_path / "run")
    Pipeline(PipelineConfig.model_validate(base)).open()
    path = tmp_path / "run" / "manifest.json"
    recorded = json.loads(path.read_text())
    assert "launch" not in recorded["config"] and "devices" not in recorded["config"]
    Pipeline(PipelineConfig.model_validate({**base, "launch": {"processes": 2}})).open()
    del recorded["config"]["generation"]["server"]["weight_reload"]  # as a version before the field recorded it
    path.write_text(json.dumps(recorded))
    Pipeline(PipelineConfig.model_validate(base)).open()
    assert "weight_reload" in json.loads(path.read_text())["config"]["generation"]["server"]  # recorded anew
    with pytest.raises(ValueError, match=re.escape("another config (seed: 0 → 1)")):
        Pipeline(PipelineConfig.model_validate({**base, "seed": 1})).open()


def test_the_improvement_samples_from_the_loop_s_server_as_its_written_config_says(tmp_path):
    """With the loop's vLLM server and an `improve` section without a server of its own, the improvement attaches to
    the loop's server; the same from RUN/config.yaml (every field written out), which a launched stage reads."""
    cfg = PipelineConfig.model_validate({**toy_config(tmp_path), "generation": {"engine": "vllm"}})
    again = PipelineConfig.model_validate(yaml.safe_load(yaml.safe_dump(cfg.model_dump(mode="json"))))
    assert improves_on_loop_server(cfg) and improves_on_loop_server(again)
    own = PipelineConfig.model_validate({**toy_config(tmp_path), "generation": {"engine": "vllm"},
                                         "improve": {"generation": {"engine": "vllm"}}})
    assert not improves_on_loop_server(own)

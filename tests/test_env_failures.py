"""A failed env is an error (issue 42): a missing extra or a misspelt env argument is one line before any episode;
a rollout whose episodes ended in env_error fails (non-zero, one summary line), is not recorded as a done stage,
and its re-run redoes those episodes by itself; Ctrl-C with workers is one line and resumes; `--env-module` takes
a file path; the guide's `check_env` snippet runs as shown."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from proctor.envs import TextEnv, make
from proctor.envs.arguments import check_arguments
from proctor.rollout import EnvFailures, RolloutConfig, run_rollout
from proctor.store import TrajectoryStore
from test_rollout_cli import PROCTOR, cli_env, proctor_rollout, stored_lines

ROOT = Path(__file__).resolve().parents[1]
MY_ENV = ROOT / "examples" / "own_env" / "my_env.py"

#: an interpreter where the alfworld extra's packages cannot be imported (as in a venv without `.[alfworld]`)
WITHOUT_ALFWORLD = """
import sys

class NoAlfworld:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("alfworld", "textworld"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoAlfworld())
"""


def run(cmd: list[str], cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, env=cli_env(), cwd=cwd, check=False, capture_output=True, text=True, timeout=timeout)


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return lines[0]


# -- a missing extra ------------------------------------------------------------------------------------------
def test_a_missing_extra_is_one_line_naming_it_before_any_episode(tmp_path):
    out = tmp_path / "alf"
    script = WITHOUT_ALFWORLD + textwrap.dedent(f"""
        import pytest
        from pydantic import ValidationError

        from proctor.envs import make
        from proctor.rollout import RolloutConfig

        with pytest.raises(ImportError, match=r"optional extra 'alfworld'.*pip install -e \\"\\.\\[alfworld\\]\\""):
            make("alfworld")
        with pytest.raises(ValidationError, match="needs the optional extra 'alfworld'"):
            RolloutConfig(env="alfworld", out={str(tmp_path / "lib")!r})

        from proctor.cli import main
        sys.argv = ["proctor", "rollout", "--env", "alfworld", "--agent", "expert", "--tasks", "3",
                    "--out", {str(out)!r}, "--no-progress"]
        main()
    """)
    proc = run([sys.executable, "-c", script])
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    line = one_error_line(proc)
    assert "environment 'alfworld' needs the optional extra 'alfworld'" in line
    assert line.endswith('pip install -e ".[alfworld]"')
    assert not out.exists() and not (tmp_path / "lib").exists()  # no store, no episode


# -- env errors fail the rollout; its re-run redoes them ------------------------------------------------------
def test_env_errors_fail_the_rollout_and_the_rerun_redoes_them_once_fixed(tmp_path):
    broken = tmp_path / "broken"
    broken.touch()
    cfg = RolloutConfig(env="guess", env_module="test_rollout_envs", agent={"kind": "expert"}, out=tmp_path / "s",
                        env_kwargs={"broken_while": str(broken), "n_tasks": 4}, tasks=4, samples=2, progress=False)
    with pytest.raises(EnvFailures) as failed:
        run_rollout(cfg)
    message = str(failed.value)
    assert message.startswith("8 of 8 episodes ended in env_error (the first, task 'test-0' sample 0: reset failed: "
                              f"RuntimeError: broken while {broken} exists)")
    assert "running the same command again retries them" in message and "\n" not in message
    assert (failed.value.failed, failed.value.total) == (8, 8)
    assert [t.termination for t in TrajectoryStore.open(cfg.out).load()] == ["env_error"] * 8

    broken.unlink()  # the cause fixed (as installing the extra would): the same call redoes them, no --retry-failed
    result = run_rollout(cfg)
    trajs = TrajectoryStore.open(cfg.out).load()
    assert len(trajs) == 8 and all(t.success for t in trajs) and result.summary.successes == 8
    assert stored_lines(cfg.out) == 16  # the failed records are kept, each superseded by its retry


def test_a_stage_whose_rollout_failed_is_not_recorded_as_done(tmp_path):
    """The pipeline's manifest records a stage only when its function returns: a failed rollout stays to do, and
    the re-run (after the fix) runs it and records it."""
    from proctor.pipeline.manifest import Manifest

    broken = tmp_path / "broken"
    broken.touch()
    cfg = RolloutConfig(env="guess", env_module="test_rollout_envs", agent={"kind": "expert"},
                        out=tmp_path / "run" / "demos", env_kwargs={"broken_while": str(broken)}, tasks=3,
                        progress=False)
    manifest = Manifest(tmp_path / "run", {"demos": "guess"}, seed=0)
    stage = {"iteration": 0, "inputs": [], "outputs": [cfg.out / "manifest.json"], "config": cfg,
             "run": lambda: run_rollout(cfg)}
    with pytest.raises(EnvFailures, match="3 of 3 episodes ended in env_error"):
        manifest.stage("demos", **stage)
    assert manifest.done("demos") is None
    broken.unlink()
    assert Manifest(tmp_path / "run", {"demos": "guess"}, seed=0).stage("demos", **stage)["config"]["tasks"] == 3
    assert all(t.success for t in TrajectoryStore.open(cfg.out).load())


def test_rollout_and_eval_commands_exit_non_zero_with_one_summary_line(tmp_path):
    broken = tmp_path / "broken"
    broken.touch()
    args = ["--agent", "expert", "--tasks", "3", "--env-arg", f"broken_while={broken}"]
    proc = run(proctor_rollout(tmp_path / "r", *args))
    assert proc.returncode == 2
    assert re.fullmatch(r"error: 3 of 3 episodes ended in env_error \(the first, task 'test-0' sample 0: reset "
                        r"failed: RuntimeError: broken while .* exists\); .* keeps them, and running the same "
                        r"command again retries them", one_error_line(proc))
    evaluate = [PROCTOR, "eval", "--env", "guess", "--env-module", "test_rollout_envs", "--out", str(tmp_path / "e"),
                "--no-progress", *args]
    proc = run(evaluate)
    assert proc.returncode == 2 and "3 of 3 episodes ended in env_error" in one_error_line(proc)
    assert (tmp_path / "e" / "summary.json").is_file()  # the summary is written, the crashed episodes listed
    broken.unlink()
    for cmd in (proctor_rollout(tmp_path / "r", *args), evaluate):
        proc = run(cmd)
        assert proc.returncode == 0, proc.stderr[-2000:]
    assert len(TrajectoryStore.open(tmp_path / "r").load()) == 3


# -- env arguments --------------------------------------------------------------------------------------------
def test_a_misspelt_env_argument_is_one_line_naming_the_ones_it_takes(tmp_path):
    proc = run([PROCTOR, "rollout", "--env", "household", "--env-arg", "presett=small", "--tasks", "2",
                "--out", str(tmp_path / "r"), "--no-progress"])
    assert proc.returncode == 2
    assert one_error_line(proc) == (
        "error: options: field 'env_kwargs': environment 'household' has no argument 'presett' (did you mean "
        "'preset'?); it takes seed, num_tasks, max_steps, expert_hints, preset")
    assert not (tmp_path / "r").exists()
    proc = run([PROCTOR, "eval", "--env", "household", "--env-arg", "max_step=3", "--out", str(tmp_path / "e"),
                "--no-progress"])
    assert proc.returncode == 2 and "has no argument 'max_step' (did you mean 'max_steps'?)" in one_error_line(proc)
    with pytest.raises(ValidationError, match="needs the argument 'path'"):
        RolloutConfig(env="stepwise", out=tmp_path / "x")
    with pytest.raises(ValueError, match="environment 'guess' has no argument 'hang' .*; it takes max_steps, n_tasks"):
        make("guess", hang=1)

    class Forwarding(TextEnv):  # as examples/own_env/my_env.py: its **kwargs go to TextEnv
        def __init__(self, size: int = 3, **kwargs):
            super().__init__(max_steps=6, **kwargs)

    with pytest.raises(ValueError, match=r"environment 'mine' has no argument 'sise' \(did you mean 'size'\?\); "
                                         "it takes size, max_steps, expert_hints$"):
        check_arguments("mine", Forwarding, {"sise": 4})


# -- Ctrl-C with workers ------------------------------------------------------------------------------------------
def test_ctrl_c_with_workers_is_one_line_and_the_same_command_resumes(tmp_path):
    out = tmp_path / "run"
    cmd = proctor_rollout(out, "--agent", "expert", "--tasks", "30", "--samples", "2", "--batch", "4", "--workers",
                          "2", "--env-arg", "step_delay=0.1", "--env-arg", "n_tasks=30")
    # its own process group, as a terminal's foreground job: Ctrl-C reaches the command and its workers
    proc = subprocess.Popen(cmd, env=cli_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    deadline = time.monotonic() + 90
    while stored_lines(out) < 6 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    assert proc.poll() is None, proc.stderr.read()
    os.killpg(proc.pid, signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    kept = re.fullmatch(r"interrupted: (\d+) of 60 episodes are kept in (.*); run the same command again to resume",
                        lines[0])
    assert kept and kept.group(2) == str(out)
    # (a record whose write Ctrl-C cut, mid fsync, is cut back from the shard: the one line in flight)
    assert int(kept.group(1)) == len(TrajectoryStore.open(out).load()) >= 5
    again = run(cmd)
    assert again.returncode == 0, again.stderr[-2000:]
    keys = [t.key for t in TrajectoryStore.open(out).load()]
    assert len(keys) == len(set(keys)) == 60


# -- --env-module takes a file -------------------------------------------------------------------------------------
def test_env_module_takes_a_file_path_and_the_workers_import_it(tmp_path):
    cmd = [PROCTOR, "rollout", "--env-module", str(MY_ENV.relative_to(ROOT)), "--env", "guess", "--agent", "random",
           "--tasks", "3", "--workers", "1", "--out", str(tmp_path / "g"), "--no-progress"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, check=False, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    trajs = TrajectoryStore.open(tmp_path / "g").load()
    assert len(trajs) == 3 and {t.termination for t in trajs} <= {"success", "failure", "max_steps"}
    proc = subprocess.run([*cmd[:3], "examples/own_env/nope.py", *cmd[4:]], cwd=ROOT, env=env, check=False,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "nope.py does not exist" in one_error_line(proc)


# -- the guide's check_env snippet ------------------------------------------------------------------------------------
def test_the_guides_check_env_snippet_runs_as_shown(tmp_path):
    guide = (ROOT / "docs" / "guides" / "own-env.md").read_text()
    section = guide[guide.index("## Check it"):]
    name = re.search(r"Save this as `(\w+\.py)` beside `my_env.py`", section)
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert name and code, "own-env.md: the check_env snippet or its file name is gone"
    shutil.copy(MY_ENV, tmp_path / "my_env.py")
    (tmp_path / name.group(1)).write_text(code.group(1))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, name.group(1)], cwd=tmp_path, env=env, check=False, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_check_env_called_without_a_main_guard_fails_at_once_with_the_hint(tmp_path):
    shutil.copy(MY_ENV, tmp_path / "my_env.py")
    (tmp_path / "unguarded.py").write_text("from proctor.envs import check_env\nfrom my_env import Guess\n\n"
                                           "check_env(Guess())\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "unguarded.py"], cwd=tmp_path, env=env, check=False, capture_output=True,
                          text=True, timeout=170)
    assert proc.returncode == 1 and time.monotonic() - started < 60
    assert 'call check_env under `if __name__ == "__main__":`' in proc.stderr

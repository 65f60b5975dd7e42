"""The README's "your env, your model" example does what it says: its env is `examples/own_env/my_env.py` as
written, and its two commands run (at a small size, with the session's tiny model for the hub model), from a
folder holding nothing but that module. The guide (docs/guides/own-env.md) shows the same file and commands."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from proctor.store import TrajectoryStore

ROOT = Path(__file__).resolve().parents[1]
MY_ENV = ROOT / "examples" / "own_env" / "my_env.py"
PROCTOR = Path(sys.executable).parent / "proctor"


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start:] if end < 0 else text[start:end]


def _commands(block: str) -> list[list[str]]:
    return [shlex.split(line) for line in block.replace("\\\n", " ").splitlines() if line.strip()]


def readme_example() -> tuple[str, list[list[str]]]:
    section = _section((ROOT / "README.md").read_text(), "## Your env, your model")
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    bash = re.search(r"```bash\n(.*?)```", section, re.DOTALL)
    assert code and bash, "README: the 'your env, your model' example is gone"
    return code.group(1), _commands(bash.group(1))


def test_readme_env_is_the_example_file_and_the_guide_shows_both():
    code, commands = readme_example()
    assert code == MY_ENV.read_text()
    assert 10 <= len(code.splitlines()) <= 30
    guide = (ROOT / "docs" / "guides" / "own-env.md").read_text()
    assert '--8<-- "examples/own_env/my_env.py"' in guide
    guide_bash = re.search(r"## Run it.*?```bash\n(.*?)```", guide, re.DOTALL)
    assert guide_bash and _commands(guide_bash.group(1)) == commands


@pytest.mark.parametrize("with_model", [False, True], ids=["random", "model"])
def test_readme_env_commands_run(with_model, tmp_path, tiny_model_dir):
    _, commands = readme_example()
    assert [c[0] for c in commands] == ["proctor", "proctor"]  # no PYTHONPATH: --env-module looks in the folder
    shutil.copy(MY_ENV, tmp_path / "my_env.py")
    tokens = commands[1 if with_model else 0]
    assert tokens[tokens.index("--env-module") + 1] == "my_env"
    if with_model:  # the hub model is out of reach offline: the session's tiny local model stands in
        tokens[tokens.index("--model") + 1] = str(tiny_model_dir)
    tokens[tokens.index("--tasks") + 1] = "3"
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "OMP_NUM_THREADS": "1",
           "HF_HUB_OFFLINE": "1"}
    res = subprocess.run([str(PROCTOR), *tokens[1:]], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=300, check=False)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    out = tmp_path / tokens[tokens.index("--out") + 1]
    store = out / "trajectories" if (out / "trajectories").is_dir() else out
    trajs = TrajectoryStore.open(store).load()
    assert len(trajs) == 3 and {t.env for t in trajs} == {"guess"}
    assert all(t.termination in ("success", "failure", "max_steps") for t in trajs)

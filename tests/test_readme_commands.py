"""Commands the README promises to new users behave as it says (fast, lazy, one-line errors)."""

from __future__ import annotations

import json
import subprocess
import sys

ADAPTERS = ("proctor.envs.alfworld", "proctor.envs.scienceworld", "proctor.envs.detective",
            "proctor.envs.textworld_games", "proctor.envs.webshop", "alfworld", "scienceworld", "jericho",
            "textworld")

LIST_ENVS = """
import json, sys
from typer.testing import CliRunner
from proctor.cli import app
res = CliRunner().invoke(app, sys.argv[1:], terminal_width=200)
print(json.dumps({"code": res.exit_code, "out": res.output, "modules": sorted(sys.modules)}))
"""


def _envs(*args: str) -> dict:
    res = subprocess.run([sys.executable, "-c", LIST_ENVS, "envs", *args], capture_output=True, text=True,
                         check=True, timeout=300)
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_proctor_envs_lists_adapters_without_importing_them():
    got = _envs()
    assert got["code"] == 0, got["out"]
    assert [m for m in ADAPTERS if m in got["modules"]] == []
    for name in ("household", "twenty_questions", "alfworld", "scienceworld", "detective", "webshop"):
        assert name in got["out"]
    assert "household" in got["out"] and "train: 2000" in got["out"]  # built-in envs are counted
    assert "not loaded" in got["out"]  # the adapters say how to count their tasks
    assert "tasks from" in got["out"] and "path=...`" in got["out"]  # stepwise: its tasks are the problems of a file


def test_proctor_envs_name_loads_only_that_adapter():
    got = _envs("webshop")
    assert got["code"] == 0, got["out"]
    assert "proctor.envs.webshop" in got["modules"] and "proctor.envs.scienceworld" not in got["modules"]
    bad = _envs("no_such_env")
    assert bad["code"] == 2 and "unknown environment(s) no_such_env" in bad["out"]

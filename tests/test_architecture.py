"""The architecture, checked by tools: the layers contract (import-linter), declared vs imported
dependencies (deptry), and the built-in envs running in a process where `import torch` fails."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from without_model_libraries import run_without_model_libraries

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _tool(name: str) -> str:
    path = BIN / name
    if not path.exists():
        found = shutil.which(name)
        if found is None:
            pytest.fail(f"{name} is not installed (it is part of the dev extra: pip install -e '.[dev]')")
        return found
    return str(path)


def test_layers_contract_is_kept():
    proc = subprocess.run([_tool("lint-imports"), "--no-cache"], check=False, cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout


def test_every_import_is_declared_and_every_dependency_used():
    proc = subprocess.run([_tool("deptry"), "src"], check=False, cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]


def test_builtin_envs_run_where_torch_cannot_be_imported():
    proc = run_without_model_libraries("""
        from proctor.envs import make
        from proctor.envs.experts import expert_kinds
        from proctor.rollout import RolloutConfig, run_rollout
        for name in ("household", "twenty_questions", "arithmetic", "shop"):
            env = make(name, expert_hints=True)
            obs, info = env.reset(env.task_ids("test")[0])
            steps = 0
            while not env.done and steps < 50:
                info = env.step(info["expert_action"]).info
                steps += 1
            assert env.done, name
        assert "search" in expert_kinds("household")
        assert "torch" not in sys.modules
        print("ok")
    """)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-4000:]


def test_no_two_classes_share_a_name():
    """A class name says one thing across the package (modules repeat per package by role: config, registry)."""
    import ast
    from collections import Counter

    src = ROOT / "src" / "proctor"
    classes = Counter(node.name for path in src.rglob("*.py") for node in ast.walk(ast.parse(path.read_text()))
                      if isinstance(node, ast.ClassDef))
    assert [name for name, n in classes.items() if n > 1] == []

"""The prepared GPU check (`scripts/gpu_check.sh`, `scripts/gpu_wheels.sh`, `scripts/gpu_deps.py`): the dependency
check finds what a Python environment lacks or has at the wrong version, the wheel selection keeps only what the
GPU image lacks, and the whole check runs here in its dry mode, writing its record into $OUT only."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def gpu_deps():
    spec = importlib.util.spec_from_file_location("gpu_deps", ROOT / "scripts" / "gpu_deps.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_deps"] = module  # its dataclass resolves its annotations through sys.modules
    spec.loader.exec_module(module)
    return module


def make_wheel(folder: Path, name: str, version: str, requires: list[str], tag: str = "py3-none-any") -> Path:
    """A minimal wheel: only its METADATA, which is all gpu_deps reads."""
    path = folder / f"{name.replace('-', '_')}-{version}-{tag}.whl"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{name.replace('-', '_')}-{version}.dist-info/METADATA", meta)
    return path


def test_missing_lists_what_the_image_lacks():
    deps = gpu_deps()
    missing = {r.name for r in deps.proctor_requirements() if deps.canonicalize_name(r.name) not in deps.IMAGE}
    assert {"pydantic", "fastapi", "datasets"} <= missing and "torch" not in missing and "transformers" not in missing
    assert deps.IMAGE["torch"] == "2.11.0" and deps.IMAGE["transformers"] == "5.17.0"  # the image's known versions


def test_check_finds_missing_conflicting_and_extra_requirements(tmp_path, monkeypatch):
    deps = gpu_deps()
    monkeypatch.setattr(deps, "proctor_requirements", lambda: [deps.Requirement("alpha>=1"),
                                                                deps.Requirement("beta[http]>=2")])
    make_wheel(tmp_path, "alpha", "1.5", ["gamma>=3", "delta; python_version < '3.0'"])
    make_wheel(tmp_path, "beta", "2.0", ["epsilon>=1; extra == 'http'", "zeta; extra == 'other'"])
    installed = {"gamma": deps.Dist("gamma", "2.0"), "epsilon": deps.Dist("epsilon", None, metadata=False)}
    report = deps.check({**installed, **deps.wheels(tmp_path)}, deps.IMAGE_ENV)
    assert report["missing"] == []  # delta's marker is false on 3.12, zeta belongs to an extra not asked for
    assert [(c["name"], c["has"]) for c in report["conflicts"]] == [("gamma", "2.0")]
    assert report["unverified"] == ["epsilon"]  # reached through beta's http extra, version unknown
    del installed["epsilon"]
    report = deps.check({**installed, **deps.wheels(tmp_path)}, deps.IMAGE_ENV)
    assert report["missing"] == ["epsilon>=1; extra == \"http\" (for beta 2.0)"]


def test_select_keeps_what_the_image_lacks_and_pure_fallbacks(tmp_path):
    deps = gpu_deps()
    stage, out = tmp_path / "stage", tmp_path / "out"
    stage.mkdir()
    make_wheel(stage, "pydantic", "2.14.4", [])
    make_wheel(stage, "numpy", "2.5.2", [], tag="cp312-cp312-manylinux_2_28_x86_64")  # in the image, version known
    make_wheel(stage, "typing-extensions", "4.16.0", [])                              # in the image, version unknown
    make_wheel(stage, "pandas", "3.1.1", [], tag="cp312-cp312-manylinux_2_28_x86_64")  # unknown, but compiled
    deps.cmd_select(stage, out)
    assert sorted(p.name for p in out.glob("*.whl")) == ["pydantic-2.14.4-py3-none-any.whl"]
    assert sorted(p.name for p in (out / "fallback").glob("*.whl")) == ["typing_extensions-4.16.0-py3-none-any.whl"]


def test_check_of_this_environment_passes():
    """Here every requirement is installed: `check` exits 0 (what the GPU check runs after its install)."""
    res = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_deps.py"), "check"], capture_output=True,
                         text=True, timeout=120, check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    assert json.loads(res.stdout)["ok"] is True


@pytest.mark.slow
def test_the_dry_run_records_every_step_into_out(tmp_path):
    """GPU_CHECK_DRY=1 runs every step without CUDA (tests/gpu skip, a tiny quickstart, the SmolLM2 step's
    placeholder) and writes gpu_check.json and the logs into $OUT: at most 8 files with plain names, the limit
    of what comes back from the GPU machine."""
    out, work = tmp_path / "out", tmp_path / "work"
    env = {**os.environ, "GPU_CHECK_DRY": "1", "OUT": str(out), "GPU_CHECK_WORK": str(work),
           "GPU_CHECK_QS_SCALE": "0.001", "GPU_CHECK_CAP_SCALE": "4", "GPU_CHECK_BUDGET_S": "2400",
           "PYTHON": sys.executable}
    res = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_check.sh")], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=2700, check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    record = json.loads((out / "gpu_check.json").read_text())
    assert record["dry_run"] is True and record["dependencies"]["ok"] is True
    assert [s["step"] for s in record["steps"]] == ["machine", "install", "tests", "quickstart", "smollm2"]
    assert all(s["status"] == "passed" and s["seconds"] >= 0 for s in record["steps"])
    assert record["quickstart"]["stage_seconds"]["demos"] >= 0 and record["quickstart"]["summary"]
    assert "skipped" in (out / "tests.log").read_text()  # tests/gpu without CUDA
    files = [p for p in out.rglob("*") if p.is_file()]
    assert len(files) <= 8 and all(re.fullmatch(r"[A-Za-z0-9._-]+", p.name) for p in files)
    assert (work / "site").is_dir() and (work / "runs" / "quickstart" / "manifest.json").is_file()

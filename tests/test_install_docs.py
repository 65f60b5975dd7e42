"""What a user installs and downloads, as the pages say: torch is a range that a CUDA build or vLLM's torch
satisfies, the GPU install has its own section, and the data download commands the pages give exist and write
what proctor reads."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import torch
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]


def command_help(name: str, *args: str, env: dict[str, str] | None = None) -> str:
    """`NAME ARGS --help` from this environment's bin folder (skips when the command is not installed)."""
    path = Path(sys.executable).parent / name
    if not path.is_file():
        path = Path(shutil.which(name) or "")
    if not path.is_file():
        pytest.skip(f"{name} is not installed here")
    res = subprocess.run([str(path), *args, "--help"], capture_output=True, text=True, timeout=120, check=False,
                         env={**os.environ, **(env or {})})
    assert res.returncode == 0, res.stdout + res.stderr
    return res.stdout


def test_torch_is_a_range_that_other_builds_satisfy():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    [torch_req] = [Requirement(d) for d in deps if Requirement(d).name == "torch"]
    assert not any(s.operator in ("==", "===", "~=") for s in torch_req.specifier), torch_req
    assert Version(Version(torch.__version__).base_version) in torch_req.specifier  # this machine's 2.13.0+cpu
    for build in ("2.11.0", "2.9.1", "2.6.0"):  # the GPU image's build, a vLLM-pinned one, the floor
        assert Version(build) in torch_req.specifier, build
    assert Version("2.4.1") not in torch_req.specifier  # torch.OutOfMemoryError (2.5), transformers 5 (2.6)
    assert hasattr(torch, "OutOfMemoryError")


def test_the_readme_points_a_gpu_user_at_the_cuda_install():
    readme = (ROOT / "README.md").read_text()
    assert "docs/guides/gpus.md#install-on-a-gpu-machine" in readme
    assert "so pip takes the local CPU build" not in readme  # not what pip does on a GPU machine
    gpus = (ROOT / "docs" / "guides" / "gpus.md").read_text()
    assert "## Install on a GPU machine" in gpus and "download.pytorch.org/whl/cu" in gpus
    assert "PROCTOR_VLLM_PYTHON" in gpus


@pytest.mark.extra
def test_alfworld_download_is_the_command_the_recipe_gives(tmp_path):
    page = (ROOT / "examples" / "alfworld" / "README.md").read_text()
    assert re.search(r"^alfworld-download --data-dir \S+", page, re.MULTILINE)
    assert "export ALFWORLD_DATA=" in page
    assert "--data-dir" in command_help("alfworld-download", env={"ALFWORLD_DATA": str(tmp_path)})


def test_the_processbench_download_is_what_proctor_reads(tmp_path):
    """`hf download` takes the page's options, and the `datasets` export the page shows (JSON lines) is read by
    the ProcessBench importer with its first-error labels."""
    from datasets import Dataset

    from proctor.prm.importers import read_processbench

    page = (ROOT / "docs" / "guides" / "math-shepherd.md").read_text()
    assert "hf download Qwen/ProcessBench --repo-type dataset --local-dir" in page
    hf = command_help("hf", "download")
    assert "--repo-type" in hf and "--local-dir" in hf
    record = {"id": "gsm8k-0", "generator": "Qwen2-7B-Instruct", "problem": "2 + 2 * 3?",
              "steps": ["2 * 3 = 6.", "2 + 6 = 9.", "The answer is 9."], "final_answer_correct": False, "label": 1}
    Dataset.from_list([record]).to_json(str(tmp_path / "gsm8k.jsonl"))
    [example] = read_processbench(tmp_path / "gsm8k.jsonl")
    assert example.id == "gsm8k-0" and example.meta["first_error"] == 1 and example.labels == [1.0, 0.0, None]


def test_the_alfworld_recipe_says_where_its_policy_runs():
    """The GPU block's rollouts and evaluations run in-process unless the pipeline serves π_k itself
    (`generation: {engine: vllm}`, `proctor.pipeline.run.served_generation`)."""
    page = " ".join((ROOT / "examples" / "alfworld" / "README.md").read_text().split())  # lines joined
    assert "Only `improve` goes through the managed server" not in page
    assert "top-level `generation: {engine: vllm" in page and "`prm_serving: {engine: server}`" in page

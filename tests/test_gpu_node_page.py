"""docs/guides/gpu-node.md: its device plan is a valid pipeline config on an 8-GPU node, and its time and memory
estimates are what `bench/gpu_estimates.py` prints, whose arithmetic is the standard one (parameter counts of the
published models, 6·N training FLOPs per token, 16 B/param for full fine-tuning)."""

from __future__ import annotations

import copy
import importlib.util
import re
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "guides" / "gpu-node.md"


@pytest.fixture(scope="module")
def est():
    spec = importlib.util.spec_from_file_location("gpu_estimates", ROOT / "bench" / "gpu_estimates.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_estimates"] = module
    spec.loader.exec_module(module)
    return module


def test_parameter_counts_are_the_published_ones(est):
    published = {"Qwen2.5-1.5B-Instruct": 1.54e9, "Llama-3.2-3B-Instruct": 3.21e9, "Llama-3.1-8B-Instruct": 8.03e9}
    for name, total in published.items():
        assert est.param_counts(est.INPUTS["models"][name])["total"] == pytest.approx(total, rel=0.005), name
    smol = est.param_counts(est.INPUTS["cpu_check"]["model"])
    assert smol["total"] == pytest.approx(134.5e6, rel=0.005)  # SmolLM2-135M


def test_flops_and_memory_follow_the_standard_arithmetic(est):
    m = est.INPUTS["models"]["Llama-3.1-8B-Instruct"]
    n = est.param_counts(m)["per_token"]
    one_token = {"train_tokens": 1, "train_context": 0, "forward_tokens": 0, "forward_context": 0}
    assert est.flops(one_token, n, m) == 6 * n
    assert est.flops({**one_token, "train_tokens": 0, "forward_tokens": 1}, n, m) == 2 * n
    result = est.estimate(est.INPUTS)["models"]["Llama-3.1-8B-Instruct"]
    assert result["memory_gb"]["full_ft_states"] == pytest.approx(128.5, abs=0.1)  # 16 B/param, before activations
    assert result["memory_gb"]["prm_8_gpus_zero3"] < 80 < result["memory_gb"]["prm_1_gpu_checkpointing"]


def test_time_scales_with_the_assumed_utilisation(est):
    slower = copy.deepcopy(est.INPUTS)
    slower["utilisation"] = {"train": est.INPUTS["utilisation"]["train"] / 2,
                             "forward": est.INPUTS["utilisation"]["forward"] / 2}
    base = est.estimate(est.INPUTS)["models"]["Llama-3.2-3B-Instruct"]["stages"]
    half = est.estimate(slower)["models"]["Llama-3.2-3B-Instruct"]["stages"]
    for stage in base:
        assert half[stage]["gpu_s_1"] == pytest.approx(2 * base[stage]["gpu_s_1"])
        assert half[stage]["env_s"] == base[stage]["env_s"]


def test_the_gpu_node_page_shows_the_scripts_tables(est):
    page = PAGE.read_text()
    tables = est.markdown(est.estimate(est.INPUTS)).split("\n\n")
    assert len(tables) == 2 and all(table in page for table in tables)
    assert "estimates, not measurements" in page


def test_the_device_plan_on_the_page_validates_on_an_8_gpu_node(monkeypatch):
    """The side-by-side block, merged into the ALFWorld SmolLM2 recipe, with torch seeing 8 GPUs: the server and
    training apart (so the server keeps running while a stage trains); one GPU fewer is refused."""
    from proctor.pipeline import PipelineConfig, launch

    blocks = [textwrap.dedent(b) for b in re.findall(r"```yaml\n(.*?)^ *```", PAGE.read_text(), re.DOTALL | re.MULTILINE)]
    [plan] = [yaml.safe_load(b) for b in blocks if "devices:" in b]
    base = yaml.safe_load((ROOT / "examples" / "alfworld" / "smollm2.yaml").read_text())
    monkeypatch.setattr(launch, "_cuda_count", lambda: 8)
    cfg = PipelineConfig.model_validate({**base, **plan})
    assert cfg.devices.apart and cfg.prm_serving.engine == "server"
    monkeypatch.setattr(launch, "_cuda_count", lambda: 7)
    with pytest.raises(ValueError, match="devices.prm: GPU 7"):
        PipelineConfig.model_validate({**base, **plan})

"""Device and dtype `auto` everywhere: agents, PRM scorers, search, evaluation and the CLI default to CUDA when
torch sees one (bf16 there) and to the CPU in float32 elsewhere; explicit values pass through; a CUDA device on a
CPU-only build is one error line. These tests run without CUDA."""

from __future__ import annotations

import pytest
import torch
from typer.testing import CliRunner

from proctor.agents.choice import ChoiceAgent
from proctor.agents.hf import HFAgent
from proctor.agents.registry import agent_config
from proctor.cli import app
from proctor.evaluation import EvalConfig
from proctor.models.loading import inference_dtype, load, placement, resolve_device
from proctor.prm.model import ProcessRewardModel
from proctor.prm.ref import PRMRef
from proctor.prm.scoring import PRMScorer
from proctor.search.registry import search_config

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the defaults of a machine without CUDA")

NO_CUDA = "sees no CUDA device"


@pytest.fixture(scope="module")
def prm_dir(tiny_model_dir, tmp_path_factory):
    """A PRM saved in bfloat16, as a bf16 backbone's PRM would be."""
    out = tmp_path_factory.mktemp("prm_bf16") / "prm"
    ProcessRewardModel.build(tiny_model_dir, "scalar", dtype="bfloat16").save_pretrained(out)
    return out


def test_auto_is_the_cpu_in_float32_and_explicit_values_pass():
    assert resolve_device("auto") == resolve_device(None) == "cpu"
    assert placement("auto", "auto") == ("cpu", "float32")
    assert placement("cpu", "bfloat16") == ("cpu", "bfloat16")
    assert inference_dtype(None, "cpu") is None  # the checkpoint's own
    with pytest.raises(ValueError, match=NO_CUDA):
        resolve_device("cuda:1")


def test_a_bf16_checkpoint_loads_in_float32_on_the_cpu(bf16_model_dir):
    model, _ = load(bf16_model_dir)
    assert model.dtype == torch.float32 and model.device.type == "cpu"
    assert load(bf16_model_dir, dtype=None)[0].dtype == torch.bfloat16
    agent = ChoiceAgent(bf16_model_dir)
    assert agent.model.dtype == torch.float32 and agent.model.device.type == "cpu"
    assert HFAgent(bf16_model_dir, dtype="bfloat16", device="cpu").model.dtype == torch.bfloat16
    with pytest.raises(ValueError, match=NO_CUDA):
        HFAgent(bf16_model_dir, device="cuda")


def test_a_model_object_stays_where_its_caller_put_it(tiny_model_dir):
    model, tok = load(tiny_model_dir, dtype="bfloat16")
    assert HFAgent(model, tok).model.dtype == torch.bfloat16  # dtype places loaded models only
    with pytest.raises(ValueError, match=NO_CUDA):
        ChoiceAgent(model, tok, device="cuda")
    prm = ProcessRewardModel.build(tiny_model_dir, "scalar", dtype="float32")
    assert PRMScorer(prm).prm.device.type == "cpu"


def test_configs_default_to_auto(tiny_model_dir, prm_dir):
    for kind in ("hf", "choice"):
        spec = agent_config({"kind": kind, "model": str(tiny_model_dir)})
        assert (spec.device, spec.dtype) == ("auto", "auto")
    bon = agent_config({"kind": "best-of-n", "agent": "random", "prm": str(prm_dir)})
    beam = search_config({"method": "beam", "agent": "random", "prm": str(prm_dir)})
    assert (bon.device, bon.dtype) == (beam.device, beam.dtype) == ("auto", "auto")


def test_eval_config_places_every_model_that_names_none(tiny_model_dir, prm_dir, tmp_path):
    agent = {"kind": "best-of-n", "prm": str(prm_dir), "device": "cpu",
             "agent": {"kind": "mixture", "components": [{"agent": {"kind": "hf", "model": str(tiny_model_dir)},
                                                         "weight": 1}]}}
    cfg = EvalConfig(env="household", out=tmp_path, agent=agent, device="cuda:1", dtype="float16")
    inner = cfg.agent.agent.components[0].agent
    assert (inner.device, inner.dtype) == ("cuda:1", "float16")
    assert (cfg.agent.device, cfg.agent.dtype) == ("cpu", "float16")  # its own device wins
    search = EvalConfig(env="household", out=tmp_path, search={"method": "beam", "agent": "random",
                                                               "prm": str(prm_dir)}, dtype="float32").search
    assert (search.device, search.dtype) == ("auto", "float32")


def test_prm_scorers_load_in_float32_on_the_cpu(prm_dir):
    scorer = PRMRef(prm=str(prm_dir)).open()
    assert scorer.prm.device.type == "cpu" and next(scorer.prm.parameters()).dtype == torch.float32
    assert next(PRMRef(prm=str(prm_dir), dtype="bfloat16").open().prm.parameters()).dtype == torch.bfloat16


def one_error_line(args: list[str]) -> None:
    res = CliRunner().invoke(app, args, terminal_width=400)
    assert res.exit_code == 2, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and NO_CUDA in lines[0], res.output


def test_a_cuda_device_without_cuda_is_one_error_line(tiny_model_dir, prm_dir, tmp_path):
    common = ["eval", "--env", "household", "--tasks", "1", "--no-progress", "--agent", "choice",
              "--model", str(tiny_model_dir)]
    one_error_line(common + ["--agent-arg", "device=cuda", "--out", str(tmp_path / "a")])
    one_error_line(common + ["--device", "cuda", "--out", str(tmp_path / "b")])
    data = tmp_path / "steps.jsonl"
    data.write_text('{"prompt": "2+2?", "completions": ["4"]}\n')
    one_error_line(["prm", "score", str(prm_dir), str(data), "--device", "cuda"])
    one_error_line(["prm", "serve", str(prm_dir), "--device", "cuda"])


@pytest.mark.parametrize("command", [["eval"], ["prm", "score"], ["prm", "serve"], ["serve"]])
def test_device_and_dtype_options_are_documented(command):
    out = CliRunner().invoke(app, [*command, "--help"], terminal_width=200).output
    assert "--device" in out and "--dtype" in out and "CUDA" in out

"""A real pretrained chat model end to end, offline: SmolLM2-135M-Instruct (Q4_1 GGUF) from ../shared/models,
loaded from the GGUF and from its converted folder, played as the `hf` agent and through `proctor serve`,
as a PRM backbone (LoRA) and for SFT. Skips when the model (or the gguf package) is absent."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from proctor.agents import HFAgent, make_agent
from proctor.agents.openai_agent import OpenAIAgent
from proctor.envs import EnvSpec, make
from proctor.models import convert_gguf, load
from proctor.models.gguf import find_gguf
from proctor.prm.config import PRMTrainConfig
from proctor.prm.data import StepwiseExample, write_stepwise
from proctor.prm.model import ProcessRewardModel
from proctor.prm.scoring import PRMScorer
from proctor.prm.trainer import train_prm
from proctor.prompts import PromptConfig
from proctor.prompts.render import parse_output, prefix_at, render_prompt
from proctor.rl.sft import SFTConfig, train_sft
from proctor.rollout import RolloutConfig, run_rollout
from proctor.rollout.engine import rollout
from proctor.serving import Generator, create_app
from proctor.serving.background import BackgroundServer

pytestmark = [pytest.mark.slow, pytest.mark.realmodel]

GGUF = (Path(__file__).resolve().parents[1].parent / "shared" / "models" / "smollm2-135m-instruct"
        / "SmolLM2-135M-Instruct.Q4_1.gguf")
ENV = EnvSpec("household", {"preset": "small", "max_steps": 3})


@pytest.fixture(scope="session")
def gguf_file() -> Path:
    if not GGUF.is_file():
        pytest.skip(f"real model not found at {GGUF} (see ../shared/models/README.md)")
    pytest.importorskip("gguf", reason="reading a GGUF checkpoint needs `pip install gguf`")
    return GGUF


@pytest.fixture(scope="session")
def smol_dir(gguf_file, tmp_path_factory) -> Path:
    """The GGUF converted once (float32) to a regular model folder."""
    return convert_gguf(gguf_file, tmp_path_factory.mktemp("smollm2") / "float32", "float32")


@pytest.fixture(scope="session")
def tasks() -> list[str]:
    return make("household", preset="small").task_ids("test")[:2]


def test_gguf_and_its_converted_folder_give_the_same_logits(gguf_file, smol_dir):
    assert find_gguf(gguf_file.parent) == gguf_file  # the folder holding it names it too
    from_gguf, tok = load(gguf_file)
    from_dir, tok_dir = load(smol_dir)
    assert not getattr(from_gguf, "is_quantized", False) and tok.padding_side == tok_dir.padding_side == "left"
    assert tok.chat_template == tok_dir.chat_template and tok_dir.pad_token is not None
    text = tok.apply_chat_template([{"role": "user", "content": "Name a fruit."}], add_generation_prompt=True,
                                   tokenize=False)
    ids = tok(text, return_tensors="pt", add_special_tokens=False)
    assert ids["input_ids"].tolist() == tok_dir(text, return_tensors="pt", add_special_tokens=False)["input_ids"].tolist()
    with torch.no_grad():
        a, b = from_gguf(**ids).logits, from_dir(**ids).logits
    assert torch.allclose(a, b, atol=1e-5)


def test_hf_agent_plays_household_with_the_models_own_chat_template(smol_dir, tasks, tmp_path):
    agent = make_agent("hf", model=str(smol_dir), temperature=0, max_new_tokens=16)
    assert "SmolLM" in agent.tokenizer.chat_template  # its own ChatML template, not the tiny model's
    trajs = rollout(ENV, agent, tasks, tmp_path / "plain", batch_size=2, progress=False).load()
    prompt = render_prompt(agent.tokenizer, prefix_at(trajs[0], 0), agent.prompt)
    assert prompt.startswith("<|im_start|>system\n") and prompt.endswith("<|im_start|>assistant\n")
    steps = [s for t in trajs for s in t.steps]
    assert len(steps) >= 2 and all(s.info["parsed"] for s in steps)
    assert any(s.valid for s in steps)  # it names an action the env accepts

    # two tokens cannot hold a closed <action> tag: unparseable, recorded with parsed=False, and the
    # best-effort action is one the env rejects
    cut = HFAgent(agent.model, agent.tokenizer, prompt={"format": "xml"}, temperature=0, max_new_tokens=2)
    bad = [s for t in rollout(ENV, cut, tasks[:1], tmp_path / "xml", progress=False).load() for s in t.steps]
    assert bad and all(not s.info["parsed"] and not s.valid for s in bad)
    assert all(s.action == parse_output(s.raw_output, cut.prompt).action for s in bad)


def test_served_model_plays_through_the_openai_agent(smol_dir, tasks, tmp_path):
    with BackgroundServer(create_app(Generator.load(str(smol_dir), device="cpu"), "smollm2")) as server:
        agent = OpenAIAgent(server.url + "/v1", "smollm2", temperature=0, max_tokens=16, max_retries=0,
                            timeout=120)
        env = EnvSpec("household", {"preset": "small", "max_steps": 2})
        [traj] = rollout(env, agent, tasks[:1], tmp_path / "served", progress=False).load()
        agent.close()
    assert traj.termination != "agent_error" and len(traj.steps) == 2
    assert all(s.info["parsed"] and s.raw_output for s in traj.steps)


def _steps_data(n: int) -> list[StepwiseExample]:
    good, bad = ["go to fridge 1", "open fridge 1", "take apple 1 from fridge 1"], ["eat fridge 1", "sleep"]
    return [StepwiseExample(prompt="Task: put a cool apple in the cabinet.", completions=[good[i % 3], bad[i % 2]],
                            labels=[True, False], id=str(i)) for i in range(n)]


def test_prm_on_the_real_backbone_trains_lora_saves_and_reloads(smol_dir, tmp_path):
    write_stepwise(_steps_data(4), tmp_path / "train.jsonl")
    cfg = PRMTrainConfig.model_validate({
        "model": {"backbone": str(smol_dir), "head": "scalar",
                  "lora": {"r": 4, "target_modules": ["q_proj", "v_proj"]}},
        "data": {"train": str(tmp_path / "train.jsonl")},
        "output_dir": str(tmp_path / "prm"), "steps": 3, "learning_rate": 1e-3, "batch_size": 2, "device": "cpu",
        "progress": False,
    })
    result = train_prm(cfg)
    prm, losses = result.prm, result.losses
    assert len(losses) == 3 and all(math.isfinite(x) for x in losses)
    vocab = len(prm.tokenizer)
    assert vocab == 49152 + 1 and prm.hf_model.get_input_embeddings().num_embeddings == vocab  # + step marker
    evals = _steps_data(2)
    before = PRMScorer(prm.eval()).score_examples(evals)
    loaded = ProcessRewardModel.from_pretrained(tmp_path / "prm", dtype="float32")
    after = PRMScorer(loaded).score_examples(evals)
    assert [x for row in after for x in row] == pytest.approx([x for row in before for x in row], abs=1e-5)


def test_sft_steps_on_the_real_model(smol_dir, tmp_path):
    demos = tmp_path / "demos"
    run_rollout(RolloutConfig(env="household", env_kwargs={"preset": "small"}, out=demos, split="train", tasks=2,
                              agent={"kind": "expert", "expert": "search"}, progress=False))
    cfg = SFTConfig(model=str(smol_dir), data=demos, prompt=PromptConfig(history=2), output_dir=tmp_path / "sft",
                    steps=2, batch_size=2, learning_rate=1e-5, progress=False)
    out = train_sft(cfg)
    assert (out / "model.safetensors").is_file() and (out / "chat_template.jinja").is_file()
    model, _ = load(out)
    assert model.config.vocab_size == 49152

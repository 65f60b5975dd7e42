"""A proctor PRM as a TRL reward function (`proctor.integrations.rewards.prm_reward_func`): on stepwise text (standard
and conversational completions, a custom splitter, each aggregate) against the PRM's text interface called
directly, and on env trajectories (passed through kwargs, as objects, dicts or JSON, or read from TRL's
`environments`) against `score_trajectories`, for a PRM in a folder and the same PRM behind `proctor prm serve`."""

from __future__ import annotations

import math
import re
from statistics import fmean

import pytest

from proctor.envs import make
from proctor.integrations.common import finish_episode, start_episode, step_episode
from proctor.integrations.rewards import prm_reward_func, split_steps
from proctor.integrations.trl import EnvironmentFactory
from proctor.prm.text_scorer import text_example

PROBLEMS = ["Tom has 3 apples and buys 4 more. How many apples does he have?", "What is 12 times 11?"]
COMPLETIONS = ["He starts with 3.\nHe buys 4 more.\n\n3 + 4 = 7.\nThe answer is 7.",
               "12 times 11 is 121.\nThe answer is 121.",
               "   \n"]


@pytest.fixture(scope="module")
def text_prm_dir(tiny_model_dir, tmp_path_factory):
    """A PRM on the tiny backbone with a random scalar head (seed 1), marked as trained on stepwise text, so that
    `PRMRef.open` gives its `TextStepScorer`: arbitrary but fixed preferences, no training needed."""
    import torch

    from proctor.prm.model import ProcessRewardModel

    torch.manual_seed(1)
    prm = ProcessRewardModel.build(tiny_model_dir, head="scalar")
    prm.spec = prm.spec.model_copy(update={"trained_on": "text"})
    return prm.save_pretrained(tmp_path_factory.mktemp("text_prm") / "prm")


@pytest.fixture(scope="module")
def likelihood_prm_dir(tiny_model_dir, tmp_path_factory):
    """An untrained likelihood PRM on the tiny model, Q = σ(β·log π(a|s) + b) with β = 1, b = 0: the tiny model's
    folder with the `likelihood_prm.json` that `proctor prm train-likelihood` writes beside it."""
    import json
    import shutil

    from proctor.prm.likelihood import KIND, LIKELIHOOD_FILE
    from proctor.prompts.render import PromptConfig

    folder = tmp_path_factory.mktemp("likelihood_prm") / "prm"
    shutil.copytree(tiny_model_dir, folder)
    (folder / LIKELIHOOD_FILE).write_text(json.dumps({"kind": KIND, "beta": 1.0, "bias": 0.0,
                                                      "prompt": PromptConfig().model_dump()}))
    return folder


@pytest.mark.parametrize("kind", ["text", "likelihood"])
def test_prm_score_and_the_reward_function_agree(kind, text_prm_dir, likelihood_prm_dir, problems_file, tmp_path):
    """`proctor prm score PRM FILE` on stepwise text and `prm_reward_func` on the same problems and steps give the
    same step scores, for a PRM trained on text and for a likelihood PRM; the likelihood PRM's are its scores of
    the episode the `stepwise` env records for those steps (one code path: `prm.text_scorer.StepwiseScorer`)."""
    import json

    from typer.testing import CliRunner

    from proctor.cli import app
    from proctor.prm.ref import PRMRef

    prm = text_prm_dir if kind == "text" else likelihood_prm_dir
    (tmp_path / "steps.jsonl").write_text("".join(
        json.dumps({"id": f"p{i}", "prompt": p, "completions": split_steps(c)}) + "\n"
        for i, (p, c) in enumerate(zip(PROBLEMS, COMPLETIONS, strict=False))))
    res = CliRunner().invoke(app, ["prm", "score", str(prm), str(tmp_path / "steps.jsonl"), "--device", "cpu"])
    assert res.exit_code == 0, res.output
    scored = [json.loads(line)["scores"] for line in res.stdout.splitlines() if line.startswith("{")]
    assert [len(s) for s in scored] == [4, 2]
    for aggregate, reduce in [("min", min), ("last", lambda q: q[-1]), ("mean", fmean), ("prod", math.prod)]:
        reward = prm_reward_func(str(prm), aggregate=aggregate, device="cpu")
        got = reward(prompts=PROBLEMS, completions=COMPLETIONS[:2])
        assert got == pytest.approx([reduce(s) for s in scored], rel=1e-5)
    if kind == "likelihood":
        env = make("stepwise", path=str(problems_file))
        task = env.task_ids("test")[1]  # "What is 12 times 11?"
        episode = start_episode(env, task)
        for step in split_steps(COMPLETIONS[1]):
            step_episode(env, episode, step)
        recorded = finish_episode(env, episode, split="test", agent="test", run_seed=0)
        reward = prm_reward_func(str(prm), aggregate="mean", device="cpu")
        got = reward(prompts=[recorded.task], completions=[COMPLETIONS[1]])
        expected = PRMRef(prm=prm, device="cpu").open().score_trajectories([recorded])[0]
        assert got == pytest.approx([fmean(expected)], rel=1e-5)


def test_split_steps():
    assert split_steps(COMPLETIONS[0]) == ["He starts with 3.", "He buys 4 more.", "3 + 4 = 7.", "The answer is 7."]
    assert split_steps("a. b. c", ". ") == ["a", "b", "c"]
    assert split_steps("  \n ") == []
    with pytest.raises(ValueError, match="unknown aggregate 'max'; choose one of last, min, prod, mean"):
        prm_reward_func("unused", aggregate="max")


@pytest.mark.parametrize("aggregate", ["min", "last", "mean"])
def test_stepwise_text_is_scored_by_the_text_interface(text_prm_dir, aggregate):
    from proctor.prm.ref import PRMRef
    from proctor.prm.text_scorer import TextStepScorer

    scorer = PRMRef(prm=text_prm_dir, device="cpu").open()
    assert isinstance(scorer, TextStepScorer)
    reward = prm_reward_func(str(text_prm_dir), aggregate=aggregate, device="cpu")
    prompts = [PROBLEMS[0], PROBLEMS[1], PROBLEMS[1]]
    metrics = {}
    got = reward(prompts=prompts, completions=COMPLETIONS, completion_ids=[[1]] * 3, trainer_state=None,
                 log_metric=lambda name, value: metrics.setdefault(name, value))
    q = scorer.score_examples([text_example(p, split_steps(c)) for p, c in zip(prompts[:2], COMPLETIONS[:2],
                                                                                strict=True)])
    reduce = {"min": min, "last": lambda s: s[-1], "mean": fmean}[aggregate]
    assert got[:2] == pytest.approx([reduce(s) for s in q], rel=1e-5)
    assert got[2] == 0.0  # no step
    assert metrics["prm/steps"] == pytest.approx((4 + 2 + 0) / 3)

    # conversational: the prompt's last user turn is the problem, the assistant turns are the text
    conv_prompts = [[{"role": "system", "content": "Solve it step by step."}, {"role": "user", "content": p}]
                    for p in prompts[:2]]
    conv = [[{"role": "assistant", "content": c}] for c in COMPLETIONS[:2]]
    assert reward(prompts=conv_prompts, completions=conv) == pytest.approx(got[:2], rel=1e-5)


def test_a_custom_splitter_and_problem(text_prm_dir):
    from proctor.prm.ref import PRMRef

    scorer = PRMRef(prm=text_prm_dir, device="cpu").open()
    text = "First, 3 + 4 = 7. Then the answer is 7."
    by_sentence = prm_reward_func(str(text_prm_dir), aggregate="last", device="cpu",
                                  splitter=lambda t: re.split(r"(?<=\.)\s+", t),
                                  problem=lambda prompt: prompt["problem"], empty=None)
    got = by_sentence(prompts=[{"problem": PROBLEMS[0]}, {"problem": PROBLEMS[1]}], completions=[text, ""])
    q = scorer.score_examples([text_example(PROBLEMS[0], ["First, 3 + 4 = 7.", "Then the answer is 7."])])[0]
    assert got[0] == pytest.approx(q[-1], rel=1e-5) and got[1] is None


def _household_trajectories(n: int = 3):
    env = make("household", preset="small", max_steps=3)
    out = []
    for i, task in enumerate(env.task_ids("train")[:n]):
        episode = start_episode(env, task)
        for step in range(i + 1):
            step_episode(env, episode, episode.info["admissible_actions"][step % 2])
        out.append(finish_episode(env, episode, split="train", agent="test", run_seed=0))
    return out


def test_env_trajectories_through_kwargs(scalar_prm_dir):
    """Trajectories a `rollout_func` (or a dataset column) passes, as objects, dicts or JSON: the scores are
    `score_trajectories`' aggregated; a row without one gets None (TRL leaves it out)."""
    from proctor.prm.ref import PRMRef

    trajs = _household_trajectories()
    q = PRMRef(prm=scalar_prm_dir, device="cpu").open().score_trajectories(trajs)
    reward = prm_reward_func(scalar_prm_dir, aggregate="mean", device="cpu")
    rows = [trajs[0], trajs[1].model_dump(mode="json"), trajs[2].model_dump_json(), None]
    got = reward(prompts=["p"] * 4, completions=["c"] * 4, trajectories=rows)
    assert got[:3] == pytest.approx([fmean(s) for s in q], rel=1e-5) and got[3] is None
    with pytest.raises(ValueError, match="3 trajectories for 4 completions"):
        reward(prompts=["p"] * 4, completions=["c"] * 4, trajectories=trajs)
    rollouts = prm_reward_func(scalar_prm_dir, aggregate="min", device="cpu", trajectories_key="episodes")
    assert rollouts(prompts=["p"] * 3, completions=["c"] * 3, episodes=trajs) == pytest.approx(
        [min(s) for s in q], rel=1e-5)


def test_env_trajectories_from_trl_environments(scalar_prm_dir):
    """The `environments` TRL passes with an `environment_factory`: each `ProctorTRLEnv`'s episode, finished through
    its `get_reward()` when TRL has not called it yet."""
    from proctor.prm.ref import PRMRef

    factory = EnvironmentFactory("household", {"preset": "small", "max_steps": 3})
    envs = [factory(), factory()]
    for env, row in zip(envs, factory.dataset(2), strict=True):
        env.reset(**row)
        env.act("look")
    envs[0].get_reward()
    reward = prm_reward_func(scalar_prm_dir, aggregate="last", device="cpu")
    got = reward(prompts=["p", "p"], completions=[[], []], environments=envs)
    assert all(e.trajectory is not None for e in envs)
    q = PRMRef(prm=scalar_prm_dir, device="cpu").open().score_trajectories([e.trajectory for e in envs])
    assert got == pytest.approx([s[-1] for s in q], rel=1e-5)


def test_a_served_prm(scalar_prm_dir):
    """The same PRM behind `proctor prm serve`, through `PRMRef(prm=path, prm_server=ServerRef)`: env trajectories
    and stepwise text give the local scores (text through the served head's text interface, as locally)."""
    from proctor.agents.registry import ServerRef
    from proctor.prm.model import ProcessRewardModel
    from proctor.prm.ref import PRMRef
    from proctor.prm.remote import RemotePRMScorer
    from proctor.prm.scoring import PRMScorer
    from proctor.prm.server import make_app
    from proctor.serving.background import BackgroundServer

    local = PRMRef(prm=scalar_prm_dir, device="cpu").open()
    served = PRMScorer(ProcessRewardModel.from_pretrained(scalar_prm_dir, device="cpu"))
    trajs = _household_trajectories(2)
    with BackgroundServer(make_app(served)) as server:
        ref = ServerRef(base_url=server.url, api_key_env="PROCTOR_UNSET_PRM_KEY")
        reward = prm_reward_func(scalar_prm_dir, server=ref, aggregate="min")
        got = reward(prompts=["p", "p"], completions=["c", "c"], trajectories=trajs)
        assert isinstance(reward.prm.scorer, RemotePRMScorer)
        assert got == pytest.approx([min(s) for s in local.score_trajectories(trajs)], rel=1e-4)

        text = reward(prompts=PROBLEMS[:1], completions=COMPLETIONS[:1])
    expected = local.score_examples([text_example(PROBLEMS[0], split_steps(COMPLETIONS[0]))])[0]
    assert text == pytest.approx([min(expected)], rel=1e-4)


@pytest.mark.extra
def test_trl_reads_it_as_a_sync_reward_function(text_prm_dir):
    pytest.importorskip("trl", reason="needs the trl extra: pip install 'proctor[trl]'")
    from trl.trainer.utils import get_callable_name, is_async_callable

    reward = prm_reward_func(str(text_prm_dir), name="prm_min")
    assert get_callable_name(reward) == "prm_min" and not is_async_callable(reward)
    assert reward.prm._scorer is None  # nothing loads until TRL first calls it


@pytest.mark.extra
def test_grpo_step_with_the_prm_reward(tiny_model_dir, text_prm_dir, tmp_path, monkeypatch):
    """One GRPO step of TRL with the docs' set-up (an outcome reward and the PRM's, standard-format prompts):
    TRL calls the function with its completions, and logs the rewards it returned."""
    pytest.importorskip("trl", reason="needs the trl extra: pip install 'proctor[trl]'")
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from proctor.prm.ref import PRMRef

    dataset = Dataset.from_list([{"prompt": PROBLEMS[i % 2] + " Answer in steps, one per line.",
                                  "answer": ["7", "132"][i % 2]} for i in range(2)])

    def accuracy(completions, answer, **kwargs):
        return [float(a in c.strip().split("\n")[-1]) for c, a in zip(completions, answer, strict=True)]

    prm = prm_reward_func(str(text_prm_dir), aggregate="min", device="cpu", name="prm_min")
    calls = []

    def spy(prompts, completions, **kwargs):
        out = prm(prompts, completions, **kwargs)
        calls.append((list(prompts), list(completions), out))
        return out

    spy.__name__ = "prm_min"
    args = GRPOConfig(output_dir=str(tmp_path / "grpo"), use_cpu=True, bf16=False, max_steps=1, seed=0,
                      per_device_train_batch_size=4, num_generations=4, max_completion_length=24, beta=0.0,
                      reward_weights=[1.0, 0.5], logging_steps=1, save_strategy="no", report_to="none",
                      dataloader_num_workers=0)
    trainer = GRPOTrainer(model=AutoModelForCausalLM.from_pretrained(tiny_model_dir),
                          processing_class=AutoTokenizer.from_pretrained(tiny_model_dir),
                          reward_funcs=[accuracy, spy], train_dataset=dataset, args=args)
    trainer.train()
    assert trainer.reward_func_names == ["accuracy", "prm_min"] and len(calls) == 1
    prompts, completions, rewards = calls[0]
    assert len(completions) == 4 and any(split_steps(c) for c in completions)
    scorer = PRMRef(prm=text_prm_dir, device="cpu").open()
    expected = []
    for p, c in zip(prompts, completions, strict=True):
        steps = split_steps(c)
        expected.append(min(scorer.score_examples([text_example(p, steps)])[0]) if steps else 0.0)
    assert rewards == pytest.approx(expected, rel=1e-5)
    logged = [h["rewards/prm_min/mean"] for h in trainer.state.log_history if "rewards/prm_min/mean" in h]
    assert logged == pytest.approx([fmean(rewards)], rel=1e-5)

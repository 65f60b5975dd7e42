"""The `stepwise` env: plain text problems from a file, one reasoning step per action. Its file is checked row by
row before any episode; a step stating a final answer ends the episode, rewarded by the normalised answer; rows
without `split` are test problems; and beam search runs over its reasoning steps."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

import proctor.search  # noqa: F401  (registers the search methods)
from proctor.agents.base import Agent, Candidate, Prefix
from proctor.agents.registry import AgentSpec, register_agent
from proctor.envs import make
from proctor.envs.stepwise_text import final_answer, normalise_answer
from proctor.prm.config import PRMTrainConfig
from proctor.prm.ref import PRMRef
from proctor.prm.text_scorer import TextStepScorer, text_example
from proctor.prm.trainer import train_prm
from proctor.search import SearchRunConfig, run_search
from proctor.seeding import stable_rng


def test_answers_are_found_and_normalised_by_hand():
    assert final_answer("So 3 + 4 = 7. The answer is 7.") == "7."
    assert final_answer("Answer: $1,000") == "$1,000"
    assert final_answer("which gives \\boxed{132}") == "132"
    assert final_answer("3 + 4 = 7") is None
    assert normalise_answer("7.") == "7" and normalise_answer("$1,000") == "1000"
    assert normalise_answer(" Paris ") == "paris" and normalise_answer("1,5") == "1,5"  # not a thousands mark


def test_a_stated_answer_ends_the_episode_with_its_reward(problems_file):
    env = make("stepwise", path=str(problems_file), max_steps=4)
    assert env.task_ids("test") == ["stepwise/0", "stepwise/1", "stepwise/books"] and env.task_ids("train") == []
    obs, info = env.reset("stepwise/0")
    assert obs.startswith("Tom has 3 apples") and info["task"].startswith("Tom has")
    step = env.step("He has 3 + 4 = 7 apples.")
    assert (step.observation, step.reward, step.done, step.won) == ("", 0.0, False, False)
    step = env.step("The answer is 7.")
    assert (step.reward, step.terminated, step.won, step.info["answer"], step.info["answer_known"]) == (
        1.0, True, True, "7.", True)
    env.reset("stepwise/books")
    step = env.step("200 × 5 = 1000, so the answer is $1,000")
    assert step.reward == 1.0 and step.won
    env.reset("stepwise/1")
    step = env.step("\\boxed{121}")
    assert (step.reward, step.terminated, step.won) == (0.0, True, False)
    env.reset("stepwise/1")
    for _ in range(4):
        step = env.step("thinking")
    assert step.done and step.truncated and not step.terminated and not step.won


def test_rows_without_an_answer_and_with_splits(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps([{"question": "2 + 2?", "split": "train"}, {"question": "3 + 3?", "gold": "6"}]))
    env = make("stepwise", path=str(path), problem_field="question", answer_field="gold")
    assert env.task_ids("train") == ["stepwise/0"] and env.task_ids("test") == ["stepwise/1"]
    env.reset("stepwise/0")
    step = env.step("The answer is 4")
    assert step.terminated and step.reward == 0.0 and not step.info["answer_known"]


@pytest.mark.parametrize("rows,message", [
    ('{"problem": "a"}\n{"problem": ""}\n', r"row 1: field 'problem' must be a non-empty string"),
    ('{"problem": "a"}\nnot json\n', r"line 2: not valid JSON"),
    ('{"problem": "a", "split": "dev"}\n', r"row 0: field 'split' must be one of"),
    ('{"problem": "a", "id": 1}\n{"problem": "b", "id": 1}\n', r"row 1: field 'id': 1 is not unique"),
    ('{"problem": "a", "answer": [1]}\n', r"row 0: field 'answer' must be a string or a number"),
    ('[1]', r"row 0: expected an object, got int"),
])
def test_bad_files_are_named_by_row_and_field(tmp_path, rows, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(rows)
    with pytest.raises(ValueError, match=rf"{path}: {message}"):
        make("stepwise", path=str(path))
    with pytest.raises(ValueError, match="no problems file at"):
        make("stepwise", path=str(tmp_path / "missing.jsonl"))


STEPS = ("Let me think.", "First, add the numbers.", "3 + 4 = 7.", "The answer is 7.", "The answer is 8.")
ALL_STEPS = "test-stepwise-all-steps"


class AllSteps(Agent):
    """n reasoning steps: STEPS in a rotation that starts at a seeded place (all five when n ≥ 5)."""

    name = "all-steps"

    def act(self, prefixes: Sequence[Prefix], n: int = 1) -> list[list[Candidate]]:
        out = []
        for p in prefixes:
            start = stable_rng("all-steps", p.task_id, p.step_index).randrange(len(STEPS))
            out.append([Candidate(STEPS[(start + j) % len(STEPS)]) for j in range(n)])
        return out


@register_agent(ALL_STEPS)
class AllStepsConfig(AgentSpec):
    kind: str = ALL_STEPS  # no docstring: the registry describes it by its kind

    def build(self) -> Agent:
        return AllSteps()


@pytest.fixture(scope="module")
def sevens_prm(tiny_model_dir, problems_file, tmp_path_factory) -> str:
    """A PRM trained on stepwise text (a JSONL of problems and steps): a step is good when it says 7."""
    root = tmp_path_factory.mktemp("sevens")
    problems = [json.loads(line)["problem"] for line in problems_file.read_text().splitlines()]
    rows = [{"prompt": problems[i % 3], "completions": [STEPS[i % 5], STEPS[(i + 2) % 5]],
             "labels": ["7" in STEPS[i % 5], "7" in STEPS[(i + 2) % 5]]} for i in range(30)]
    (root / "steps.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    train_prm(PRMTrainConfig.model_validate({
        "model": {"backbone": str(tiny_model_dir), "head": "scalar"},
        "data": {"train": str(root / "steps.jsonl"), "format": "stepwise"},
        "output_dir": str(root / "prm"), "steps": 60, "learning_rate": 3e-3, "batch_size": 8, "device": "cpu",
        "progress": False,
    }))
    return str(root / "prm")


def test_a_prm_trained_on_stepwise_text_reads_env_states_as_problem_and_steps(sevens_prm, problems_file):
    scorer = PRMRef(prm=sevens_prm).open()
    assert isinstance(scorer, TextStepScorer) and scorer.prm.spec.trained_on == "text"
    env = make("stepwise", path=str(problems_file))
    obs, info = env.reset("stepwise/0")
    prefix = Prefix(env="stepwise", task_id="stepwise/0", task=info["task"], observation=obs, history=[], info=info)
    scores = scorer.score_actions(prefix, list(STEPS))
    by_hand = [s[-1] for s in scorer.score_examples([text_example(info["task"], [a]) for a in STEPS])]
    assert scores == pytest.approx(by_hand, abs=1e-6)
    assert min(scores[2], scores[3]) > max(scores[0], scores[1], scores[4])  # the two steps that say 7


@pytest.mark.parametrize("method", ["step-best-of-n", "beam"])
def test_search_over_reasoning_steps_picks_what_the_text_prm_prefers(method, sevens_prm, problems_file, tmp_path):
    search = {"method": method, "agent": {"kind": ALL_STEPS}, "prm": sevens_prm}
    search.update({"n": 5} if method == "step-best-of-n" else {"beams": 1, "expansions": 5})
    result = run_search(SearchRunConfig(env="stepwise", env_kwargs={"path": str(problems_file), "max_steps": 4},
                                        tasks=3, out=tmp_path / method, progress=False, search=search))
    trajs = {t.task_id: t for t in result.store.load()}
    for t in trajs.values():
        assert t.actions[-1] == "The answer is 7." or t.actions == ["3 + 4 = 7."] * 4, t.actions
    assert trajs["stepwise/0"].success == (trajs["stepwise/0"].actions[-1] == "The answer is 7.")
    assert not trajs["stepwise/1"].success  # 7 is not 12 × 11
    assert AllStepsConfig.description == ALL_STEPS

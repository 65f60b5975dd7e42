"""One rule for a command that writes into a folder already holding outputs (`proctor.outputs`): the same run
resumes, another run is refused in one line naming what differs, `--overwrite` replaces it. A write-back store
never holds the labels (`targets --write-back`) or PRM scores (`prm score --write-back`, `eval --prm`) of two runs;
`rollout` and `eval` follow it too."""

from __future__ import annotations

import json

import datasets
import pytest
from typer.testing import CliRunner

from credit_fixtures import toy_rollouts, traj
from proctor.cli import app
from proctor.outputs import CHOICES, OutputExistsError, claim_output, first_difference
from proctor.store import TrajectoryStore

runner = CliRunner()


def rollouts():
    """The toy rollouts and one of three steps, whose MC-Q labels depend on gamma."""
    return toy_rollouts() + [traj("tau4", [("o0", "x"), ("o1", "y"), ("o2", "v")], True, sample=3)]


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "rollouts"
    with TrajectoryStore(path) as s:
        s.extend(rollouts())
    return path


def targets(store, tmp_path, *args: str):
    return runner.invoke(app, ["targets", "-m", "mc-q", "--in", str(store), "--out", str(tmp_path / "targets"),
                               "--split", "keep", "--write-back", str(tmp_path / "labelled"), *args])


def stored_labels(folder) -> dict[tuple[str, int], float]:
    return {(t.id, i): s.targets["mc-q"] for t in TrajectoryStore.open(folder).load() for i, s in enumerate(t.steps)}


def parquet_labels(folder) -> dict[tuple[str, int], float]:
    rows = datasets.Dataset.from_parquet(str(folder / "targets.parquet")).to_list()
    return {(r["trajectory_id"], r["step"]): r["target"] for r in rows}


def one_line(result) -> str:
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1, result.output
    return lines[0]


def test_targets_write_back_never_keeps_stale_labels(store, tmp_path):
    first = targets(store, tmp_path, "-p", "gamma=0.9")
    assert first.exit_code == 0, first.output
    old = stored_labels(tmp_path / "labelled")
    assert old == parquet_labels(tmp_path / "targets")

    line = one_line(targets(store, tmp_path, "-p", "gamma=0.5"))
    assert "field 'params.gamma' is 0.9 there and 0.5 here" in line and "--overwrite" in line
    assert stored_labels(tmp_path / "labelled") == old == parquet_labels(tmp_path / "targets")  # left as they were

    replaced = targets(store, tmp_path, "-p", "gamma=0.5", "--overwrite")
    assert replaced.exit_code == 0, replaced.output
    new = stored_labels(tmp_path / "labelled")
    assert new == parquet_labels(tmp_path / "targets") and new != old  # one version of every label: the new one
    assert len(TrajectoryStore.open(tmp_path / "labelled").load()) == 4

    resumed = targets(store, tmp_path, "-p", "gamma=0.5")  # the same run resumes: nothing is written twice
    assert resumed.exit_code == 0, resumed.output
    assert stored_labels(tmp_path / "labelled") == new
    assert sum(1 for shard in (tmp_path / "labelled" / "shards").iterdir() for _ in shard.open()) == 4


def test_targets_input_that_grew_is_another_run(store, tmp_path):
    assert targets(store, tmp_path).exit_code == 0
    with TrajectoryStore(store) as s:
        s.append(traj("tau5", [("o0", "w")], True, sample=4))
    line = one_line(targets(store, tmp_path))
    assert line.startswith(f"error: {tmp_path / 'targets'}: holds the targets of another run")
    assert "field 'input.trajectories.count' is 4 there and 5 here" in line


def test_targets_write_back_into_an_input_or_a_rollout_store_is_refused(store, tmp_path):
    line = one_line(runner.invoke(app, ["targets", "-m", "mc-q", "--in", str(store), "--out", str(tmp_path / "t"),
                                        "--write-back", str(store)]))
    assert "an input of this stage" in line
    other = tmp_path / "other"
    with TrajectoryStore(other, meta={"rollout": {"env": "toy"}}) as s:
        s.extend(toy_rollouts()[:1])
    line = one_line(runner.invoke(app, ["targets", "-m", "mc-q", "--in", str(store), "--out", str(tmp_path / "t"),
                                        "--write-back", str(other)]))
    assert f"{other}: holds outputs that record no run of this command" in line
    assert len(TrajectoryStore.open(other).load()) == 1 and not (tmp_path / "t").exists()


def scalar_prm(folder, backbone, seed: int):
    import torch

    from proctor.prm.model import ProcessRewardModel

    torch.manual_seed(seed)  # the head's weights: two seeds, two PRMs
    ProcessRewardModel.build(str(backbone), "scalar", dtype="float32").save_pretrained(folder)
    return folder


def score(prm, store, back, *args: str) -> tuple[int, dict[str, list[float]], str]:
    """`prm score --write-back`: exit code, the scores printed by trajectory id, and the output."""
    result = runner.invoke(app, ["prm", "score", str(prm), str(store), "--write-back", str(back), "--device", "cpu",
                                 *args])
    lines = [json.loads(x) for x in result.output.splitlines() if x.startswith('{"id"')]
    return result.exit_code, {x["id"]: x["scores"] for x in lines}, result.output


def stored_scores(folder) -> dict[str, list[float]]:
    return {t.id: [s.scores["prm"] for s in t.steps] for t in TrajectoryStore.open(folder).load()}


def test_prm_score_write_back_never_keeps_stale_scores(store, tmp_path, tiny_model_dir):
    a, b = scalar_prm(tmp_path / "prm-a", tiny_model_dir, 0), scalar_prm(tmp_path / "prm-b", tiny_model_dir, 1)
    back = tmp_path / "scored"
    code, by_a, out = score(a, store, back)
    assert code == 0, out
    assert stored_scores(back) == by_a

    code, _, out = score(b, store, back)
    assert code == 2 and "field 'prm.path'" in out and "--overwrite" in out
    assert len(out.strip().splitlines()) == 1  # refused before any scoring
    assert stored_scores(back) == by_a

    code, by_b, out = score(b, store, back, "--overwrite")
    assert code == 0, out
    assert by_b != by_a and stored_scores(back) == by_b
    code, _, out = score(b, store, back)  # the same run resumes
    assert code == 0 and stored_scores(back) == by_b and len(TrajectoryStore.open(back).load()) == 4
    code, _, out = score(b, store, store)
    assert code == 2 and "the store being scored" in out


def test_claim_output_resumes_refuses_or_replaces_only_its_own_outputs(tmp_path):
    run = {"method": "mc-q", "params": {"gamma": 0.5}, "input": {"path": "runs/r"}}
    (tmp_path / "mine.json").write_text("{}")
    (tmp_path / "notes.txt").write_text("the user's")
    present = [tmp_path / "mine.json"]
    assert claim_output(tmp_path, run, recorded=run, present=present) is True
    assert claim_output(tmp_path, run, recorded=None, present=[]) is False  # nothing of this kind there
    with pytest.raises(OutputExistsError, match=r"field 'input.path' is \"runs/s\" there and \"runs/r\" here"):
        claim_output(tmp_path, run, recorded={**run, "input": {"path": "runs/s"}}, present=present)
    assert claim_output(tmp_path, run, recorded={}, present=present, overwrite=True) is False
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
    assert first_difference({"a": 1, "b": [1]}, {"b": [1, 2], "a": 1}) == "field 'b' is [1] there and [1, 2] here"
    assert first_difference({"a": 1, "old": 2}, {"a": 1}) == "field 'old' is 2 there and null here"


def test_a_refused_output_and_a_refused_pipeline_resume_name_a_field_alike():
    """One comparison (`field_differences`) behind both messages: the first differing field of an output's identity,
    every differing field of a pipeline's config, list items by index."""
    from proctor.pipeline.manifest import config_differences

    recorded, now = {"e": [{"n": 8}, {"n": 2}], "name": "ü"}, {"e": [{"n": 8}, {"n": 4}], "name": "ü", "new": 1}
    assert first_difference(recorded, now) == "field 'e.1.n' is 2 there and 4 here"
    assert config_differences(recorded, now) == ["e.1.n: 2 → 4", "new: (unset) → 1"]
    assert first_difference({"name": "ü"}, {"name": "é"}) == 'field \'name\' is "ü" there and "é" here'


def lines_stored(folder) -> int:
    """The records in a store's shards (a replaced record would still be there)."""
    return sum(shard.read_bytes().count(b"\n") for shard in (folder / "shards").iterdir())


EXPERT = ("--agent", "expert", "--agent-arg", "expert=search")


def evaluate(out, *args: str):
    return runner.invoke(app, ["eval", "--env", "household", "--tasks", "2", "--out", str(out), "--device", "cpu",
                               "--no-progress", *args])


def test_eval_with_another_prm_never_keeps_stale_scores(tmp_path, tiny_model_dir):
    a, b = scalar_prm(tmp_path / "prm-a", tiny_model_dir, 0), scalar_prm(tmp_path / "prm-b", tiny_model_dir, 1)
    out = tmp_path / "eval"
    first = evaluate(out, *EXPERT, "--prm", str(a))
    assert first.exit_code == 0, first.output
    by_a = stored_scores(out / "scored")

    line = one_line(evaluate(out, *EXPERT, "--prm", str(b)))
    assert line.startswith(f"error: {out / 'scored'}: holds the PRM scores of another run (field 'prm.path' is ")
    assert line.endswith(CHOICES)
    assert stored_scores(out / "scored") == by_a  # left as it was

    replaced = evaluate(out, *EXPERT, "--prm", str(b), "--overwrite")
    assert replaced.exit_code == 0, replaced.output
    code, by_b, output = score(b, out / "trajectories", tmp_path / "b-scores")  # B's scores of these episodes
    assert code == 0, output
    assert stored_scores(out / "scored") == by_b and lines_stored(out / "scored") == 2  # none of A's remain
    steps = [x for scores in by_b.values() for x in scores]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["prm_path"] == str(b) and summary["prm"]["mean_step_score"] == pytest.approx(sum(steps) / len(steps))

    resumed = evaluate(out, *EXPERT, "--prm", str(b))  # the same run resumes
    assert resumed.exit_code == 0, resumed.output
    assert stored_scores(out / "scored") == by_b and lines_stored(out / "scored") == 2


def test_eval_of_another_agent_is_one_line_and_overwrite_replaces_it(tmp_path):
    out = tmp_path / "eval"
    assert evaluate(out, *EXPERT).exit_code == 0
    line = one_line(evaluate(out, "--agent", "random"))
    assert line.startswith(f"error: {out / 'trajectories'}: holds the trajectories of another run (field 'agent' is ")
    assert line.endswith(CHOICES)
    replaced = evaluate(out, "--agent", "random", "--max-steps", "3", "--overwrite")
    assert replaced.exit_code == 0, replaced.output
    trajs = TrajectoryStore.open(out / "trajectories").load()
    assert len(trajs) == 2 == lines_stored(out / "trajectories") and all(t.agent.startswith("random") for t in trajs)
    assert json.loads((out / "summary.json").read_text())["agent"]["kind"] == "random"


def rollout(out, *args: str):
    return runner.invoke(app, ["rollout", "--env", "guess", "--env-module", "test_rollout_envs", "--agent", "expert",
                               "--tasks", "2", "--out", str(out), "--no-progress", *args])


def test_rollout_of_another_run_is_one_line_and_overwrite_replaces_it(tmp_path):
    out = tmp_path / "rollouts"
    assert rollout(out).exit_code == 0
    line = one_line(rollout(out, "--seed", "1"))
    assert line == (f"error: {out}: holds the trajectories of another run (field 'seed' is 0 there and 1 here); "
                    f"{CHOICES}")
    assert TrajectoryStore.open(out).meta["rollout"]["seed"] == 0 and lines_stored(out) == 2  # left as it was
    replaced = rollout(out, "--seed", "1", "--overwrite")
    assert replaced.exit_code == 0, replaced.output
    store = TrajectoryStore.open(out)
    assert store.meta["rollout"]["seed"] == 1 and len(store.load()) == 2 == lines_stored(out)
    assert rollout(out, "--seed", "1").exit_code == 0 and lines_stored(out) == 2  # the same run resumes

"""The ProcessBench protocol (proctor.prm.processbench) on hand-computed scores, and `proctor prm eval` end to
end on real ProcessBench rows with a tiny (untrained) PRM."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from proctor.cli import app
from proctor.prm.data import read_json_records
from proctor.prm.model import ProcessRewardModel
from proctor.prm.processbench import (
    evaluate_file,
    first_errors,
    load_solutions,
    protocol,
    report,
    stratified_head,
    sweep_threshold,
)
from proctor.prm.scoring import PRMScorer

#: (step scores, true first-error label) → predicted first error at threshold 0.5
CASES = [
    ([0.9, 0.7, 0.3, 0.1], 2),  # predicted 2: right
    ([0.9, 0.8, 0.95], 1),  # predicted -1: wrong
    ([0.2, 0.9], 0),  # predicted 0: right
    ([0.9, 0.8], -1),  # predicted -1: right
    ([0.6, 0.4, 0.9], -1),  # predicted 1: wrong
    ([0.1], -1),  # predicted 0: wrong
]


def test_first_errors_threshold_rule():
    scores = [s for s, _ in CASES]
    assert first_errors(scores) == [2, -1, 0, -1, 1, 0]
    # a score equal to the threshold is not below it: 0.6 stays, 0.4 < 0.6 → 1; 0.1 → 0
    assert first_errors([[0.6, 0.55, 0.9], [0.6, 0.7]], threshold=0.6) == [1, -1]
    assert first_errors([[0.0, 0.0]], threshold=0.0) == [-1]


def test_protocol_hand_computed():
    r = protocol("toy", [s for s, _ in CASES], [y for _, y in CASES])
    # erroneous (labels 2, 1, 0): 2 of 3 right; correct (-1, -1, -1): 1 of 3 right
    assert (r.n, r.n_error, r.n_correct) == (6, 3, 3)
    assert r.acc_error == pytest.approx(2 / 3)
    assert r.acc_correct == pytest.approx(1 / 3)
    assert r.f1 == pytest.approx(2 * (2 / 3) * (1 / 3) / (2 / 3 + 1 / 3))  # = 4/9
    assert r.predicted == [2, -1, 0, -1, 1, 0]
    assert r.summary()["f1"] == pytest.approx(4 / 9)
    # at threshold 0.35 the 0.4 step of solution 4 passes: predictions [2, -1, 0, -1, -1, 0]
    r2 = protocol("toy", [s for s, _ in CASES], [y for _, y in CASES], threshold=0.35)
    assert r2.predicted == [2, -1, 0, -1, -1, 0]
    assert (r2.acc_error, r2.acc_correct) == pytest.approx((2 / 3, 2 / 3))


def test_threshold_sweep_picks_the_f1_best_and_the_lowest_of_ties():
    scores, labels = [s for s, _ in CASES], [y for _, y in CASES]
    best, curve = sweep_threshold(scores, labels, grid=[0.35, 0.5, 0.65])
    # 0.35: as in test_protocol_hand_computed, acc 2/3 and 2/3 → F1 2/3; 0.5: F1 4/9;
    # 0.65: predictions [2, -1, 0, -1, 0, 0] → erroneous 2 of 3 right, correct 1 of 3 → F1 4/9
    assert [t for t, _ in curve] == [0.35, 0.5, 0.65]
    assert [f for _, f in curve] == pytest.approx([2 / 3, 4 / 9, 4 / 9])
    assert best == 0.35
    assert sweep_threshold(scores, labels, grid=[0.5, 0.65])[0] == 0.5  # a tie: the lower threshold
    with pytest.raises(ValueError, match="both erroneous and fully correct"):
        sweep_threshold([[0.9, 0.1]], [1])


def test_protocol_partial_and_average():
    only_errors = protocol("err", [[0.9, 0.1]], [1])
    assert (only_errors.acc_error, only_errors.acc_correct, only_errors.f1) == (1.0, None, None)
    both = protocol("toy", [s for s, _ in CASES], [y for _, y in CASES])
    perfect = protocol("perfect", [[0.9, 0.1], [0.9]], [1, -1])
    assert perfect.f1 == 1.0
    assert report([both, perfect])["average_f1"] == pytest.approx((4 / 9 + 1) / 2)
    assert report([both, only_errors])["average_f1"] is None


def test_stratified_head_keeps_the_mix():
    # 4 erroneous then 4 correct (ProcessBench's order): limit 4 → k_e = round(4·4/8) = 2
    assert stratified_head([1, 1, 2, 0, -1, -1, -1, -1], 4) == [0, 1, 4, 5]
    # k_e = round(2·3/4) = 2 is clamped to limit − 1 = 1 so both kinds are present
    assert stratified_head([1, 1, 1, -1], 2) == [0, 3]
    assert stratified_head([1, 1, 1, -1], 1) == [0]
    # only one correct solution: the rest of the limit goes to erroneous ones
    assert stratified_head([0, 1, 2, 3, -1], 4) == [0, 1, 2, 4]
    assert stratified_head([1, -1], 5) == [0, 1]


def test_protocol_rejects_misaligned_input():
    with pytest.raises(ValueError, match="toy: solution 0 has label 3 but 2 step scores"):
        protocol("toy", [[0.9, 0.1]], [3])
    with pytest.raises(ValueError, match="2 scored solutions but 1 labels"):
        protocol("toy", [[0.9], [0.1]], [0])
    with pytest.raises(ValueError, match="limit must be >= 1"):
        load_solutions("unused.json", limit=0)


@pytest.fixture(scope="module")
def tiny_prm_dir(tiny_model_dir, tmp_path_factory):
    prm = ProcessRewardModel.build(tiny_model_dir, "scalar", dtype="float32")
    return prm.save_pretrained(tmp_path_factory.mktemp("prm") / "prm")


@pytest.mark.data
def test_eval_cli_end_to_end_on_processbench(shared_data, tiny_prm_dir, tmp_path):
    files = [shared_data / "processbench" / "gsm8k.json", shared_data / "processbench" / "math.json"]
    limit = 6
    out = tmp_path / "report.json"
    args = ["prm", "eval", "--model", str(tiny_prm_dir), "--limit", str(limit), "--batch-size", "4",
            "--output", str(out)]
    for f in files:
        args += ["--processbench", str(f)]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout.strip().splitlines()[-1])
    detail = json.loads(out.read_text())
    assert all(len(sc) == len(ex.completions) for f in files for sc, ex in zip(
        detail["predictions"][f.stem]["scores"], load_solutions(f, limit), strict=True))
    tuned = CliRunner().invoke(app, [*args, "--tune-on", str(files[0])])
    assert tuned.exit_code == 0, tuned.output
    tuned_summary = json.loads(tuned.stdout.strip().splitlines()[-1])
    assert tuned_summary["tuned_on"] == str(files[0]) and 0 < tuned_summary["threshold"] < 1
    assert tuned_summary["files"][files[1].stem]["threshold"] == tuned_summary["threshold"]
    scorer = PRMScorer(ProcessRewardModel.from_pretrained(tiny_prm_dir), batch_size=1)
    for f in files:
        all_rows = read_json_records(f)
        rows = [all_rows[i] for i in stratified_head([r["label"] for r in all_rows], limit)]
        got = summary["files"][f.stem]
        labels = [r["label"] for r in rows]
        assert detail["predictions"][f.stem]["labels"] == labels
        assert detail["predictions"][f.stem]["ids"] == [r["id"] for r in rows]
        assert (got["n"], got["n_error"]) == (limit, sum(y != -1 for y in labels))
        # the CLI's batched, length-sorted scoring gives the same predictions as scoring one solution at a time
        examples = load_solutions(f, limit)
        one_by_one = first_errors([scorer.score_examples([ex])[0] for ex in examples])
        assert detail["predictions"][f.stem]["predicted"] == one_by_one
        pairs = list(zip(one_by_one, labels, strict=True))
        err = [p == y for p, y in pairs if y != -1]
        cor = [p == -1 for p, y in pairs if y == -1]
        assert got["n_correct"] == len(cor)
        assert got["acc_error"] == pytest.approx(sum(err) / len(err))
        assert got["acc_correct"] == pytest.approx(sum(cor) / len(cor))


@pytest.mark.data
def test_threshold_extremes_on_real_rows(shared_data, tiny_prm_dir):
    """Scores of a sigmoid head lie in (0, 1): threshold 0 predicts "all correct" everywhere, threshold 1.5
    predicts "step 0 is wrong" everywhere; the accuracies then follow from the labels alone."""
    path = shared_data / "processbench" / "gsm8k.json"
    rows = read_json_records(path)
    labels = [rows[i]["label"] for i in stratified_head([r["label"] for r in rows], 12)]
    errors = [y for y in labels if y != -1]
    assert len(errors) == 6, "gsm8k is 200 erroneous + 200 correct solutions: 12 keep 6 of each"
    scorer = PRMScorer(ProcessRewardModel.from_pretrained(tiny_prm_dir), batch_size=4)
    none_wrong = evaluate_file(scorer, path, threshold=0.0, limit=12)
    assert none_wrong.predicted == [-1] * 12
    assert (none_wrong.acc_error, none_wrong.acc_correct, none_wrong.f1) == (0.0, 1.0, 0.0)
    all_wrong = evaluate_file(scorer, path, threshold=1.5, limit=12)
    assert all_wrong.predicted == [0] * 12
    assert all_wrong.acc_error == pytest.approx(sum(y == 0 for y in errors) / len(errors))
    assert all_wrong.acc_correct == 0.0


def test_eval_cli_shows_progress_and_reads_every_file_before_the_model(tiny_prm_dir, tmp_path):
    data = tmp_path / "toy.json"
    data.write_text(json.dumps([
        {"id": "e", "problem": "1 + 1?", "steps": ["1 + 1 = 3", "Answer: 3"], "label": 0},
        {"id": "c", "problem": "2 + 2?", "steps": ["2 + 2 = 4", "Answer: 4"], "label": -1},
    ]))
    res = CliRunner().invoke(app, ["prm", "eval", "--model", str(tiny_prm_dir), "--processbench", str(data)])
    assert res.exit_code == 0, res.output
    assert "[prm eval] 2/2 solutions" in res.output
    assert json.loads(res.stdout.strip().splitlines()[-1])["files"]["toy"]["n"] == 2
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"id": "x", "steps": ["a"], "label": 3}]))
    res = CliRunner().invoke(app, ["prm", "eval", "--model", str(tiny_prm_dir), "--processbench", str(data),
                                   "--processbench", str(bad)], terminal_width=300)
    assert res.exit_code == 2 and "field 'label' is 3" in res.output and "[prm eval]" not in res.output

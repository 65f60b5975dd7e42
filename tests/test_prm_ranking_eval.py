"""`proctor prm eval --trajectories` end to end on `household`: held-out rollouts with MC-Q written back,
candidate completions at their states, a PRM trained by `train_prm` (whose saved config records `score_at`),
and the report's counts and accuracy recomputed independently from `PRMScorer.score_actions`."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from proctor.cli import app
from proctor.credit.candidates import by_state, candidate_q
from proctor.credit.stage import TargetsConfig, run_targets
from proctor.prm.config import PRMTrainConfig
from proctor.prm.model import ProcessRewardModel
from proctor.prm.ranking import ranking_pairs
from proctor.prm.scoring import PRMScorer
from proctor.prm.trainer import train_prm
from proctor.prompts.render import prefix_at
from proctor.rollout import RolloutConfig, run_rollout
from proctor.store import TrajectoryStore

ENV = {"max_steps": 10, "expert_hints": True}
POLICY = {"kind": "epsilon", "epsilon": 0.5, "seed": 3}


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    root = tmp_path_factory.mktemp("prm_eval")
    run_rollout(RolloutConfig(env="household", out=root / "test", tasks=4, samples=1, agent=POLICY, env_kwargs=ENV,
                              progress=False))
    run_targets(TargetsConfig(method="mc-q", input=root / "test", out=root / "targets", split="keep",
                              write_back=root / "labelled"))
    run_rollout(RolloutConfig(env="household", out=root / "cands", agent=POLICY, env_kwargs=ENV, progress=False,
                              start={"source": root / "labelled", "prefix_lengths": "states", "completions": 3,
                                     "candidates": {"expert": True, "random": 2}}))
    return root


def train(root, tiny_model_dir, name: str, score_at: str):
    cfg = PRMTrainConfig.model_validate({
        "model": {"backbone": str(tiny_model_dir), "head": "scalar"},
        "data": {"train": str(root / "labelled"), "format": "trajectories", "target": "mc-q",
                 "score_at": score_at},
        "output_dir": str(root / name), "steps": 2, "batch_size": 4, "device": "cpu", "progress": False,
    })
    train_prm(cfg)
    return root / name


def evaluate(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(app, ["prm", "eval", *args])
    return res.exit_code, res.output


def test_prm_eval_on_trajectories(stores, tiny_model_dir):
    model = train(stores, tiny_model_dir, "prm", "action")
    assert json.loads((model / "prm_config.json").read_text())["score_at"] == "action"
    code, out = evaluate("--model", str(model), "--trajectories", str(stores / "labelled"), "--target", "mc-q",
                         "--candidates", str(stores / "cands"), "--bootstrap", "50", "--output",
                         str(stores / "report.json"))
    assert code == 0, out
    report = json.loads(out.strip().splitlines()[-1])
    assert report == json.loads((stores / "report.json").read_text())
    trajs = TrajectoryStore.open(stores / "labelled").load()
    n_steps = sum(len(t.steps) for t in trajs)
    assert report["steps"] == n_steps == report["targets"]["steps"] == report["score_spread"]["n"]
    assert report["targets"]["tasks"] == 4 and 0 <= report["targets"]["brier"] <= 1
    # the ranking, recomputed from the completions and the scorer directly
    comps = TrajectoryStore.open(stores / "cands").load()
    q = {s: {a: e.q for a, e in acts.items()} for s, acts in by_state(candidate_q(comps)).items()}
    pairs = ranking_pairs(q, 0.2)
    ranking = report["ranking"]
    assert ranking["prm"]["pairs"] == len(pairs) > 0
    assert ranking["completions_per_candidate"] == [3, 3]
    scorer = PRMScorer(ProcessRewardModel.from_pretrained(model, dtype="float32"))
    by_id = {t.id: t for t in trajs}
    right = 0
    for state in sorted({p.state for p in pairs}):
        actions = sorted(q[state])
        s = dict(zip(actions, scorer.score_actions(prefix_at(by_id[state[0]], state[1]), actions), strict=True))
        right += sum(s[p.better] > s[p.worse] for p in pairs if p.state == state)
    assert ranking["prm"]["right"] == right
    lo, hi = ranking["prm"]["ci95_wilson"]
    assert lo <= ranking["prm"]["accuracy"] <= hi
    experts = {p.state: by_id[p.state[0]].steps[p.state[1]].info["expert_action"] for p in pairs}
    assert ranking["prefer_expert"]["right"] == sum(p.better == experts[p.state] for p in pairs)


def test_value_model_records_score_at_and_ranks_no_actions(stores, tiny_model_dir):
    model = train(stores, tiny_model_dir, "v", "state")
    assert json.loads((model / "prm_config.json").read_text())["score_at"] == "state"
    code, out = evaluate("--model", str(model), "--trajectories", str(stores / "labelled"), "--target", "mc-q",
                         "--candidates", str(stores / "cands"), "--bootstrap", "20")
    assert code == 0, out
    report = json.loads(out.strip().splitlines()[-1])
    assert report["score_at"] == "state" and "scores no actions" in report["ranking"]["note"]
    assert report["targets"]["steps"] == sum(len(t.steps) for t in TrajectoryStore.open(stores / "labelled"))


def test_prm_eval_usage_errors_are_one_line(stores, tiny_model_dir):
    code, out = evaluate("--model", str(tiny_model_dir))
    assert code == 2 and "give --processbench FILE or --trajectories STORE" in out
    model = train(stores, tiny_model_dir, "prm2", "action")
    code, out = evaluate("--model", str(model), "--trajectories", str(stores / "labelled"), "--target", "nope")
    assert code == 2 and "no step has target 'nope'" in out and "Traceback" not in out


def test_bradley_terry_prm_from_candidate_pairs_gets_the_full_report(stores, tiny_model_dir):
    """A PRM trained with the relative (Bradley–Terry) loss on same-state candidate pairs (`candidate-pairs`
    records) is evaluated like any other: spread, Brier/AUROC and ranking."""
    summary = run_targets(TargetsConfig(method="candidate-pairs", input=stores / "cands", out=stores / "pairs",
                                        split="keep", params={"margin": 0.2}))
    assert summary["records"] > 0
    cfg = PRMTrainConfig.model_validate({
        "model": {"backbone": str(tiny_model_dir), "head": "scalar"},
        "loss": "bradley_terry", "packing": True,
        "data": {"train": str(stores / "pairs"), "format": "targets", "trajectories": [str(stores / "cands")]},
        "output_dir": str(stores / "bt"), "steps": 2, "batch_size": 4, "device": "cpu", "progress": False,
    })
    train_prm(cfg)
    code, out = evaluate("--model", str(stores / "bt"), "--trajectories", str(stores / "labelled"), "--target",
                         "mc-q", "--candidates", str(stores / "cands"), "--bootstrap", "20")
    assert code == 0, out
    report = json.loads(out.strip().splitlines()[-1])
    assert report["ranking"]["prm"]["pairs"] > 0 and 0 <= report["targets"]["brier"] <= 1

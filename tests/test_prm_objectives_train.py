"""A small training run per objective (Bradley–Terry pairs, SPA progress sum, inverse-PRM TD difference,
value model from trajectories, preference records from `proctor targets`): the loss goes down and, where the
objective ranks, the trained PRM ranks held-out data right."""

from __future__ import annotations

import json
import random

import pytest

from credit_fixtures import traj
from proctor.credit import Sources, run_method
from proctor.credit.io import write_records
from proctor.prm.config import PRMTrainConfig
from proctor.prm.data import StepwiseExample, write_stepwise
from proctor.prm.records import PairExample
from proctor.prm.scoring import PRMScorer
from proctor.prm.trainer import train_prm
from proctor.store import TrajectoryStore

GOOD = ["open the drawer", "take the key", "go north", "unlock the door"]
BAD = ["eat the key", "jump on table", "sleep now", "break the wall"]
PROMPT = "Task: escape the room. "


def pairs(n: int, seed: int) -> list[PairExample]:
    rng = random.Random(seed)
    return [
        PairExample(
            prompt=PROMPT,
            history=[rng.choice(GOOD + BAD) for _ in range(rng.randint(0, 2))],
            chosen=rng.choice(GOOD),
            rejected=rng.choice(BAD),
            id=str(i),
        )
        for i in range(n)
    ]


def progress(n: int, seed: int) -> list[StepwiseExample]:
    """Outcome = 0.5 per good step: the progress ĉ_k = 0.5·𝟙[step k good] sums to it."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        good = [rng.random() < 0.5 for _ in range(rng.randint(1, 3))]
        steps = [rng.choice(GOOD if g else BAD) for g in good]
        out.append(
            StepwiseExample(
                prompt=PROMPT, completions=steps, labels=[None] * len(steps), outcome=0.5 * sum(good)
            )
        )
    return out


def transitions(n: int, seed: int) -> list[StepwiseExample]:
    """Expert-like solutions (good steps, every transition labelled 1) and policy ones (bad steps, 0)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        expert = i % 2 == 0
        steps = [rng.choice(GOOD if expert else BAD) for _ in range(rng.randint(1, 3))]
        out.append(StepwiseExample(prompt=PROMPT, completions=steps, labels=[float(expert)] * len(steps)))
    return out


def train(tmp_path, tiny_model_dir, loss: str, data: dict, steps: int = 30, **extra):
    raw = {
        "model": {"backbone": str(tiny_model_dir), "head": "scalar"},
        "loss": loss,
        "data": data,
        "output_dir": str(tmp_path / "out"),
        "steps": steps,
        "learning_rate": 3e-3,
        "batch_size": 8,
        "device": "cpu",
        "progress": False,
        **extra,
    }
    result = train_prm(PRMTrainConfig.model_validate(raw))
    assert len(result.losses) == steps
    return result.prm.eval(), result.losses


def mean(x) -> float:
    return sum(x) / len(x)


def test_bradley_terry_pairs(tmp_path, tiny_model_dir):
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(p.model_dump_json() + "\n" for p in pairs(64, 0)))
    prm, curve = train(tmp_path, tiny_model_dir, "bradley_terry", {"train": str(path), "format": "pairs"})
    assert mean(curve[-5:]) < 0.5 * mean(curve[:5])
    held = pairs(16, 1)
    scorer = PRMScorer(prm)
    chosen = scorer.score_examples([p.branches()[0] for p in held])
    rejected = scorer.score_examples([p.branches()[1] for p in held])
    assert mean([c[-1] > r[-1] for c, r in zip(chosen, rejected, strict=True)]) >= 0.9


def test_progress_sum(tmp_path, tiny_model_dir):
    write_stepwise(progress(64, 0), tmp_path / "p.jsonl")
    prm, curve = train(tmp_path, tiny_model_dir, "progress_sum", {"train": str(tmp_path / "p.jsonl")})
    assert mean(curve[-5:]) < 0.5 * mean(curve[:5])
    assert prm.spec.sigmoid is False  # ĉ is the raw head value, summed


def test_td_bce_inverse_prm(tmp_path, tiny_model_dir):
    write_stepwise(transitions(64, 0), tmp_path / "t.jsonl")
    _, curve = train(tmp_path, tiny_model_dir, "td_bce", {"train": str(tmp_path / "t.jsonl")}, gamma=0.5)
    assert mean(curve[-5:]) < 0.5 * mean(curve[:5])


def test_value_model_reads_states(tmp_path, tiny_model_dir):
    """V(s) = 1 in a lit room, 0 in a dark one, read at the end of each state (before its action)."""
    rng = random.Random(0)
    trajs = []
    for i in range(32):
        obs = [rng.choice(["a lit hall", "a dark pit"]) for _ in range(rng.randint(1, 3))]
        t = traj(f"v{i}", [(o, rng.choice(GOOD + BAD)) for o in obs], False, task_id=f"t{i}")
        steps = [s.model_copy(update={"targets": {"v": float("lit" in s.observation)}}) for s in t.steps]
        trajs.append(t.model_copy(update={"steps": steps}))
    with TrajectoryStore(tmp_path / "store") as store:
        store.extend(trajs)
    data = {"train": str(tmp_path / "store"), "format": "trajectories", "target": "v", "score_at": "state"}
    _, curve = train(tmp_path, tiny_model_dir, "bce", data, steps=60)  # a plateau of about 25 steps, then it learns
    assert mean(curve[-5:]) < 0.5 * mean(curve[:5])


def test_preference_records_from_targets_train(tmp_path, tiny_model_dir):
    """`proctor targets` preference records + their trajectories → Bradley–Terry training."""
    rng = random.Random(0)
    trajs = []
    for task in range(12):
        for k in range(4):
            first = rng.choice(GOOD) if k % 2 == 0 else rng.choice(BAD)
            trajs.append(traj(f"{task}-{k}", [("a hall", first)], k % 2 == 0, task_id=f"t{task}", sample=k))
    records = run_method("preference", Sources(trajectories=trajs)).records
    assert records
    write_records(records, tmp_path / "targets", {"method": "preference"})
    with TrajectoryStore(tmp_path / "store") as store:
        store.extend(trajs)
    data = {
        "train": str(tmp_path / "targets"),
        "format": "targets",
        "trajectories": [str(tmp_path / "store")],
    }
    _, curve = train(tmp_path, tiny_model_dir, "bradley_terry", data, steps=20)
    assert mean(curve[-5:]) < 0.5 * mean(curve[:5])
    summary = json.loads((tmp_path / "targets" / "summary.json").read_text())
    assert summary["method"] == "preference"


def test_objective_data_mismatch_is_an_error(tmp_path, tiny_model_dir):
    base = {"model": {"backbone": str(tiny_model_dir)}, "output_dir": str(tmp_path)}
    with pytest.raises(ValueError, match="loss 'bradley_terry' reads preference pairs"):
        PRMTrainConfig.model_validate({**base, "loss": "bradley_terry", "data": {"train": "x"}})
    with pytest.raises(ValueError, match="needs data.trajectories"):
        PRMTrainConfig.model_validate({**base, "data": {"train": "x", "format": "targets"}})
    with pytest.raises(ValueError, match="'pairs' holds preference pairs"):
        PRMTrainConfig.model_validate({**base, "loss": "bce", "data": {"train": "x", "format": "pairs"}})

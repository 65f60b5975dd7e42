"""The evaluation summary's pieces on small trajectories built in code: which score is the chosen action's,
budgets, missing and crashed episodes, the per-type table and the CSV."""

from __future__ import annotations

import csv
import io

import pytest

from proctor.evaluation.summary import budget_of, eval_summary, prm_stats, step_score, summary_csv
from proctor.trajectory import Step, Trajectory


def _traj(task: str, sample: int, termination: str, scores: list[float | None], task_type: str = "heat",
          meta: dict | None = None, token_ids: list[int] | None = None) -> Trajectory:
    steps = [Step(observation="o", action=f"a{i}", scores={} if s is None else {"prm": s}, token_ids=token_ids,
                  info={"valid": i != 1}) for i, s in enumerate(scores)]
    return Trajectory(id=f"{task}-{sample}", env="e", task_id=task, sample=sample, task="t", split="test", seed=0,
                      agent="x", steps=steps, success=termination == "success", score=0.0, termination=termination,
                      error="boom" if termination.endswith("_error") else None, task_meta={"task_type": task_type},
                      meta=meta or {})


def test_step_score_prefers_the_search_score_then_the_only_score():
    s = Step(observation="o", action="a", scores={"prm": 0.2, "other": 0.9},
             info={"candidate_meta": {"prm_score": 0.7}})
    assert step_score(s) == 0.7 and step_score(s, "prm") == 0.2 and step_score(s, "absent") is None
    assert step_score(Step(observation="o", action="a", scores={"prm": 0.4})) == 0.4
    assert step_score(Step(observation="o", action="a", scores={"p": 0.4, "q": 0.5})) is None
    assert step_score(Step(observation="o", action="a")) is None


def test_budget_sums_what_trajectories_record_else_counts_steps():
    plain = [_traj("a", 0, "success", [None, None]), _traj("b", 0, "failure", [None] * 3, token_ids=[1, 2])]
    assert budget_of(plain) == {"env_steps": 5, "candidates": 5, "generated_tokens": 6, "prm_calls": 0,
                                "forks": 0, "replayed_steps": 0}
    # per-step best-of-N records each step's cost on the chosen candidate's meta
    bon = _traj("c", 0, "success", [None, None])
    for step in bon.steps:
        step.info["candidate_meta"] = {"budget": {"env_steps": 1, "candidates": 4, "prm_calls": 1}}
    assert budget_of([bon])["candidates"] == 8 and budget_of([bon])["prm_calls"] == 2
    searched = [_traj("a", 0, "success", [None], meta={"budget": {"env_steps": 12, "generated_tokens": 40}}),
                _traj("b", 0, "success", [None], meta={"budget": {"env_steps": 8, "prm_calls": 3}})]
    assert budget_of(searched) == {"env_steps": 20, "generated_tokens": 40, "prm_calls": 3}


def test_crashed_and_missing_episodes_count_as_failures_and_are_listed():
    trajs = [_traj("a", 0, "success", [0.9, 0.8]), _traj("b", 0, "env_error", [0.5], task_type="cool"),
             _traj("c", 0, "max_steps", [0.4, 0.3, 0.2])]
    s = eval_summary(trajs, wanted={("a", 0), ("b", 0), ("c", 0), ("d", 0)}, score_key="prm")
    assert (s["episodes"], s["successes"], s["success_rate"]) == (4, 1, 0.25)
    assert s["crashed"] == [{"task_id": "b", "sample": 0, "termination": "env_error", "error": "boom"}]
    assert s["missing"] == [{"task_id": "d", "sample": 0}]
    assert s["terminations"] == {"success": 1, "failure": 0, "max_steps": 1, "env_error": 1, "agent_error": 0,
                                 "missing": 1}
    assert s["mean_steps"] == 6 / 4 and s["steps"] == 6
    assert s["invalid_action_rate"] == pytest.approx(2 / 6)  # step 1 of a and of c
    assert [(r["task_type"], r["episodes"], r["successes"]) for r in s["by_task_type"]] == [("cool", 1, 0),
                                                                                            ("heat", 2, 1)]
    assert s["budget"]["env_steps"] == 6 and s["budget_per_episode"]["env_steps"] == 1.5


def test_prm_stats_hand_computed():
    trajs = [_traj("a", 0, "success", [0.5, 0.9]), _traj("b", 0, "failure", [0.6, 0.2]),
             _traj("c", 0, "failure", [0.7, None])]
    p = prm_stats(trajs)
    assert p["scored_steps"] == 5 and p["mean_step_score"] == pytest.approx((0.5 + 0.9 + 0.6 + 0.2 + 0.7) / 5)
    # last scored steps: a 0.9 (won), b 0.2, c 0.7 (lost): the winner ranks above both → AUROC 1
    assert p["mean_final_score_success"] == 0.9 and p["mean_final_score_failure"] == pytest.approx(0.45)
    assert p["final_score_auroc"] == 1.0
    assert prm_stats([_traj("a", 0, "success", [None])]) is None


def test_summary_csv_has_an_all_row_then_one_per_task_type():
    s = {"policy": "p", **eval_summary([_traj("a", 0, "success", [0.9]), _traj("b", 0, "failure", [0.1], "cool")])}
    rows = list(csv.DictReader(io.StringIO(summary_csv(s))))
    assert [r["group"] for r in rows] == ["all", "task_type=cool", "task_type=heat"]
    assert rows[0]["episodes"] == "2" and rows[0]["success_rate"] == "0.5000" and rows[0]["mean_prm_score"] == "0.5000"
    assert rows[1]["successes"] == "0" and rows[2]["successes"] == "1"


def test_the_run_tables_read_at_80_columns():
    """No header or cell is cut with "…" when the terminal is 80 columns wide."""
    from rich.console import Console

    from proctor.pipeline.table import result_tables

    row = {"success_rate": 0.38, "success_ci95": [0.31, 0.45], "episodes": 200, "mean_steps": 11.2,
           "budget": {"env_steps": 2240, "prm_calls": 17920}}
    vs = {"iteration": 0, "policy": "policy", "pairs": 200, "diff": 0.26, "diff_ci95": [0.18, 0.34], "b01": 61,
          "b10": 9, "p_value": 9e-9}
    summary = {"env": "household", "results": [
        {"iteration": 0, "policy": "policy", **row},
        {"iteration": 0, "policy": "best-of-8 (PRM Q0)", **row, "vs_first": vs},
        {"iteration": 1, "policy": "beam 2x2 (PRM Q0)", **row, "vs_first": vs}]}
    console = Console(width=80, record=True, color_system=None)
    for table in result_tables(summary):
        console.print(table)
    text = console.export_text()
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= 80
    assert "best-of-8" in text and "+26.0 [+18.0, +34.0]" in text

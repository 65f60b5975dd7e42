"""Honest evaluation: success with Wilson intervals, per-type tables, budgets, crashed episodes listed,
sweeps over N, paired comparisons (`compare`), and the self-contained HTML report (`build_report`)."""

from proctor.evaluation.config import EvalConfig
from proctor.evaluation.harness import EvalResult, run_eval

__all__ = ["EvalConfig", "EvalResult", "run_eval"]

"""Credit assignment: outcome-only trajectories → per-step training targets (docs/methods.md §1–6).

Pure functions over trajectories, one family per module, each registered as a named method with a pydantic
config (`registry`); `io` reads and writes stores and Parquet. Importing this package registers every method.
"""

from proctor.credit import (
    candidates,
    group,
    inverse,
    math_shepherd,
    montecarlo,
    preference,
    shaping,
    spa,
)
from proctor.credit.outcome import CreditError, OutcomeConfig, Scored, scored, signed
from proctor.credit.records import LabelledStep, PreferencePair, ProgressExample, Record, Transition
from proctor.credit.registry import MethodResult, Sources, get_method, make_config, methods, run_method
from proctor.credit.splits import SplitLeakError, check_no_leak, split_tasks, with_splits

__all__ = [
    "CreditError", "LabelledStep", "MethodResult", "OutcomeConfig", "PreferencePair", "ProgressExample",
    "Record", "Scored", "Sources", "SplitLeakError", "Transition", "candidates", "check_no_leak", "get_method",
    "group", "inverse", "make_config", "math_shepherd", "methods", "montecarlo", "preference",
    "run_method", "scored", "shaping", "signed", "spa", "split_tasks", "with_splits",
]

"""Old names that keep working after a rename, each with a one-line note naming the new one: a config's fields
(`renamed_fields`, called by the config's `mode="before"` validator, as `proctor.training.config.RENAMED_FIELDS`
refuses the fields that changed meaning) and a module's attributes (`moved_names`, the module's `__getattr__`).

    class BestOfNConfig(AgentSpec):
        @model_validator(mode="before")
        @classmethod
        def _renamed(cls, data):
            return renamed_fields(data, {"base": "agent", "batch": "prm_batch"}, "best-of-n agent: ")

    __getattr__ = moved_names(__name__, {"GenerationConfig": "GenerationBackend",
                                         "open_scorer": "proctor.prm.ref:open_scorer"})
"""

from __future__ import annotations

import importlib
import logging
import warnings
from collections.abc import Callable, Mapping
from typing import Any

log = logging.getLogger(__name__)


def renamed_fields(data: Any, renamed: Mapping[str, str], where: str = "") -> Any:
    """`data` (a config's fields) with each old field of `renamed` (old → new) read as its new one, and a logged
    note per old field found ("{where}batch: now `prm_batch`"); both spellings given is a ValueError. Anything
    but a mapping is returned as it is (for the config to report)."""
    if not isinstance(data, Mapping) or not any(old in data for old in renamed):
        return data
    out = dict(data)
    for old, new in renamed.items():
        if old not in out:
            continue
        if new in out:
            raise ValueError(f"{where}{old} and {new} both given; `{old}` is the old name of `{new}`: keep `{new}`")
        out[new] = out.pop(old)
        log.warning("%s%s: now `%s` (read as it; rename it in the config)", where, old, new)
    return out


def moved_names(module: str, renamed: Mapping[str, str]) -> Callable[[str], Any]:
    """A `__getattr__` for `module` that resolves each old name of `renamed` (old → new: a name in `module`, or
    `other.module:name` for one that moved out) with a DeprecationWarning naming the new one; any other name is an
    AttributeError as usual. The new one's module is imported on first use, so a move closes no import circle."""

    def __getattr__(name: str) -> Any:
        if name not in renamed:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        where, _, new = renamed[name].rpartition(":")
        warnings.warn(f"{module}.{name} is now {where or module}.{new}", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(where or module), new)

    return __getattr__

"""Config parts: a group of fields that several configs share, declared once with one description each (which env,
which of its tasks, the optimisation, the clipped policy gradient, ...).

    class TaskSelection(TaskChoice, EnvRef, Part):           # a part: `Part` among its bases
        split: str = TaskChoice.field_with("split", default="train")   # another default, the same field

    class EvalConfig(TaskChoice, EnvRef):                     # a config composed of parts
        ...

A config composes parts by inheriting them, so its YAML keeps the flat keys; a class is a part when it names `Part`
among its own bases (`is_part`), and a config that composes parts is not one. `field_with` redeclares a part's
field with another default (its type, constraints and description kept). The config reference documents each part
once, with the configs that use it (`docs/hooks/reference.py`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.fields import FieldInfo


class Part(BaseModel):
    """Base of the config parts (see module docstring)."""

    model_config = ConfigDict(extra="forbid")

    @classmethod
    def field_with(cls, name: str, **changes: Any) -> Any:
        """The part's field `name` with `changes` (`default=...`), for a config that redeclares it."""
        return FieldInfo.merge_field_infos(cls.model_fields[name], **changes)


def is_part(cls: type) -> bool:
    """Whether `cls` is a config part (it names `Part` among its own bases)."""
    return Part in cls.__bases__

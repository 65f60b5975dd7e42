"""Size presets of the household: how big rooms are, how cluttered, and which task types are posed.

`standard` is the default env (ALFWorld-sized rooms: ~19 receptacles, 6–10 distractor object types, six task
types; the searching expert needs ~13 steps). `small` is for CPU-sized runs (the quickstart): at most 6
receptacles, one of each type, 2–3 distractor object types, one instance of the task's object (two for
pick_two), four task types without pick_two and examine; the searching expert needs ~6 steps.

A task id names its preset (`household/s0/test/00017` is standard, `household/small/s0/test/00017` small),
so any env regenerates any task identically, whatever preset it was built with.
"""

from __future__ import annotations

from dataclasses import dataclass

ALL_TASK_TYPES: tuple[str, ...] = ("pick_and_place", "pick_two", "clean", "heat", "cool", "examine")


@dataclass(frozen=True)
class Preset:
    """How a room and its task are generated (see module docstring)."""

    name: str
    task_types: tuple[str, ...] = ALL_TASK_TYPES
    #: at most this many receptacles of one type (None: the room layout's range)
    max_per_type: int | None = None
    #: at most this many receptacles in the room (the task's target, appliance, lamp host and one plausible
    #: place of its object are always kept; None: no limit)
    max_receptacles: int | None = None
    #: (min, max) distractor object types placed besides the task's object
    distractor_types: tuple[int, int] = (6, 10)
    #: (min, max) instances of each distractor type
    distractor_copies: tuple[int, int] = (1, 2)
    #: instances of the task's object to draw from (pick_two, other task types)
    object_copies: tuple[tuple[int, ...], tuple[int, ...]] = ((2, 2, 3), (1, 1, 2))


PRESETS: dict[str, Preset] = {
    "standard": Preset("standard"),
    "small": Preset(
        "small",
        task_types=("pick_and_place", "clean", "heat", "cool"),
        max_per_type=1,
        max_receptacles=6,
        distractor_types=(2, 3),
        distractor_copies=(1, 1),
        object_copies=((2,), (1,)),
    ),
}
DEFAULT_PRESET = "standard"


def get_preset(name: str) -> Preset:
    if name not in PRESETS:
        raise ValueError(f"household: unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
    return PRESETS[name]

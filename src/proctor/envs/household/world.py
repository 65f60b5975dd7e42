"""The household world: the catalogue of receptacles and objects, the room layouts, and the mutable state.

Names follow ALFWorld: a receptacle or object is `"<type> <n>"` with a one-word lower-case type
(`"cabinet 3"`, `"apple 1"`). The state is plain Python (dicts, lists, strings) so that `copy.deepcopy`
clones an episode cheaply.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

#: receptacle type -> (openable, preposition used in task texts)
RECEPTACLES: dict[str, tuple[bool, str]] = {
    "armchair": (False, "on"),
    "bathtubbasin": (False, "in"),
    "bed": (False, "on"),
    "cabinet": (True, "in"),
    "coffeemachine": (False, "in"),
    "coffeetable": (False, "on"),
    "countertop": (False, "on"),
    "desk": (False, "on"),
    "diningtable": (False, "on"),
    "drawer": (True, "in"),
    "dresser": (False, "on"),
    "fridge": (True, "in"),
    "garbagecan": (False, "in"),
    "handtowelholder": (False, "on"),
    "laundryhamper": (False, "in"),
    "microwave": (True, "in"),
    "shelf": (False, "on"),
    "sidetable": (False, "on"),
    "sinkbasin": (False, "in"),
    "sofa": (False, "on"),
    "stoveburner": (False, "on"),
    "toilet": (False, "on"),
    "toiletpaperhanger": (False, "on"),
    "towelholder": (False, "on"),
    "tvstand": (False, "on"),
}


def _layout(spec: str) -> dict[str, tuple[int, int]]:
    """`"cabinet:5-9 fridge:1-1"` -> `{"cabinet": (5, 9), "fridge": (1, 1)}`."""
    out = {}
    for item in spec.split():
        rtype, _, span = item.partition(":")
        lo, _, hi = span.partition("-")
        out[rtype] = (int(lo), int(hi))
    return out


#: room kind -> receptacle type -> (min count, max count)
ROOMS: dict[str, dict[str, tuple[int, int]]] = {
    "kitchen": _layout(
        "cabinet:5-9 drawer:2-5 countertop:1-3 fridge:1-1 microwave:1-1 sinkbasin:1-1 stoveburner:2-4 "
        "garbagecan:1-1 coffeemachine:1-1 shelf:0-2 diningtable:0-1"
    ),
    "bathroom": _layout(
        "cabinet:3-5 countertop:1-1 sinkbasin:1-2 bathtubbasin:0-1 toilet:1-1 toiletpaperhanger:1-1 "
        "towelholder:1-1 handtowelholder:0-1 drawer:2-5 garbagecan:1-1 shelf:0-2"
    ),
    "bedroom": _layout(
        "bed:1-1 desk:0-1 sidetable:1-2 dresser:0-1 drawer:3-6 shelf:2-5 garbagecan:1-1 laundryhamper:0-1"
    ),
    "livingroom": _layout(
        "sofa:1-1 armchair:0-2 coffeetable:1-1 sidetable:1-2 shelf:2-4 drawer:2-4 cabinet:1-3 garbagecan:1-1 "
        "tvstand:0-1 dresser:0-1"
    ),
}

#: the lamp used by "look at X under the desklamp" tasks: a fixed object standing on one of these
LAMP = "desklamp"
LAMP_NAME = f"{LAMP} 1"
LAMP_HOSTS: tuple[str, ...] = ("desk", "sidetable", "dresser", "coffeetable")
LAMP_ROOMS: tuple[str, ...] = ("bedroom", "livingroom")

#: the appliance (receptacle type) each transformation needs, and the object flag it sets
APPLIANCES: dict[str, str] = {"clean": "sinkbasin", "heat": "microwave", "cool": "fridge"}
FLAGS: dict[str, str] = {"clean": "clean", "heat": "hot", "cool": "cool"}


@dataclass(frozen=True)
class ObjectKind:
    """An object type: the rooms it appears in, where it plausibly lies, and what can be done to it."""

    rooms: tuple[str, ...]
    places: tuple[str, ...]
    abilities: frozenset[str] = frozenset()  # subset of {"clean", "heat", "cool", "light"}


def _kind(rooms: str, places: str, abilities: str = "") -> ObjectKind:
    return ObjectKind(tuple(rooms.split()), tuple(places.split()), frozenset(abilities.split()))


_FOOD = "countertop diningtable fridge garbagecan sinkbasin microwave"
_DISH = "cabinet countertop diningtable sinkbasin fridge shelf"
_CUTLERY = "drawer countertop diningtable sinkbasin"
_DESK_ITEM = "desk drawer shelf sidetable dresser garbagecan"
_SMALL_ITEM = "desk drawer dresser shelf sidetable coffeetable sofa armchair"
_DECOR = "shelf sidetable coffeetable dresser desk tvstand"

OBJECTS: dict[str, ObjectKind] = {
    "apple": _kind("kitchen", _FOOD, "clean heat cool"),
    "potato": _kind("kitchen", _FOOD, "clean heat cool"),
    "tomato": _kind("kitchen", _FOOD, "clean heat cool"),
    "egg": _kind("kitchen", _FOOD, "clean heat cool"),
    "bread": _kind("kitchen", "countertop diningtable fridge microwave cabinet", "heat cool"),
    "lettuce": _kind("kitchen", "countertop diningtable fridge sinkbasin garbagecan", "clean cool"),
    "mug": _kind("kitchen", _DISH + " coffeemachine microwave", "clean heat cool"),
    "cup": _kind("kitchen", _DISH + " microwave", "clean heat cool"),
    "plate": _kind("kitchen", _DISH, "clean heat cool"),
    "bowl": _kind("kitchen", _DISH + " microwave", "clean heat cool"),
    "pan": _kind("kitchen", "stoveburner countertop cabinet sinkbasin fridge diningtable", "clean cool"),
    "pot": _kind("kitchen", "stoveburner countertop cabinet sinkbasin fridge diningtable", "clean cool"),
    "kettle": _kind("kitchen", "stoveburner countertop cabinet shelf diningtable", "clean"),
    "knife": _kind("kitchen", _CUTLERY, "clean"),
    "butterknife": _kind("kitchen", _CUTLERY, "clean"),
    "fork": _kind("kitchen", _CUTLERY, "clean"),
    "spoon": _kind("kitchen", _CUTLERY, "clean"),
    "spatula": _kind("kitchen", _CUTLERY, "clean"),
    "ladle": _kind("kitchen", _CUTLERY, "clean"),
    "dishsponge": _kind("kitchen bathroom", "sinkbasin countertop cabinet drawer", "clean"),
    "saltshaker": _kind("kitchen", "countertop cabinet shelf drawer diningtable"),
    "peppershaker": _kind("kitchen", "countertop cabinet shelf drawer diningtable"),
    "winebottle": _kind("kitchen", "fridge countertop cabinet diningtable shelf", "cool"),
    "soapbottle": _kind("kitchen bathroom", "countertop cabinet shelf sinkbasin toilet garbagecan"),
    "soapbar": _kind(
        "bathroom", "countertop cabinet sinkbasin bathtubbasin toilet garbagecan shelf", "clean"
    ),
    "cloth": _kind("bathroom", "countertop cabinet sinkbasin bathtubbasin drawer shelf", "clean"),
    "handtowel": _kind("bathroom", "handtowelholder countertop cabinet shelf"),
    "towel": _kind("bathroom", "towelholder cabinet shelf bathtubbasin"),
    "toiletpaper": _kind("bathroom", "toiletpaperhanger toilet cabinet countertop garbagecan shelf drawer"),
    "spraybottle": _kind("bathroom", "cabinet countertop toilet shelf garbagecan drawer"),
    "candle": _kind("bathroom livingroom", "countertop cabinet toilet shelf bathtubbasin drawer sidetable"),
    "tissuebox": _kind(
        "bathroom bedroom livingroom", "countertop toilet shelf cabinet sidetable dresser desk"
    ),
    "scrubbrush": _kind("bathroom", "toilet cabinet garbagecan countertop"),
    "alarmclock": _kind("bedroom", "desk sidetable dresser shelf", "light"),
    "book": _kind(
        "bedroom livingroom", "bed desk sidetable shelf sofa coffeetable drawer dresser armchair", "light"
    ),
    "cd": _kind("bedroom livingroom", _DESK_ITEM, "light"),
    "cellphone": _kind("bedroom livingroom", "bed desk sidetable dresser drawer sofa armchair", "light"),
    "creditcard": _kind("bedroom livingroom", _SMALL_ITEM, "light"),
    "keychain": _kind("bedroom livingroom", _SMALL_ITEM, "light"),
    "laptop": _kind("bedroom livingroom", "bed desk sofa armchair coffeetable dresser", "light"),
    "pen": _kind("bedroom", _DESK_ITEM, "light"),
    "pencil": _kind("bedroom", _DESK_ITEM, "light"),
    "pillow": _kind("bedroom livingroom", "bed sofa armchair", "light"),
    "remotecontrol": _kind(
        "livingroom", "sofa armchair coffeetable sidetable dresser tvstand drawer", "light"
    ),
    "statue": _kind("livingroom bedroom", _DECOR, "light"),
    "vase": _kind("livingroom bedroom", _DECOR, "light"),
    "watch": _kind("bedroom livingroom", "desk drawer dresser shelf sidetable coffeetable", "light"),
    "box": _kind("livingroom", "sofa coffeetable sidetable shelf dresser armchair desk", "light"),
    "newspaper": _kind("livingroom", "sofa armchair coffeetable sidetable garbagecan", "light"),
}


def kind_of(name: str) -> str:
    """`"cabinet 3"` -> `"cabinet"`."""
    return name.rsplit(" ", 1)[0]


@dataclass
class World:
    """The mutable state of one episode.

    `contents[r]` lists the objects in/on receptacle `r` in the order they were put there; `flags[o]` is
    the set of {"clean", "hot", "cool"} of object `o`; `location` is None in the middle of the room.
    """

    room: str
    receptacles: list[str]
    contents: dict[str, list[str]]
    is_open: dict[str, bool]
    flags: dict[str, set[str]] = field(default_factory=dict)
    location: str | None = None
    holding: str | None = None
    lamp_on: bool = False

    def openable(self, receptacle: str) -> bool:
        return receptacle in self.is_open

    def accessible(self, receptacle: str) -> bool:
        """Whether the inside of `receptacle` can be seen and reached (not a closed door)."""
        return self.is_open.get(receptacle, True)

    def where(self, obj: str) -> str | None:
        """The receptacle holding `obj` (None when the agent carries it or it does not exist)."""
        for r, items in self.contents.items():
            if obj in items:
                return r
        return None

    def lamp_location(self) -> str | None:
        for r, items in self.contents.items():
            for o in items:
                if kind_of(o) == LAMP:
                    return r
        return None


def _fewer_receptacles(rng: random.Random, room: str, counts: dict[str, int], required: dict[str, int],
                       spots: list[str], limit: int) -> dict[str, int]:
    """Keep at most `limit` receptacles: the `required` types, one lamp host (lamp rooms) and one plausible
    place of the task's object first, then other types of the room in random order, while they fit."""
    present = [t for t in sorted(counts) if counts[t] > 0]
    essential = list(required)
    if room in LAMP_ROOMS and not any(t in essential for t in LAMP_HOSTS):
        essential.append(next(t for t in present if t in LAMP_HOSTS))
    if not any(t in essential for t in spots):
        essential.append(next(t for t in present if t in spots))
    others = [t for t in present if t not in essential]
    rng.shuffle(others)
    kept: dict[str, int] = {}
    for t in essential + others:
        if sum(kept.values()) + counts[t] <= limit or t in essential:
            kept[t] = counts[t]
    return kept


def build_world(
    rng: random.Random,
    room: str,
    required: dict[str, int],
    task_object: str,
    task_object_count: int,
    avoid: str | None,
    *,
    max_per_type: int | None = None,
    max_receptacles: int | None = None,
    distractor_types: tuple[int, int] = (6, 10),
    distractor_copies: tuple[int, int] = (1, 2),
) -> World:
    """Sample a room of kind `room` and place objects in plausible receptacles.

    `required` gives minimum receptacle counts the task needs (its target, its appliance). The task's
    object type gets `task_object_count` instances, none of them initially in a receptacle of type
    `avoid` (the task's target), so no goal holds at the start. The keyword arguments shrink the room (a
    `proctor.envs.household.presets.Preset`); their defaults draw exactly what they always drew.
    """
    counts = {rtype: rng.randint(lo, hi) for rtype, (lo, hi) in ROOMS[room].items()}
    if max_per_type is not None:
        counts = {rtype: min(n, max_per_type) for rtype, n in counts.items()}
    for rtype, n in required.items():
        counts[rtype] = max(counts.get(rtype, 0), n)
    if room in LAMP_ROOMS and not any(counts.get(h, 0) for h in LAMP_HOSTS):
        counts["sidetable"] = 1
    spots = [t for t in OBJECTS[task_object].places if t != avoid and t in ROOMS[room]]
    if not any(counts.get(t, 0) for t in spots):
        counts[rng.choice(spots)] = 1
    if max_receptacles is not None:
        counts = _fewer_receptacles(rng, room, counts, required, spots, max_receptacles)
    receptacles = [f"{rtype} {i}" for rtype in sorted(counts) for i in range(1, counts[rtype] + 1)]
    by_type: dict[str, list[str]] = {}
    for r in receptacles:
        by_type.setdefault(kind_of(r), []).append(r)
    world = World(
        room=room,
        receptacles=receptacles,
        contents={r: [] for r in receptacles},
        is_open={r: False for r in receptacles if RECEPTACLES[kind_of(r)][0]},
    )
    if room in LAMP_ROOMS:
        hosts = [r for h in LAMP_HOSTS for r in by_type.get(h, [])]
        world.contents[rng.choice(hosts)].append(LAMP_NAME)

    def place(otype: str, n: int, exclude: str | None) -> None:
        types = [t for t in OBJECTS[otype].places if t != exclude and t in by_type]
        for i in range(1, n + 1):
            name = f"{otype} {i}"
            world.contents[rng.choice(by_type[rng.choice(types)])].append(name)
            world.flags[name] = set()

    place(task_object, task_object_count, avoid)
    pool = sorted(
        o
        for o, k in OBJECTS.items()
        if room in k.rooms and o != task_object and any(t in by_type for t in k.places)
    )
    for otype in rng.sample(pool, min(len(pool), rng.randint(*distractor_types))):
        place(otype, rng.randint(*distractor_copies), None)
    for items in world.contents.values():
        rng.shuffle(items)
    return world

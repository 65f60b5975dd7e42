"""The six ALFWorld task types, their texts and goal tests, and the deterministic task sets.

A task id is `household/s<seed>/<split>/<index>` (e.g. `household/s0/test/00017`), or
`household/<preset>/s<seed>/<split>/<index>` for a size preset other than `standard`
(`proctor.envs.household.presets`): it names everything needed to regenerate the episode, whatever seed or
preset the env reading it was built with. The generator draws from
`random.Random("household:<seed>:<split>:<index>")` (`"household:<preset>:<seed>:..."` for other presets),
so splits never share a generation stream.

Composition hold-out: every (object type, target) pair a task can name (the target is a receptacle type,
or the desklamp for examine tasks) is either *held out* or not, a deterministic function of the seed.
`train`/`valid`/`test` tasks only use pairs that are not held out; `test_composition` only held-out
pairs, so its (object, target) combinations never occur in training.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from functools import cache, lru_cache

from proctor.envs.household.presets import ALL_TASK_TYPES, DEFAULT_PRESET, Preset, get_preset
from proctor.envs.household.world import (
    APPLIANCES,
    FLAGS,
    LAMP,
    LAMP_ROOMS,
    OBJECTS,
    RECEPTACLES,
    ROOMS,
    World,
    build_world,
    kind_of,
)

TASK_TYPES: tuple[str, ...] = ALL_TASK_TYPES
COMPOSITION_SPLIT = "test_composition"
#: fraction of (object, target) pairs held out for the composition split
HOLDOUT_FRACTION = 0.15

#: task type -> the two ALFWorld phrasings; {o} object type, {p} preposition, {r} target type
TEMPLATES: dict[str, tuple[str, str]] = {
    "pick_and_place": ("put a {o} {p} {r}.", "put some {o} {p} {r}."),
    "pick_two": ("put two {o} {p} {r}.", "find two {o} and put them {p} {r}."),
    "clean": ("put a clean {o} {p} {r}.", "clean some {o} and put it {p} {r}."),
    "heat": ("put a hot {o} {p} {r}.", "heat some {o} and put it {p} {r}."),
    "cool": ("put a cool {o} {p} {r}.", "cool some {o} and put it {p} {r}."),
    "examine": ("look at {o} under the {r}.", "examine the {o} with the {r}."),
}


def _template_regex(template: str) -> re.Pattern[str]:
    """A task template as a regex capturing the object (`o`) and target (`r`)."""
    body = re.escape(template).replace(r"\{o\}", r"(?P<o>\w+)").replace(r"\{p\}", "(?:in|on)")
    return re.compile("^" + body.replace(r"\{r\}", r"(?P<r>\w+)") + "$")


_PATTERNS = [(kind, _template_regex(t)) for kind, pair in TEMPLATES.items() for t in pair]


@dataclass(frozen=True)
class TaskSpec:
    """What a task asks: its type, the object type, and the target (receptacle type or the lamp)."""

    kind: str
    obj: str
    target: str

    @property
    def appliance(self) -> str | None:
        return APPLIANCES.get(self.kind)

    @property
    def flag(self) -> str | None:
        return FLAGS.get(self.kind)


def task_text(spec: TaskSpec, variant: int) -> str:
    prep = RECEPTACLES[spec.target][1] if spec.target in RECEPTACLES else ""
    return TEMPLATES[spec.kind][variant].format(o=spec.obj, p=prep, r=spec.target)


def parse_task(text: str) -> TaskSpec:
    """Invert `task_text`: the task type, object and target named by an instruction."""
    body = text.strip().split("Your task is to:")[-1].strip()
    for kind, pattern in _PATTERNS:
        m = pattern.match(body)
        if m:
            return TaskSpec(kind, m["o"], m["r"])
    raise ValueError(f"not a household task text: {text!r}")


@cache
def _rooms_for(spec: TaskSpec) -> tuple[str, ...]:
    """Room kinds where `spec` can be posed: object, target and appliance all possible there."""
    out = []
    for room, layout in ROOMS.items():
        if room not in OBJECTS[spec.obj].rooms:
            continue
        if spec.kind == "examine":
            ok = room in LAMP_ROOMS
        else:
            ok = spec.target in layout and (spec.appliance is None or spec.appliance in layout)
            ok = ok and any(t in layout and t != spec.target for t in OBJECTS[spec.obj].places)
        if ok:
            out.append(room)
    return tuple(out)


@lru_cache(maxsize=1)
def all_specs() -> tuple[TaskSpec, ...]:
    """Every (type, object, target) a task can ask for, in a fixed order."""
    specs = []
    for kind in TASK_TYPES:
        for obj, k in sorted(OBJECTS.items()):
            if kind == "examine":
                candidates = [LAMP] if "light" in k.abilities else []
            elif kind in APPLIANCES:
                candidates = [t for t in k.places if t != APPLIANCES[kind]] if kind in k.abilities else []
            else:
                candidates = list(k.places)
            specs += [s for t in candidates if _rooms_for(s := TaskSpec(kind, obj, t))]
    return tuple(specs)


@lru_cache(maxsize=64)
def held_out_pairs(seed: int) -> frozenset[tuple[str, str]]:
    """The (object, target) pairs reserved for the composition split under `seed`.

    Pairs are drawn in a seeded random order: first one per task type (so `test_composition` covers all
    six), then more until `HOLDOUT_FRACTION` of all pairs are held out. A pair is held out only if every
    object type, every target and every task type still occurs in the remaining (training) specs, so the
    composition split combines parts that training has seen, in combinations it has not.
    """
    specs = all_specs()
    pairs = sorted({(s.obj, s.target) for s in specs})
    random.Random(f"household:{seed}:composition").shuffle(pairs)

    def parts(held: set[tuple[str, str]]) -> tuple[set[str], set[str], set[str]]:
        kept = [s for s in specs if (s.obj, s.target) not in held]
        return {s.obj for s in kept}, {s.target for s in kept}, {s.kind for s in kept}

    everything = parts(set())
    held: set[tuple[str, str]] = set()
    for kind in TASK_TYPES:
        if any(s.kind == kind and (s.obj, s.target) in held for s in specs):
            continue
        kind_pairs = {(s.obj, s.target) for s in specs if s.kind == kind}
        held.add(next(p for p in pairs if p in kind_pairs and parts(held | {p}) == everything))
    budget = round(HOLDOUT_FRACTION * len(pairs))
    for pair in pairs:
        if len(held) >= budget:
            break
        if pair not in held and parts(held | {pair}) == everything:
            held.add(pair)
    return frozenset(held)


@lru_cache(maxsize=256)
def specs_for_split(seed: int, split: str, task_types: tuple[str, ...] = TASK_TYPES) -> dict[str, tuple[TaskSpec, ...]]:
    """Task type -> the specs a split may draw (held-out pairs only in the composition split), for the
    given task types."""
    held = held_out_pairs(seed)
    want_held = split == COMPOSITION_SPLIT
    out: dict[str, tuple[TaskSpec, ...]] = {}
    for kind in task_types:
        specs = tuple(s for s in all_specs() if s.kind == kind and ((s.obj, s.target) in held) == want_held)
        if specs:
            out[kind] = specs
    return out


def make_task_id(seed: int, split: str, index: int, preset: str = DEFAULT_PRESET) -> str:
    size = "" if preset == DEFAULT_PRESET else f"{get_preset(preset).name}/"
    return f"household/{size}s{seed}/{split}/{index:05d}"


_TASK_ID = re.compile(r"^household/(?:(?P<preset>[a-z]\w*)/)?s(?P<seed>\d+)/(?P<split>\w+)/(?P<index>\d+)$")


def parse_task_id(task_id: str) -> tuple[int, str, int]:
    """(seed, split, index) of a task id (see module docstring)."""
    seed, split, index, _ = parse_task_id_preset(task_id)
    return seed, split, index


def parse_task_id_preset(task_id: str) -> tuple[int, str, int, Preset]:
    """(seed, split, index, preset) of a task id (see module docstring)."""
    m = _TASK_ID.match(task_id)
    if not m:
        raise ValueError(f"not a household task id: {task_id!r} (expected household/[<preset>/]s<seed>/<split>/<index>)")
    return int(m["seed"]), m["split"], int(m["index"]), get_preset(m["preset"] or DEFAULT_PRESET)


def generate(task_id: str) -> tuple[TaskSpec, str, World]:
    """The task spec, its instruction text and the initial world of `task_id` (deterministic)."""
    seed, split, index, preset = parse_task_id_preset(task_id)
    stream = f"{seed}:{split}:{index}" if preset.name == DEFAULT_PRESET else f"{preset.name}:{seed}:{split}:{index}"
    rng = random.Random(f"household:{stream}")
    pools = specs_for_split(seed, split, preset.task_types)
    kind = rng.choice(sorted(pools))
    spec = rng.choice(pools[kind])
    room = rng.choice(_rooms_for(spec))
    required = {} if spec.kind == "examine" else {spec.target: 1}
    if spec.appliance:
        required[spec.appliance] = 1
    count = rng.choice(preset.object_copies[0] if spec.kind == "pick_two" else preset.object_copies[1])
    avoid = None if spec.kind == "examine" else spec.target
    world = build_world(rng, room, required, spec.obj, count, avoid, max_per_type=preset.max_per_type,
                        max_receptacles=preset.max_receptacles, distractor_types=preset.distractor_types,
                        distractor_copies=preset.distractor_copies)
    return spec, task_text(spec, rng.randint(0, 1)), world


def goal_reached(spec: TaskSpec, world: World) -> bool:
    """ALFWorld's goal conditions.

    pick_and_place: an object of the type is in/on a receptacle of the target type; pick_two: two of
    them in/on the same such receptacle; clean/heat/cool: an object of the type carrying the flag is in/on
    a target receptacle; examine: the agent holds one, at the lamp, with the lamp on.
    """
    if spec.kind == "examine":
        return (
            world.lamp_on
            and world.holding is not None
            and kind_of(world.holding) == spec.obj
            and world.location is not None
            and world.location == world.lamp_location()
        )
    need = 2 if spec.kind == "pick_two" else 1
    for r, items in world.contents.items():
        if kind_of(r) != spec.target:
            continue
        n = sum(
            1 for o in items if kind_of(o) == spec.obj and (spec.flag is None or spec.flag in world.flags[o])
        )
        if n >= need:
            return True
    return False

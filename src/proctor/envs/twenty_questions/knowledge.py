"""The loaded knowledge base: `KBObject`s with feature sets, validated against the vocabulary on import."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from proctor.envs.twenty_questions import vocabulary as V
from proctor.envs.twenty_questions.objects import OBJECT_TABLE

TAG_NAMESPACES: dict[str, str] = {
    "m": "material", "c": "color", "h": "part", "u": "use", "p": "place", "a": "ability",
}
_VOCAB: dict[str, set[str]] = {
    "material": set(V.MATERIALS), "color": set(V.COLORS), "part": set(V.PARTS), "use": set(V.USES),
    "place": set(V.PLACES), "ability": set(V.ABILITIES),
}
#: flags a table row may set (the rest are derived: natural, man-made)
_TABLE_FLAGS = (set(V.FLAGS) - {"natural", "man-made"}) | {"raw"}


class KnowledgeBaseError(ValueError):
    """A row of the object table that does not fit the vocabulary; the message names the row."""


@dataclass(frozen=True)
class KBObject:
    """One object: its name, other names it answers to, size class and feature set."""

    index: int
    name: str
    synonyms: tuple[str, ...]
    size: int
    features: frozenset[str]

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name, *self.synonyms)

    def has(self, feature: str) -> bool:
        return feature in self.features


def kind_closure(kinds: list[str]) -> set[str]:
    """The kinds plus all their ancestors (a mammal is an animal)."""
    parents = {k.name: k.parent for k in V.KINDS}
    out: set[str] = set()
    for k in kinds:
        while k is not None:
            out.add(k)
            k = parents[k]
    return out


def _parse_row(index: int, line: str) -> KBObject:
    where = f"objects.py row {index + 1} ({line[:40]!r})"
    fields = [f.strip() for f in line.split("|")]
    if len(fields) != 4:
        raise KnowledgeBaseError(f"{where}: expected 4 '|'-separated fields, got {len(fields)}")
    names = [n.strip() for n in fields[0].split(",") if n.strip()]
    kinds = [k.replace("_", " ") for k in fields[1].split()]
    known_kinds = {k.name for k in V.KINDS}
    for k in kinds:
        if k not in known_kinds:
            raise KnowledgeBaseError(f"{where}: unknown kind {k!r}")
    try:
        size = int(fields[2])
    except ValueError:
        raise KnowledgeBaseError(f"{where}: size {fields[2]!r} is not an integer") from None
    if not 0 <= size < len(V.SIZE_CLASSES):
        raise KnowledgeBaseError(f"{where}: size {size} outside 0..{len(V.SIZE_CLASSES) - 1}")
    features = {f"kind:{k}" for k in kind_closure(kinds)}
    for tag in fields[3].split():
        prefix, sep, rest = tag.partition(":")
        if not sep:
            if tag not in _TABLE_FLAGS:
                raise KnowledgeBaseError(f"{where}: unknown flag {tag!r}")
            features.add(f"flag:{tag}")
            continue
        namespace = TAG_NAMESPACES.get(prefix)
        if namespace is None:
            raise KnowledgeBaseError(f"{where}: unknown tag prefix {prefix!r} in {tag!r}")
        for value in rest.split(","):
            value = value.replace("_", " ")
            if value not in _VOCAB[namespace]:
                raise KnowledgeBaseError(f"{where}: unknown {namespace} {value!r}")
            features.add(f"{namespace}:{value}")
    places = {f.split(":", 1)[1] for f in features if f.startswith("place:")}
    if not places:
        raise KnowledgeBaseError(f"{where}: no place (p:...) given; every object needs one")
    if places & V.HOME_PLACES:
        features.add("place:home")
    if places & V.WATER_PLACES:
        features.add("place:water")
    if places & V.INDOOR_PLACES:
        features.add("place:indoors")
    if places - V.INDOOR_PLACES:
        features.add("place:outdoors")
    natural = "flag:living" in features or "flag:raw" in features
    features.discard("flag:raw")
    features.add("flag:natural" if natural else "flag:man-made")
    return KBObject(index, names[0], tuple(names[1:]), size, frozenset(features))


@cache
def load_objects() -> tuple[KBObject, ...]:
    """All objects of the knowledge base, in table order (validated; raises `KnowledgeBaseError`)."""
    rows = [line for line in OBJECT_TABLE.strip().splitlines() if line.strip()]
    objects = tuple(_parse_row(i, line) for i, line in enumerate(rows))
    seen: dict[str, str] = {}
    for obj in objects:
        for n in obj.names:
            if n in seen:
                raise KnowledgeBaseError(f"object name {n!r} is used by both {seen[n]!r} and {obj.name!r}")
            seen[n] = obj.name
    return objects

"""The household command grammar and the text forms shared by the env and the searching expert."""

from __future__ import annotations

import re

NOTHING = "Nothing happens."

_NAME = r"(\w+ \d+)"
COMMANDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("go", re.compile(rf"^go to {_NAME}$")),
    ("open", re.compile(rf"^open {_NAME}$")),
    ("close", re.compile(rf"^close {_NAME}$")),
    ("take", re.compile(rf"^take {_NAME} from {_NAME}$")),
    ("move", re.compile(rf"^(?:move {_NAME} to|put {_NAME} (?:in/on|in|on)) {_NAME}$")),
    ("transform", re.compile(rf"^(clean|heat|cool) {_NAME} with {_NAME}$")),
    ("use", re.compile(rf"^use {_NAME}$")),
    ("examine", re.compile(rf"^examine {_NAME}$")),
    ("look", re.compile(r"^look$")),
    ("inventory", re.compile(r"^inventory$")),
)
_ITEM = re.compile(r"\ba (\w+ \d+)")


def normalize(action: str) -> str:
    """Lower-case, single spaces, no trailing full stop."""
    return " ".join(action.strip().lower().rstrip(".").split())


def parse_command(action: str) -> tuple[str, list[str]] | None:
    """`"take apple 1 from fridge 1"` -> `("take", ["apple 1", "fridge 1"])`; None if not in the grammar."""
    command = normalize(action)
    for verb, pattern in COMMANDS:
        m = pattern.match(command)
        if m:
            return verb, [g for g in m.groups() if g is not None]
    return None


def listing(names: list[str]) -> str:
    """ALFWorld's enumeration: `a x 1`, `a x 1, and a y 2`, `a x 1, a y 2, and a z 3`; `nothing` if empty."""
    if not names:
        return "nothing"
    if len(names) == 1:
        return f"a {names[0]}"
    return ", ".join(f"a {n}" for n in names[:-1]) + f", and a {names[-1]}"


def parse_listing(text: str) -> list[str]:
    """The names enumerated after the last `you see` in an observation (inverse of `listing`)."""
    _, sep, tail = text.rpartition("you see ")
    return _ITEM.findall(tail) if sep else []

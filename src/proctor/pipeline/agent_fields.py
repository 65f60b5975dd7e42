"""The pipeline's agent and search configs (`policy_agent`, `demos.agent`, `prm_candidates`, and each evaluation
entry's `agent` or `search`), checked against the agent and search registries when the config is validated.

They stay as written (plain data: the run's recorded config, which a resume compares), with the loop's placeholders
where it fills in a folder (`fills`: `$policy`, π_k; `$prm`, Q_k): a check validates them as the stage will, and
drops only the problems of a placeholder (a folder the loop has not made yet). An unknown kind or method, an unknown
field or a bad value is one line naming its path (`evaluate.entries[1].agent.n: ...`) before any stage runs.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

import proctor.search  # noqa: F401  (registers the search methods and the agent kind best-of-n)
from proctor.agents.registry import KINDS
from proctor.registry import did_you_mean
from proctor.search.registry import METHODS

#: a loop placeholder: `$` and a lower-case name
PLACEHOLDER = re.compile(r"\$[a-z_]+")
#: the placeholders the loop fills in an agent of the policy (`policy_agent`, `prm_candidates.agent`)
POLICY_FILLS = {"$policy": "π_k's folder"}
#: ... and in an evaluation entry
EVAL_FILLS = {**POLICY_FILLS, "$prm": "Q_k's folder"}


def check_agent(value: Any, where: str, fills: Mapping[str, str]) -> None:
    """`value`, an agent config `{kind: ..., ...}`, as the agent registry validates it (see module docstring)."""
    check_fields(tagged_config(value, "kind", where), value, where, fills)


def check_search(value: Any, where: str, fills: Mapping[str, str]) -> None:
    """`value`, a search config `{method: ..., ...}`, as the search registry validates it."""
    check_fields(tagged_config(value, "method", where), value, where, fills)


def config_of(tag: str, name: str) -> type[BaseModel]:
    """The config class of agent kind `name` (`tag` kind) or search method `name` (`tag` method); an
    `UnknownName` (a KeyError) with the closest name and the known ones."""
    return KINDS[name] if tag == "kind" else METHODS[name].config


def tagged_config(value: Any, tag: str, where: str) -> type[BaseModel]:
    """The config class that `value[tag]` (a kind, a method) names; a ValueError naming `where.tag` when none."""
    if not isinstance(value, Mapping) or not isinstance(value.get(tag), str):
        raise ValueError(f"{where}: needs `{tag}`, a config {{{tag}: ..., ...}}; got {value!r}")  # noqa: TRY004
    try:
        return config_of(tag, value[tag])
    except KeyError as e:
        raise ValueError(f"{where}.{tag}: {e}") from None


def check_fields(config: type[BaseModel], value: Mapping[str, Any], where: str, fills: Mapping[str, str]) -> None:
    """`value` validated as `config`: its first problem that is not a placeholder's is a ValueError of one line,
    `where.path: problem`. A placeholder not in `fills` is one too."""
    stray = next(((loc, text) for loc, text in strings(value) if PLACEHOLDER.fullmatch(text) and text not in fills),
                 None)
    if stray is not None:
        here = ", ".join(f"`{p}` ({what})" for p, what in fills.items()) or "none"
        raise ValueError(f"{where}{dotted(stray[0])}: {stray[1]!r} is not a placeholder the loop fills in here "
                         f"(here: {here})")
    try:
        config.model_validate(dict(value))
    except ValidationError as e:
        errors = [err for err in e.errors() if not placeholders_problem(err, fills)]
        if errors:
            err, more = errors[0], f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
            loc = located(value, err["loc"])
            raise ValueError(f"{where}{dotted(loc)}: {message(config, value, loc, err)}{more}") from None


def placeholders_problem(err: Mapping[str, Any], fills: Mapping[str, str]) -> bool:
    """Whether a validation error is a placeholder's: a validator refused a placeholder (the folder it stands for
    does not exist yet), as its input or named in its message (a model's check)."""
    given = err.get("input")
    return err["type"] == "value_error" and ((isinstance(given, str) and given in fills)
                                             or any(p in err["msg"] for p in fills))


def located(value: Any, loc: tuple[Any, ...]) -> tuple[Any, ...]:
    """An error's location in `value`: its keys and list indices (pydantic's union members left out)."""
    kept: list[Any] = []
    for step in loc:
        if isinstance(value, Mapping) and isinstance(step, str):
            value = value.get(step)
        elif isinstance(value, list) and isinstance(step, int):
            value = value[step] if step < len(value) else None
        else:
            continue
        kept.append(step)
    return tuple(kept)


def message(config: type[BaseModel], value: Any, loc: tuple[Any, ...], err: Mapping[str, Any]) -> str:
    """An error's message; an unknown field's names the fields of the config it is in (`config` at the top, the
    kind or method of a nested agent or search config), the closest first."""
    if err["type"] != "extra_forbidden" or not loc:
        return str(err["msg"]).removeprefix("Value error, ")
    parent, owner, what = value, config, config.__name__
    for step in loc[:-1]:
        parent, owner = parent[step], None
    for tag, kind in (("kind", "agent kind"), ("method", "search method")):
        if isinstance(parent, Mapping) and isinstance(parent.get(tag), str):
            with contextlib.suppress(KeyError):  # another config's field of that name
                owner, what = config_of(tag, parent[tag]), f"{kind} {parent[tag]!r}"
    if owner is None:
        return "not a field here"
    fields = sorted(owner.model_fields)
    return f"not a field of {what}{did_you_mean(loc[-1], fields)}; fields: {', '.join(fields)}"


def strings(value: Any, loc: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], str]]:
    """Every string in `value` (nested mappings and lists) with its location."""
    if isinstance(value, str):
        yield loc, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from strings(item, (*loc, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from strings(item, (*loc, i))


def dotted(loc: tuple[Any, ...]) -> str:
    """A location as a path suffix: `.agent.components[0].weight`."""
    return "".join(f"[{step}]" if isinstance(step, int) else f".{step}" for step in loc)

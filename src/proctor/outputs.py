"""The one rule for a command that writes into a folder (or file) that may already hold its outputs: the same run
resumes, another run is refused in one line naming the first field that differs, and `overwrite` replaces it.

A run is identified by a JSON mapping (its config, and fingerprints of its inputs where they decide its outputs),
recorded where the outputs say what they are: a trajectory store's `manifest.json` (`store.open_for_run`), a
`summary.json`. `claim_output` decides; `fingerprint`, `files_fingerprint` and `model_identity` identify inputs by
content.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

#: what the refusal tells the user to do
CHOICES = "re-run with its options to resume it, write to another folder, or pass --overwrite to replace it"


class OutputExistsError(ValueError):
    """A folder holds the outputs of another run; the message is one line naming what differs."""


def as_json(value: Any) -> Any:
    """`value` as plain JSON data (tuples as lists, paths and other objects as strings), as it is recorded."""
    return json.loads(json.dumps(value, default=str))


#: a field that only one of two compared values has (`field_differences`)
UNSET = object()


def field_differences(old: Any, new: Any, path: str = "", missing: Any = UNSET) -> Iterator[tuple[str, Any, Any]]:
    """Every field where two JSON values differ, as (dotted path, old, new), lazily: mappings field by field (in
    `new`'s order, then the fields only `old` has; a field one side lacks is `missing` there), lists item by item
    when their lengths agree (`entries.1.n`), anything else as a whole."""
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        for key in [*new, *(k for k in old if k not in new)]:
            yield from field_differences(old.get(key, missing), new.get(key, missing),
                                         f"{path}.{key}" if path else str(key), missing)
    elif isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            yield from field_differences(a, b, f"{path}.{i}" if path else str(i), missing)
    elif old != new:
        yield path, old, new


def shown(value: Any, limit: int = 60) -> str:
    """A compared value in a message: JSON, cut at `limit` characters; `(unset)` for a field it lacks."""
    if value is UNSET:
        return "(unset)"
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def first_difference(recorded: Any, identity: Any, path: str = "") -> str | None:
    """The first field where two identities differ (`field_differences`, a missing field read as null), as
    "field 'params.gamma' is 0.9 there and 0.5 here"; None when they are equal."""
    found = next(field_differences(recorded, identity, path, missing=None), None)
    return None if found is None else f"field '{found[0]}' is {shown(found[1])} there and {shown(found[2])} here"


def claim_output(where: Path, identity: Mapping[str, Any], *, recorded: Any,
                 present: Sequence[Path], overwrite: bool = False, what: str = "outputs") -> bool:
    """Whether a run may write its outputs to `where`, by the one rule; True when `where` holds this same run's
    outputs (resume them), False when it holds none (or `overwrite` just removed them).

    `present`: the outputs of this kind that `where` holds now (the caller lists them; other files are left
    alone); `recorded`: the identity they record (not a mapping: they record none). Another run's outputs raise
    `OutputExistsError` unless `overwrite`, which deletes `present` (this same run's too: it starts over).
    Without `overwrite` nothing is changed, so it can be called before any expensive work."""
    if not present:
        return False
    if overwrite:
        remove_outputs(present)
        return False
    if not isinstance(recorded, Mapping):
        raise OutputExistsError(f"{where}: holds outputs that record no run of this command; {CHOICES}")
    why = first_difference(recorded, as_json(identity))
    if why is None:
        return True
    raise OutputExistsError(f"{where}: holds the {what} of another run ({why}); {CHOICES}")


def remove_outputs(paths: Iterable[Path]) -> None:
    """Delete these outputs (folders with what they hold; a link, not what it points to)."""
    for path in paths:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()


def fingerprint(ids: Iterable[str]) -> dict[str, Any]:
    """Which items an input holds, by their ids: their count and a hash of the sorted ids."""
    ids = sorted(ids)
    digest = hashlib.sha256("\n".join(ids).encode()).hexdigest()[:16]
    return {"count": len(ids), "sha256": digest}


def files_fingerprint(folder: Path) -> dict[str, Any]:
    """Which version of a folder of files (a model) this is: the names, sizes and modification times of the
    files directly in it, hashed (the weights are not read)."""
    stats = sorted(f"{p.name}\t{p.stat().st_size}\t{p.stat().st_mtime_ns}" for p in folder.iterdir() if p.is_file())
    return fingerprint(stats)


def model_identity(folder: Path) -> dict[str, Any]:
    """Which model a run used: its folder (resolved) and that folder's version (`files_fingerprint`)."""
    return {"path": str(folder.resolve()), "files": files_fingerprint(folder)}

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
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

#: what the refusal tells the user to do
CHOICES = "re-run with its options to resume it, write to another folder, or pass --overwrite to replace it"


class OutputExistsError(ValueError):
    """A folder holds the outputs of another run; the message is one line naming what differs."""


def as_json(value: Any) -> Any:
    """`value` as plain JSON data (tuples as lists, paths and other objects as strings), as it is recorded."""
    return json.loads(json.dumps(value, default=str))


def first_difference(recorded: Any, identity: Any, path: str = "") -> str | None:
    """The first field where two identities differ, as "field 'params.gamma' is 0.9 there and 0.5 here" (fields
    in `identity`'s order, then those only `recorded` has); None when they are equal."""
    if isinstance(recorded, Mapping) and isinstance(identity, Mapping):
        for key in [*identity, *(k for k in recorded if k not in identity)]:
            found = first_difference(recorded.get(key), identity.get(key), f"{path}.{key}" if path else str(key))
            if found is not None:
                return found
        return None
    if recorded == identity:
        return None
    return f"field '{path}' is {_short(recorded)} there and {_short(identity)} here"


def _short(value: Any, limit: int = 60) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= limit else text[:limit - 1] + "…"


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

"""`--dry-run` of the training commands (`proctor train`, `proctor prm train`): the config validated and printed
with every field resolved, then what it reads (each found here or not) and the folder it writes; nothing runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: the fields of a trainer config that name a model: a folder, or a hub name fetched when training starts
MODEL_FIELDS = ("model", "policy", "prm", "init", "critic")


def config_inputs(cfg: Any) -> list[tuple[str, str, bool]]:
    """What a trainer config reads, as (field, path, whether it may be a hub name): each field set to a file or
    folder (a `Path`; `output_dir` is what it writes) or to a model (`MODEL_FIELDS`)."""
    out = []
    for name in type(cfg).model_fields:
        value = getattr(cfg, name)
        if name != "output_dir" and (isinstance(value, Path) or (name in MODEL_FIELDS and isinstance(value, str))):
            out.append((name, str(value), name in MODEL_FIELDS and not isinstance(value, Path)))
    return out


def dry_run_text(command: str, path: Path, cfg: Any, inputs: list[tuple[str, str, bool]]) -> str:
    """`--dry-run`'s output, itself a config `command` reads: the config at `path` with every field resolved, as
    YAML, then its `inputs` ((field, path, whether it may be a hub name), as `config_inputs` lists them) and the
    folder it writes as comments."""
    import yaml

    resolved = cfg.model_dump(mode="json", serialize_as_any=True)
    lines = [f"# {path}: a valid {type(cfg).__name__} for `{command}`, every field resolved",
             yaml.safe_dump(resolved, sort_keys=False, allow_unicode=True, width=110).rstrip(), "# reads:"]
    width = max((len(name) for name, _, _ in inputs), default=0)
    for name, value, hub_name in inputs:
        where = "found" if Path(value).exists() else \
            "not found here (read as a hub name when training starts)" if hub_name else "not found here"
        lines.append(f"#   {name:<{width}}  {value}: {where}")
    if not inputs:
        lines.append("#   nothing but the env")
    if "output_dir" in resolved:
        lines.append(f"# writes: {resolved['output_dir']}")
    lines.append("# nothing was run (--dry-run)")
    return "\n".join(lines)

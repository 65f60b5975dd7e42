"""Which command a YAML config is for: every command that reads a config file, with its config class, so that a
config given to the wrong command gets one line naming the command that takes it (not the first of a dozen
field errors)."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

#: the commands that read a YAML config, with their config classes (`module:Class`); the trainers are added
#: from their registry (`config_commands`)
COMMANDS = {
    "proctor run": "proctor.pipeline.config:PipelineConfig",
    "proctor prm train": "proctor.prm.config:PRMTrainConfig",
    "proctor prm train-likelihood": "proctor.prm.likelihood:LikelihoodPRMConfig",
    "proctor rollout --config": "proctor.rollout.config:RolloutConfig",
    "proctor eval --config": "proctor.evaluation.config:EvalConfig",
}


def config_commands() -> dict[str, type[BaseModel]]:
    """Command → config class, for `COMMANDS` and every `proctor train METHOD` (`proctor.rl.trainers`)."""
    from proctor.rl.trainers import TRAINERS

    refs = {**COMMANDS, **{f"proctor train {name}": entry.config for name, entry in TRAINERS.items()}}

    def load(ref: str) -> type[BaseModel]:
        module, name = ref.split(":")
        return getattr(importlib.import_module(module), name)

    return {command: load(ref) for command, ref in refs.items()}


def fits(data: dict[str, Any], cls: type[BaseModel]) -> bool:
    """Whether `data` has the shape of a `cls` config: it validates, or its errors are in the values of its
    fields, none about a field it lacks or one `cls` does not have. An error of the whole config (a model
    validator's) counts as a fit when every key is a field of `cls` (the validators may read older names)."""
    try:
        cls.model_validate(data)
    except ValidationError as e:
        errors = e.errors()
    except Exception:  # noqa: BLE001 - a validator that cannot read the data: not this kind of config
        return False
    else:
        return True
    if any(err["type"] in ("missing", "extra_forbidden") and len(err["loc"]) == 1 for err in errors):
        return False
    if all(err["loc"] == () for err in errors):
        return set(data) <= set(cls.model_fields) | {f.alias for f in cls.model_fields.values() if f.alias}
    return True


def wrong_command(path: Path | str, data: dict[str, Any], cls: type[BaseModel]) -> str | None:
    """One line for a config at `path` that is not a `cls` config but the config of other commands: what it is
    and the command that takes it; None when no other command takes it either (its own errors are then the
    message)."""
    if fits(data, cls):
        return None
    commands = config_commands()
    others = [(command, other) for command, other in commands.items() if other is not cls and fits(data, other)]
    if not others:
        return None
    own = next((command for command, other in commands.items() if other is cls), cls.__name__)
    kinds = " or ".join(f"`{command}` ({other.__name__})" for command, other in others)
    return f"{path} is a config for {kinds}, not for `{own}` ({cls.__name__}): run `{others[0][0]} {path}`"

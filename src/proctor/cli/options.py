"""Parsing helpers shared by CLI verbs: key=value lists, YAML configs, agent options, one-line errors."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, NoReturn

import typer
from rich.console import Console

#: tables stay readable in logs: rich assumes 80 columns when stdout is not a terminal
console = Console(width=None if sys.stdout.isatty() else 140)
err_console = Console(stderr=True)


def parse_key_values(pairs: list[str], option: str) -> dict[str, Any]:
    """`["max_steps=40", "data_dir=/x"]` → `{"max_steps": 40, "data_dir": "/x"}` (values parsed as JSON when they are)."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"expected key=value, got {pair!r}", param_hint=option)
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def parse_env_args(pairs: list[str]) -> dict[str, Any]:
    """`--env-arg` pairs as env constructor arguments."""
    return parse_key_values(pairs, "--env-arg")


def load_yaml_config(path: Path) -> dict[str, Any]:
    """A YAML mapping from `path`, numbers as YAML 1.2 reads them (`3e-4` is a float:
    `proctor.yaml_config`); a missing file, invalid YAML or a non-mapping is one clear error line."""
    from proctor.yaml_config import read_yaml_config

    try:
        return read_yaml_config(path)
    except (ValueError, FileNotFoundError) as e:
        fail(e)


def validated_config(path: Path, model: Any, output_dir: Path | None = None) -> Any:
    """`model` (a pydantic config class) validated from the YAML at `path`, `output_dir` overriding the file's;
    a validation error is one line naming the file and the fields, or the command that takes the file when it is
    another command's config."""
    from pydantic import ValidationError

    from proctor.cli.config_kinds import wrong_command

    data = load_yaml_config(path)
    if output_dir is not None:
        data["output_dir"] = str(output_dir)
    try:
        return model.model_validate(data)
    except ValidationError as e:
        fail(wrong_command(path, data, model) or e, str(path))


def agent_from_options(kind: str | None, agent_args: list[str], *, model: str | None = None,
                       base_url: str | None = None, expert_kind: str | None = None, temperature: float | None = None,
                       prompt_format: str | None = None, seed: int = 0, config_agent: Any = None) -> dict[str, Any]:
    """An agent config dict from `--agent KIND --agent-arg k=v` and the shorthand options (`--model`, ...). Without
    `--agent` (`kind` None), the options given change the fields of `config_agent` (the agent of the command's
    `--config` file), else of a `random` agent."""
    base = config_agent if kind is None and isinstance(config_agent, dict) else {}
    cfg: dict[str, Any] = {**base, "kind": kind or base.get("kind", "random")}
    shorthand = {"model": model, "base_url": base_url, "expert": expert_kind, "temperature": temperature}
    cfg.update({k: v for k, v in shorthand.items() if v is not None})
    if prompt_format is not None:
        cfg["prompt"] = {**(cfg["prompt"] if isinstance(cfg.get("prompt"), dict) else {}), "format": prompt_format}
    if cfg["kind"] in ("random", "epsilon", "mixture", "switch", "hf", "openai"):
        cfg.setdefault("seed", seed)
    cfg.update(parse_key_values(agent_args, "--agent-arg"))
    return cfg


def agent_options_given(agent_args: list[str], *shorthand: object) -> bool:
    """Whether any agent option was given: an `--agent-arg` or a shorthand (`--model`, `--temperature`, ...)."""
    return bool(agent_args) or any(v is not None for v in shorthand)


def fail(error: object, where: str | None = None) -> NoReturn:
    """Print one error line (pydantic errors: the first field and its message) and exit with code 2."""
    from pydantic import ValidationError

    if isinstance(error, ValidationError):
        first = error.errors()[0]
        loc = ".".join(str(x) for x in first["loc"]) or "<config>"
        more = f" (and {error.error_count() - 1} more)" if error.error_count() > 1 else ""
        msg = first["msg"].removeprefix("Value error, ")
        field = "" if msg.startswith((f"{loc}.", f"{loc}:")) else f"field '{loc}': "
        text = f"{where + ': ' if where else ''}{field}{msg}{more}"
    elif isinstance(error, KeyError):
        text = str(error.args[0]) if error.args else repr(error)
    else:
        text = str(error)
    from rich.markup import escape

    err_console.print(f"[red]error:[/red] {escape(text)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code=2)

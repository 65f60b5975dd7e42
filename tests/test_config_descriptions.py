"""The generated config reference documents every field: each field of every config class it lists (the
registries' entries and every model nested in them, as `docs/hooks/reference.py` enumerates them) has a
description, and the commands the reference pages cite exist."""

from __future__ import annotations

import re

import typer

from proctor.cli import app
from test_docs import hook

#: a command cited in a code span: `proctor prm train ...`
CITED = re.compile(r"`(proctor(?: [^`]*)?)`")


def test_every_config_field_has_a_description():
    models = hook().config_models()
    assert len(models) > 60  # the walk reaches the nested sections, not only the registries' roots
    ours = [cls for cls in models if cls.__module__.startswith("proctor.")]  # not a test's own registered ones
    missing = [f"{cls.__module__}.{cls.__qualname__}.{name}" for cls in ours
               for name, field in cls.model_fields.items() if not (field.description or "").strip()]
    assert missing == []


def unknown_command(cited: str) -> str | None:
    """The first word of a cited `proctor ...` command line that names no command of the app (None: all do)."""
    cmd = typer.main.get_command(app)
    ctx = cmd.context_class(cmd, info_name="proctor")
    for word in cited.split()[1:]:
        if not hasattr(cmd, "get_command") or word.startswith("-"):
            return None  # a command's own arguments and options follow
        sub = cmd.get_command(ctx, word)
        if sub is None:
            return word
        cmd, ctx = sub, sub.context_class(sub, info_name=word, parent=ctx)
    return None


def test_the_reference_cites_only_commands_that_exist():
    ref = hook()
    assert unknown_command("proctor agents") == "agents" and unknown_command("proctor prm train --overwrite") is None
    pages = {uri: make() for uri, make in ref.PAGES.items() if uri.startswith("reference/config/")}
    cited = {(uri, c) for uri, text in pages.items() for c in CITED.findall(text)}
    assert len(cited) > 10
    assert sorted((uri, c) for uri, c in cited if unknown_command(c) is not None) == []

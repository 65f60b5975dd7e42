"""Every `proctor ...` command in the README, the docs site and examples/ parses against the CLI as it is today:
its subcommand exists, every option is spelled as the CLI spells it, and every value has the right type.

The commands are parsed, not run (most need a model, data or minutes); the flows a newcomer runs first are run
at a small size elsewhere (test_docs_examples.py, test_readme_stages.py, test_quickstart*.py). This test is what
catches a renamed flag or a removed subcommand in a page nobody re-read.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import tempfile
from pathlib import Path

import pytest
import typer
from typer.core import TyperGroup

from proctor.cli import app

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "examples").rglob("*.md"))]
#: a fenced shell block
_BLOCK = re.compile(r"```(?:bash|sh|shell|console)\n(.*?)```", re.DOTALL)
#: a line that sets shell variables (a later command uses them): NAME=value ..., optionally exported
_ASSIGNMENT = re.compile(r"^(?:export )?[A-Za-z_][A-Za-z0-9_]*=")
#: how bash hands each documented command to this test: `proctor` prints its arguments (NUL-separated, one
#: command per \x01), `which` names the program, and a launcher drops its own arguments up to `proctor`
_STUBS = r"""
proctor() { printf '%s\0' "$@"; printf '\001'; }
which() { printf '%s' "$1"; }
launch() { while [ $# -gt 0 ] && [ "$1" != proctor ]; do shift; done; shift; proctor "$@"; }
torchrun() { launch "$@"; }
accelerate() { launch "$@"; }
"""


def _logical_lines(block: str) -> list[str]:
    """The block's lines, with backslash continuations and multi-line quotes joined."""
    lines, pending = [], ""
    for raw in block.splitlines():
        pending = f"{pending}\n{raw}" if pending and not pending.endswith(" ") else pending + raw
        if pending.endswith("\\"):
            pending = pending[:-1].rstrip() + " "
            continue
        try:
            shlex.split(pending, comments=True)
        except ValueError:  # an open quote: the value goes on
            continue
        lines.append(pending.strip())
        pending = ""
    return lines


def _first_command(line: str) -> str:
    """`line` up to its first shell operator outside quotes (`&&`, `||`, `;`, `|`, `>`, `&`, a comment)."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in ";|>&#" and not (ch == "#" and i and not line[i - 1].isspace()):
            return line[:i]
    return line


def _shell_script(block: str) -> str:
    """The block's variable assignments and proctor commands (nothing else: no installs, no servers)."""
    keep = []
    for line in _logical_lines(block.removeprefix("$ ")):
        line = line.removeprefix("$ ")
        if _ASSIGNMENT.match(line) and "$(" not in line and "`" not in line:
            keep.append(_first_command(line) if "#" in line else line)
        elif re.search(r"(^|\s|\$\(which )proctor(\)|\s)", line.split("#")[0]) and re.match(
                r"^(?:[A-Z_][A-Z0-9_]*=\S* )*(?:proctor|torchrun|accelerate)\b", line):
            keep.append(_first_command(line))
    return "\n".join(keep)


def doc_commands() -> list[tuple[str, list[str]]]:
    """(where, argv after `proctor`) for every proctor command in a fenced shell block of the pages, with the
    block's shell variables expanded by bash itself."""
    found = []
    for page in PAGES:
        text = page.read_text()
        for block in _BLOCK.findall(text):
            script = _shell_script(block)
            if not script:
                continue
            out = subprocess.run(["bash", "-c", _STUBS + script], check=False, capture_output=True, text=True, timeout=30,
                                 cwd=tempfile.gettempdir(), env={"PATH": os.environ["PATH"], "HOME": "/nonexistent"})
            lineno = text[: text.index(block)].count("\n") + 1
            for command in filter(None, out.stdout.split("\x01")):
                argv = command.split("\0")[:-1]
                found.append((f"{page.relative_to(ROOT)}:{lineno}: proctor {shlex.join(argv)}", argv))
    return found


def parse(argv: list[str]) -> str | None:
    """Parse `argv` as the CLI would, down to the leaf command, without running it: None, or what is wrong.
    (typer vendors click: its errors derive from `typer.TyperException`.)"""
    cmd = typer.main.get_command(app)
    name, parent = "proctor", None
    try:
        while True:
            ctx = cmd.make_context(name, list(argv), parent=parent, resilient_parsing=False)
            if not isinstance(cmd, TyperGroup):
                return None
            rest = [*ctx._protected_args, *ctx.args]
            if not rest:
                return f"{name}: no subcommand given"
            name, sub, argv = cmd.resolve_command(ctx, rest)
            cmd, parent = sub, ctx
    except typer.Exit:  # --help
        return None
    except typer.TyperException as err:
        return err.format_message()


COMMANDS = doc_commands()


def test_the_pages_have_commands():
    assert len(COMMANDS) >= 40, len(COMMANDS)


#: click's message for an `exists=True` path the page's earlier commands would have made
_MISSING = re.compile(r"(Directory|File|Path|dir|file|path) '(.+?)' does not exist")


@pytest.mark.parametrize(("where", "argv"), COMMANDS, ids=[w for w, _ in COMMANDS])
def test_documented_command_parses(where, argv, tmp_path, monkeypatch):
    """Parsed in an empty folder: a path the command needs is made (a folder, or an empty file) and the
    command parsed again, so that a folder an earlier command writes counts as there."""
    monkeypatch.chdir(tmp_path)
    for _ in range(8):
        error = parse(argv)
        missing = _MISSING.search(error or "")
        if not missing or Path(missing.group(2)).is_absolute():
            break
        path = tmp_path / missing.group(2)
        if missing.group(1).lower() == "file":
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
        else:
            path.mkdir(parents=True)
    assert error is None, f"{where}\n  {error}"


@pytest.mark.parametrize(("argv", "error"), [
    (["rollout", "--bogus"], "No such option: --bogus"),
    (["prm", "trainz"], "No such command 'trainz'"),
    (["rollout", "--samples", "x"], "Invalid value for '--samples'"),
])
def test_a_stale_command_is_caught(argv, error):
    assert error in (parse(argv) or "")

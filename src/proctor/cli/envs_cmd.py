"""`proctor envs` (list environments) and `proctor play ENV` (play one episode at the terminal)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from proctor.cli.options import fail, parse_env_args
from proctor.cli.root import app

console = Console()


def _task_counts(entry) -> str:
    from proctor.envs.arguments import accepted_arguments

    try:
        factory = entry.factory()
        required = accepted_arguments(factory)[1]
        if required:  # e.g. `stepwise`: its tasks are the problems of a file the user names
            return "[dim]tasks from " + ", ".join(f"`--env-arg {n}=...`" for n in required) + "[/dim]"
        env = factory()
        counts = ", ".join(f"{s}: {len(env.task_ids(s))}" for s in env.splits())
        env.close()
    except Exception as e:  # noqa: BLE001 - an extra or its data missing: say which, keep listing
        counts = f"[yellow]unavailable: {escape(str(e))}[/yellow]"
    return counts


@app.command("envs")
def list_envs(
    names: Annotated[list[str] | None, typer.Argument(
        help="also load these adapters (imports their package) to count their tasks")] = None,
    load_all: Annotated[bool, typer.Option("--all", help="load every adapter to count its tasks")] = False,
) -> None:
    """List the registered environments with their splits and task counts. Adapters of third-party envs are
    listed without importing them (their task counts: `proctor envs NAME` or `--all`)."""
    from proctor.envs import entries

    known = entries()
    unknown = sorted(set(names or ()) - set(known))
    if unknown:
        fail(f"unknown environment(s) {', '.join(unknown)}; known: {', '.join(known)}")
    table = Table(title="proctor environments")
    table.add_column("name", style="bold")
    table.add_column("splits: tasks")
    table.add_column("description")
    for name, entry in known.items():
        if callable(entry.target) or load_all or name in (names or ()):
            counts = _task_counts(entry)
        else:
            extra = f"extra '{entry.extra}'" if entry.extra else "adapter"
            counts = f"[dim]{extra}, not loaded (`proctor envs {name}` counts its tasks)[/dim]"
        table.add_row(name, counts, entry.description)
    console.print(table)


PLAY_HELP = ":actions lists admissible actions, :expert shows the oracle's move, :help, :quit"


@app.command("play")
def play(
    env_name: Annotated[str, typer.Argument(help="environment name (see `proctor envs`)")],
    split: Annotated[str, typer.Option(help="task split")] = "test",
    task: Annotated[str, typer.Option(help="task id, or an index into the split")] = "0",
    seed: Annotated[int, typer.Option(help="episode seed")] = 0,
    env_arg: Annotated[list[str], typer.Option("--env-arg", help="env constructor argument key=value")] = [],  # noqa: B006 - typer needs a literal default
) -> None:
    """Play one episode yourself: type actions at the prompt."""
    from proctor.envs import make

    try:
        env = make(env_name, expert_hints=True, **parse_env_args(env_arg))
        ids = env.task_ids(split)
        task_id = ids[int(task)] if task.isdigit() else task
        obs, info = env.reset(task_id, seed)
    except (ValueError, KeyError, ImportError, OSError, IndexError) as e:  # a missing extra or data file
        fail(e)
    help_text = getattr(env, "help_text", "")
    console.print(f"[bold]{env_name}[/bold] task {task_id} (seed {seed}); {PLAY_HELP}")
    if help_text:
        console.print(help_text, style="dim")
    console.print(f"[cyan]{obs}[/cyan]")
    total, result = 0.0, None
    admissible, expert = info.get("admissible_actions"), info.get("expert_action")
    while result is None or not result.done:
        try:
            action = input("> ").strip()
        except EOFError:
            console.print("(end of input)")
            break
        if action in (":quit", ":q"):
            break
        if action == ":help":
            console.print(help_text or PLAY_HELP)
            continue
        if action == ":actions":
            console.print(", ".join(admissible or []) or "(this env does not list actions)")
            continue
        if action == ":expert":
            console.print(str(expert))
            continue
        result = env.step(action)
        admissible, expert = result.admissible_actions, result.info.get("expert_action")
        total += result.reward
        style = "cyan" if result.valid else "red"
        console.print(f"[{style}]{result.observation}[/{style}]  (reward {result.reward:g})")
    won, truncated = (result.won, result.truncated) if result is not None else (False, False)
    outcome = "won" if won else ("out of steps" if truncated else "not won")
    console.print(f"[bold]{outcome}[/bold] after {len(env.actions)} steps, return {total:g}")
    env.close()

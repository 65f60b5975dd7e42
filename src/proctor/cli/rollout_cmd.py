"""`proctor rollout`: roll an agent out on an env's tasks into a trajectory store (resumable)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from proctor.cli import app
from proctor.cli.options import parse_env_args

console = Console()


@app.command("rollout")
def rollout_cmd(
    env: Annotated[str, typer.Option("--env", help="environment name (see `proctor envs`)")],
    out: Annotated[Path, typer.Option("--out", help="trajectory store directory (re-run to resume)")],
    agent: Annotated[str, typer.Option("--agent", help="hf | openai | expert | random")] = "random",
    model: Annotated[str | None, typer.Option("--model", help="model path or name (hf, openai)")] = None,
    split: Annotated[str, typer.Option("--split", help="task split")] = "test",
    tasks: Annotated[int | None, typer.Option("--tasks", help="first N tasks of the split (default all)")] = None,
    samples: Annotated[int, typer.Option("--samples", help="rollouts per task (K)")] = 1,
    batch: Annotated[int, typer.Option("--batch", help="envs stepped together (B)")] = 8,
    base_url: Annotated[str | None, typer.Option("--base-url", help="OpenAI-compatible server URL")] = None,
    expert_kind: Annotated[str, typer.Option("--expert-kind", help="expert policy for --agent expert")] = "oracle",
    max_steps: Annotated[int | None, typer.Option("--max-steps", help="env step limit")] = None,
    workers: Annotated[int, typer.Option("--workers", help="env worker processes (0: in-process)")] = 0,
    backend: Annotated[str, typer.Option("--backend", help="local | ray (env workers as Ray actors)")] = "local",
    seed: Annotated[int, typer.Option("--seed", help="run seed (episode seeds derive from it)")] = 0,
    temperature: Annotated[float | None, typer.Option("--temperature", help="sampling temperature")] = None,
    prompt_format: Annotated[str | None, typer.Option("--prompt-format", help="agent prompt format")] = None,
    step_timeout: Annotated[float, typer.Option("--step-timeout", help="seconds before a worker env counts as hung")] = 60.0,
    env_arg: Annotated[list[str], typer.Option("--env-arg", help="env constructor argument key=value")] = [],  # noqa: B006 - typer needs a literal default
    env_module: Annotated[str | None, typer.Option("--env-module", help="module to import first (registers your own envs)")] = None,
    summary_json: Annotated[Path | None, typer.Option("--summary-json", help="also write the summary here")] = None,
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="show the progress bar")] = True,
) -> None:
    """Roll out an agent on K samples of N tasks, B envs at a time; prints the summary table."""
    from proctor.rollout import run_rollout, summary_table

    logging.basicConfig(level=logging.WARNING)
    env_kwargs = parse_env_args(env_arg)
    if max_steps is not None:
        env_kwargs["max_steps"] = max_steps
    options = {"model": model, "base_url": base_url, "temperature": temperature, "prompt_format": prompt_format}
    if agent == "expert":
        options["expert_kind"] = expert_kind
    try:
        result = run_rollout(env, agent, out, split=split, tasks=tasks, samples=samples, batch=batch, seed=seed,
                             env_kwargs=env_kwargs, env_module=env_module, workers=workers, backend=backend,
                             step_timeout=step_timeout, progress=progress, agent_options=options)
    except (ValueError, KeyError, ImportError) as e:
        console.print(f"[red]error:[/red] {e}")
        raise typer.Exit(code=2) from None
    console.print(summary_table(result.summary, title=f"{env} / {split}: {result.store.root}"))
    if summary_json is not None:
        summary_json.write_text(json.dumps(result.summary.to_dict(), indent=2))

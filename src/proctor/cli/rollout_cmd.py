"""`proctor rollout`: roll an agent out on an env's tasks, or complete stored prefixes, into a trajectory
store (resumable)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Annotated, NoReturn

import typer

from proctor.agents.registry import agent_kinds
from proctor.cli.options import (
    agent_from_options,
    agent_options_given,
    console,
    err_console,
    fail,
    load_yaml_config,
    parse_key_values,
)
from proctor.cli.root import app

#: the exit status of a command stopped by Ctrl-C (128 + SIGINT, as a shell reports it)
INTERRUPTED = 130


def stopped(interrupt: KeyboardInterrupt) -> NoReturn:
    """Ctrl-C during a rollout: one line saying what was kept and that the same command resumes; exit 130."""
    kept = str(interrupt) or "interrupted: the finished episodes are kept"
    err_console.print(f"{kept}; run the same command again to resume", highlight=False, soft_wrap=True,
                      markup=False)
    raise typer.Exit(code=INTERRUPTED)


@app.command("rollout")
def rollout_cmd(
    env: Annotated[str | None, typer.Option("--env", help="environment name (see `proctor envs`)")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="trajectory store directory (re-run to resume)")] = None,
    agent: Annotated[str | None, typer.Option("--agent", help=f"agent kind: {' | '.join(agent_kinds())} "
                                              "(default: the config's, else random)")] = None,
    agent_arg: Annotated[list[str], typer.Option("--agent-arg", help="agent config field key=value (JSON values)")] = [],  # noqa: B006 - typer needs a literal default
    model: Annotated[str | None, typer.Option("--model", help="model path or name (hf, openai, choice)")] = None,
    base_url: Annotated[str | None, typer.Option("--base-url", help="OpenAI-compatible server URL (openai)")] = None,
    expert_kind: Annotated[str | None, typer.Option("--expert-kind", help="expert policy (expert, epsilon)")] = None,
    temperature: Annotated[float | None, typer.Option("--temperature", help="sampling temperature")] = None,
    prompt_format: Annotated[str | None, typer.Option("--prompt-format", help="agent prompt format")] = None,
    split: Annotated[str | None, typer.Option("--split", help="task split (default: test)")] = None,
    tasks: Annotated[int | None, typer.Option("--tasks", help="first N tasks of the split (default all)")] = None,
    samples: Annotated[int | None, typer.Option("--samples", help="rollouts per task (K) (default: 1)")] = None,
    batch: Annotated[int | None, typer.Option("--batch", help="envs stepped together (B; lockstep engine) "
                                              "(default: 8)")] = None,
    engine: Annotated[str | None, typer.Option("--engine", help="auto (async for a served agent) | lockstep (one "
                                               "agent call per step for B envs) | async (each episode on its own) "
                                               "(default: auto)")] = None,
    concurrency: Annotated[int | None, typer.Option(
        "--concurrency", help="async engine: episodes in flight (default: the agent's concurrency, else 32)")] = None,
    max_steps: Annotated[int | None, typer.Option("--max-steps", help="env step limit")] = None,
    workers: Annotated[int | None, typer.Option("--workers", help="env worker processes (0: in-process) "
                                                "(default: 0)")] = None,
    backend: Annotated[str | None, typer.Option("--backend", help="local | ray (env workers as Ray actors) "
                                                "(default: local)")] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="run seed (episode seeds derive from it) "
                                             "(default: 0)")] = None,
    step_timeout: Annotated[float | None, typer.Option("--step-timeout", help="seconds before a worker env's reset "
                                                       "or step counts as hung (default: 60)")] = None,
    env_arg: Annotated[list[str], typer.Option("--env-arg", help="env constructor argument key=value")] = [],  # noqa: B006
    env_module: Annotated[str | None, typer.Option("--env-module", help="module (my_env) or .py file (path/to/my_env.py) to import first: it registers your own envs")] = None,
    from_store: Annotated[Path | None, typer.Option("--from", help="complete the prefixes of this store's trajectories (with --config: the config's start, from this store)")] = None,
    prefixes: Annotated[str | None, typer.Option("--prefixes", help="with --from: steps (k=1..T) | states (k=0..T-1) | k,k,... (default: the config's, else steps)")] = None,
    completions: Annotated[int | None, typer.Option("--completions", help="with --from: completions per prefix (default: the config's, else 4)")] = None,
    retry_failed: Annotated[bool, typer.Option("--retry-failed", help="re-run stored episodes that ended in env/agent errors")] = False,
    config: Annotated[Path | None, typer.Option("--config", help="a RolloutConfig YAML file (options given here override it)")] = None,
    summary_json: Annotated[Path | None, typer.Option("--summary-json", help="also write the summary here")] = None,
    progress: Annotated[bool | None, typer.Option("--progress/--no-progress", help="show progress (default: "
                                                  "progress)")] = None,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="replace what --out holds of another run (without "
                                            "it, the same run resumes and another is refused)")] = False,
) -> None:
    """Roll out an agent on K samples of N tasks, B envs at a time (or K completions of every prefix of a
    stored store with --from); prints the summary table. Exits non-zero when an episode ended in env_error (the
    same command again retries those), and says what was kept when stopped with Ctrl-C. With --config, the
    options given here override the file's fields (agent options without --agent: those of the file's agent)."""
    from pydantic import ValidationError

    from proctor.rollout import AgentFailing, EnvFailures, RolloutConfig, run_rollout, summary_table

    logging.basicConfig(level=logging.WARNING)
    data = load_yaml_config(config) if config else {}
    env_kwargs = {**data.get("env_kwargs", {}), **parse_key_values(env_arg, "--env-arg")}
    if max_steps is not None:
        env_kwargs["max_steps"] = max_steps
    given = {"env": env, "out": out, "env_module": env_module, "split": split, "tasks": tasks, "samples": samples,
             "batch": batch, "engine": engine, "concurrency": concurrency, "seed": seed, "workers": workers,
             "backend": backend, "step_timeout": step_timeout, "retry_failed": retry_failed or None,
             "progress": progress}
    data.update({k: v for k, v in given.items() if v is not None})  # options given here override the file
    data["env_kwargs"] = env_kwargs
    if data.get("env_module"):  # before validation: the module may register the env's experts
        from proctor.envs.registry import import_env_module

        try:
            import_env_module(data["env_module"])
        except ImportError as e:
            fail(f"--env-module {data['env_module']}: {e}")
    if "agent" not in data or agent is not None or \
            agent_options_given(agent_arg, model, base_url, expert_kind, temperature, prompt_format):
        data["agent"] = agent_from_options(agent, agent_arg, model=model, base_url=base_url, expert_kind=expert_kind,
                                           temperature=temperature, prompt_format=prompt_format,
                                           seed=data.get("seed", 0), config_agent=data.get("agent"))
    if from_store is not None:  # the config's start (its candidates, states per source...) from another store
        start = {**(data.get("start") or {}), "source": from_store}
        if prefixes is not None:
            start["prefix_lengths"] = prefixes if prefixes in ("steps", "states") else \
                [int(k) for k in prefixes.split(",")]
        if completions is not None:
            start["completions"] = completions
        data["start"] = start
    try:
        cfg = RolloutConfig.model_validate(data)
        result = run_rollout(cfg, overwrite=overwrite)
    except ValidationError as e:
        fail(e, where=str(config) if config else "options")
    except (ValueError, KeyError, ImportError, FileNotFoundError, AgentFailing, EnvFailures) as e:
        fail(e)
    except KeyboardInterrupt as e:
        stopped(e)
    console.print(summary_table(result.summary, title=f"{cfg.env} / {cfg.split}: {result.store.root}"))
    if summary_json is not None:
        summary_json.write_text(json.dumps(result.summary.to_dict(), indent=2))

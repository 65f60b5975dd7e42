"""`proctor eval`: evaluate an agent (any registered kind, search included) on a split, optionally sweeping
N; `proctor compare`: evaluations side by side with a paired test."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from proctor.agents.registry import agent_kinds
from proctor.cli.options import (
    agent_from_options,
    agent_options_given,
    console,
    fail,
    load_yaml_config,
    parse_key_values,
)
from proctor.cli.prm_cmd import DEVICE_HELP, DTYPE_HELP
from proctor.cli.rollout_cmd import stopped
from proctor.cli.root import app


def _pct(rate: float, ci: list[float]) -> str:
    return f"{100 * rate:.1f}% [{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"


def _summary_tables(s: dict[str, Any]) -> list[Table]:
    head = Table(title=f"{s['policy']} on {s['env']} / {s['split']}", show_header=True)
    for col in ("episodes", "success (95% CI)", "mean steps", "invalid", "mean PRM", "env steps"):
        head.add_column(col, justify="right")
    prm = s.get("prm")
    head.add_row(str(s["episodes"]), _pct(s["success_rate"], s["success_ci95"]), f"{s['mean_steps']:.2f}",
                 f"{100 * s['invalid_action_rate']:.1f}%", f"{prm['mean_step_score']:.3f}" if prm else "—",
                 str(s["budget"].get("env_steps", "—")))
    types = Table(title="by task type", show_header=True)
    types.add_column("task type", no_wrap=True)
    for col in ("episodes", "success (95% CI)", "mean steps"):
        types.add_column(col, justify="right")
    for r in s["by_task_type"]:
        types.add_row(r["task_type"], str(r["episodes"]), _pct(r["success_rate"], r["success_ci95"]),
                      f"{r['mean_steps']:.2f}")
    ends = Table(title="terminations", show_header=True)
    ends.add_column("termination")
    ends.add_column("episodes", justify="right")
    for k, v in s["terminations"].items():
        ends.add_row(k, str(v))
    return [head, types, ends]


@app.command("eval")
def eval_cmd(
    env: Annotated[str | None, typer.Option("--env", help="environment name (see `proctor envs`)")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="output folder (re-run to resume)")] = None,
    agent: Annotated[str | None, typer.Option("--agent", help=f"agent kind: {' | '.join(agent_kinds())}")] = None,
    agent_arg: Annotated[list[str], typer.Option("--agent-arg", help="agent config field key=value (JSON values)")] = [],  # noqa: B006 - typer needs a literal default
    model: Annotated[str | None, typer.Option("--model", help="model path or name (hf, openai, choice)")] = None,
    expert_kind: Annotated[str | None, typer.Option("--expert-kind", help="expert policy (expert, epsilon)")] = None,
    temperature: Annotated[float | None, typer.Option("--temperature", help="sampling temperature")] = None,
    name: Annotated[str | None, typer.Option("--name", help="the evaluation's name in tables and the report "
                                             "(default: the --out folder's name)")] = None,
    search: Annotated[str | None, typer.Option("--search", help="a search method instead of the agent alone "
                                               "(beam | dvts | step-best-of-n | trajectory-best-of-n); the agent "
                                               "given is its policy")] = None,
    search_arg: Annotated[list[str], typer.Option("--search-arg", help="search config field key=value (JSON "
                                                  "values), e.g. prm=runs/prm beams=4")] = [],  # noqa: B006
    n: Annotated[str | None, typer.Option("--n", help="sweep N (the agent's or search's field `n`): e.g. 1,2,4,8")] = None,
    prm: Annotated[Path | None, typer.Option("--prm", help="score every step with this PRM folder")] = None,
    device: Annotated[str | None, typer.Option("--device", help="where --prm and the agent's or search's models run "
                                               f"unless their config names one: {DEVICE_HELP} (default: auto)")
                      ] = None,
    dtype: Annotated[str | None, typer.Option("--dtype", help=f"their inference dtype: {DTYPE_HELP} "
                                              "(default: auto)")] = None,
    split: Annotated[str | None, typer.Option("--split", help="task split (default: test)")] = None,
    tasks: Annotated[int | None, typer.Option("--tasks", help="first N tasks of the split (default all)")] = None,
    samples: Annotated[int | None, typer.Option("--samples", help="episodes per task (default: 1)")] = None,
    batch: Annotated[int | None, typer.Option("--batch", help="envs stepped together (default: 8)")] = None,
    max_steps: Annotated[int | None, typer.Option("--max-steps", help="env step limit")] = None,
    workers: Annotated[int | None, typer.Option("--workers", help="env worker processes (default: 0, in-process)")] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="run seed (episode seeds derive from it) (default: 0)")] = None,
    env_arg: Annotated[list[str], typer.Option("--env-arg", help="env constructor argument key=value")] = [],  # noqa: B006
    env_module: Annotated[str | None, typer.Option("--env-module", help="module (my_env) or .py file (path/to/my_env.py) to import first: it registers your own envs")] = None,
    config: Annotated[Path | None, typer.Option("--config", help="an EvalConfig YAML file (options override it)")] = None,
    progress: Annotated[bool | None, typer.Option("--progress/--no-progress", help="show progress (default: "
                                                  "progress)")] = None,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="start over in an --out that holds an evaluation "
                                            "(without it, the same evaluation resumes and one of another agent, "
                                            "search or PRM is refused)")] = False,
) -> None:
    """Evaluate an agent (or a search method over it: `--search beam --search-arg prm=PRM`) on a split: success
    with its 95% Wilson interval, mean PRM score, steps, invalid actions, a per-task-type table, terminations
    and budgets, into OUT/summary.json and summary.csv (crashed episodes count as failures and are listed).
    `--n 1,2,4` sweeps N with a success-vs-N plot. An episode that ended in env_error fails the evaluation (its
    summary is still written; the same command again retries those episodes)."""
    from pydantic import ValidationError

    from proctor.agents.base import AgentError
    from proctor.evaluation import EvalConfig, run_eval
    from proctor.rollout import AgentFailing, EnvFailures

    logging.basicConfig(level=logging.WARNING)
    data = load_yaml_config(config) if config else {}
    env_kwargs = {**data.get("env_kwargs", {}), **parse_key_values(env_arg, "--env-arg")}
    if max_steps is not None:
        env_kwargs["max_steps"] = max_steps
    given = {"env": env, "out": out, "name": name, "prm": prm, "env_module": env_module, "split": split,
             "tasks": tasks, "samples": samples, "batch": batch, "seed": seed, "workers": workers,
             "device": device, "dtype": dtype, "progress": progress}
    data.update({k: v for k, v in given.items() if v is not None})  # options given here override the file
    data["env_kwargs"] = env_kwargs
    if search is not None or search_arg:
        data["search"] = {**data.get("search", {}), **({"method": search} if search else {}),
                          **parse_key_values(search_arg, "--search-arg")}
    built, config_agent = None, data.get("agent")
    if isinstance(data.get("search"), dict):
        config_agent = data["search"].get("agent", config_agent)  # the search's policy
    if agent is not None or agent_options_given(agent_arg, model, expert_kind, temperature) or \
            ("agent" not in data and "search" not in data):
        built = agent_from_options(agent, agent_arg, model=model, expert_kind=expert_kind, temperature=temperature,
                                   seed=data.get("seed", 0), config_agent=config_agent)
    if built is not None and "search" in data:
        data["search"]["agent"] = built  # the search's policy
        data.pop("agent", None)
    elif built is not None:
        data["agent"] = built
    if n is not None:
        try:
            data["ns"] = [int(x) for x in n.split(",") if x.strip()]
        except ValueError:
            fail(f"--n: expected comma-separated integers such as 1,2,4,8, got {n!r}")
    if data.get("env_module"):
        from proctor.envs.registry import import_env_module

        try:
            import_env_module(data["env_module"])
        except ImportError as e:
            fail(f"--env-module {data['env_module']}: {e}")
    try:
        cfg = EvalConfig.model_validate(data)
        result = run_eval(cfg, overwrite=overwrite)
    except ValidationError as e:
        fail(e, where=str(config) if config else "options")
    except (ValueError, KeyError, ImportError, FileNotFoundError, AgentFailing, AgentError, EnvFailures) as e:
        fail(e)
    except KeyboardInterrupt as e:
        stopped(e)
    for s in result.summaries:
        for table in _summary_tables(s):
            console.print(table)
        if s["crashed"] or s["missing"]:
            console.print(f"[red]{len(s['crashed'])} crashed and {len(s['missing'])} missing episodes count as "
                          f"failures[/red] (listed in {cfg.out}/…/summary.json)")
    if result.sweep is not None:
        sweep = Table(title=f"{result.sweep['policy']}: success vs N", show_header=True)
        for col in ("N", "episodes", "success (95% CI)", "mean steps", "env steps"):
            sweep.add_column(col, justify="right")
        for r in result.sweep["rows"]:
            sweep.add_row(str(r["n"]), str(r["episodes"]), _pct(r["success_rate"], r["success_ci95"]),
                          f"{r['mean_steps']:.2f}", str(r["budget"].get("env_steps", "—")))
        console.print(sweep)
    if result.plot is not None:
        console.print(f"success vs N: {result.plot}")
    console.print(f"wrote {cfg.out}")


@app.command("compare")
def compare_cmd(
    dirs: Annotated[list[Path], typer.Argument(help="`proctor eval` output folders; the first is the baseline")],
    json_out: Annotated[Path | None, typer.Option("--json", help="also write the comparison here")] = None,
    resamples: Annotated[int, typer.Option("--resamples", help="bootstrap resamples")] = 10_000,
    seed: Annotated[int, typer.Option("--seed", help="bootstrap seed")] = 0,
) -> None:
    """Evaluations side by side, labelled by their names (`proctor eval --name`, else the folder's); each is
    paired with the first, the baseline, on the (task, sample) keys both ran (McNemar's exact test, and a per-task
    bootstrap interval of the difference in success)."""
    from proctor.evaluation.compare import compare
    from proctor.evaluation.compare_table import comparison_tables

    try:
        result = compare(dirs, resamples=resamples, seed=seed)
    except (ValueError, FileNotFoundError) as e:
        fail(e)
    for table in comparison_tables(result):
        console.print(table)
    if json_out is not None:
        json_out.write_text(json.dumps(result.to_dict(), indent=2))

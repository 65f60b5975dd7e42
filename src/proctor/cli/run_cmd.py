"""`proctor run CONFIG.yaml`: the iterated AgentPRM loop (`proctor.pipeline`), resumable, with lineage."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from proctor.cli.config_kinds import wrong_command
from proctor.cli.options import console, fail, load_yaml_config
from proctor.cli.root import app

T = TypeVar("T")


def print_stage(stage: str, record: dict[str, Any]) -> None:
    """One line per finished stage; the evaluation rows as they come."""
    if stage == "eval":
        lo, hi = record.get("success_ci95", [0, 0])
        console.print(f"[bold]eval[/] iteration {record['iteration']}  {record['policy']:<28} success "
                      f"{record.get('success_rate', 0):6.1%} [{lo:.1%}, {hi:.1%}]  mean steps "
                      f"{record.get('mean_steps', 0):.1f}  ({record['dir']})", highlight=False)
    elif stage == "monitor":
        console.print(f"[bold]monitor[/] iteration {record['iteration']}  success {record['success_rate']:.1%}  PRM "
                      f"score of its actions {record['prm_mean_relabelled']:.3f}, MC re-label "
                      f"{record['mc_q_mean']:.3f} ({record['relabelled']} pairs): drift {record['drift']:+.3f}",
                      highlight=False)
    elif stage == "improve" and "skipped" in record.get("result", {}):
        console.print(f"[bold yellow]improve[/] iteration {record['iteration']} skipped, the next policy is this one: "
                      f"{record['result']['skipped']}", highlight=False)
    elif "reused_from" in record:
        console.print(f"[bold]{stage}[/] reused from {record['reused_from']} (took {record.get('seconds', 0):.1f} s "
                      "there)", highlight=False)
    else:
        console.print(f"[bold]{stage}[/] done in {record.get('seconds', 0):.1f} s", highlight=False)


def print_plan(cfg: Any) -> None:
    """`--dry-run`: the run's settings, then each stage (`proctor.pipeline.run.plan_stages`: the loop's own stages)
    with the command that runs it; what the run would meet on this machine (the env's data, the model folder,
    stages already done, or a run of another config in the folder) as notes."""
    from proctor.pipeline.manifest import MANIFEST, config_mismatch
    from proctor.pipeline.run import Pipeline
    from proctor.pipeline.stage import split_sizes

    notes: list[str] = []
    try:
        sizes: dict[str, int] | None = split_sizes(cfg.env, cfg.env_kwargs)
    except Exception as e:  # noqa: BLE001 - any failure to build the env is reported, not raised
        sizes = None
        notes.append(f"env {cfg.env!r} could not be built here, so task counts are not shown: "
                     f"{str(e).splitlines()[0] if str(e) else type(e).__name__}")
    if cfg.model.path is not None and "/" in cfg.model.path and not Path(cfg.model.path).exists():
        notes.append(f"model.path {cfg.model.path!r} does not exist here (a hub name is fetched when the run starts)")
    done: dict[str, Any] = {}
    if (cfg.out / MANIFEST).is_file():
        import json

        recorded = json.loads((cfg.out / MANIFEST).read_text())
        mismatch = config_mismatch(cfg.out / MANIFEST, recorded.get("config"), cfg.identity(),
                                   type(cfg).recorded_identity)
        if mismatch is None:
            done = recorded.get("stages", {})
        else:
            notes.append(f"no stage is done for this config, and `proctor run` stops at once: {mismatch}")
    kwargs = ", ".join(f"{k}={v}" for k, v in cfg.env_kwargs.items())
    console.print(f"[bold]proctor run[/] {cfg.out}: env {cfg.env}({kwargs}), seed {cfg.seed}, workers {cfg.workers}, "
                  f"{cfg.iterations} iteration(s)", highlight=False, soft_wrap=True)
    launch = cfg.launch
    if launch.processes > 1 or launch.nodes > 1:
        console.print(f"training stages ({', '.join(launch.stages)}): {launch.processes} process(es) on each of "
                      f"{launch.nodes} node(s) under {launch.launcher}", highlight=False, soft_wrap=True)
    plan = cfg.devices
    if plan.generation is not None or plan.training is not None:
        console.print(f"devices: the vLLM server on GPUs {plan.generation or 'all'}, training on GPUs "
                      f"{plan.training or 'all'}" + ("" if plan.apart else " (the server stopped while a stage "
                                                      "trains)"), highlight=False, soft_wrap=True)
    pipeline = Pipeline(cfg, sizes=sizes)
    stages = pipeline.plan()
    width = max(len(stage.key) for stage in stages)
    for stage in stages:
        mark = "  (done)" if stage.key in done else ""
        console.print(stage.line(width) + mark, highlight=False, soft_wrap=True, markup=False)
        console.print(f"{'':<{width}}   $ {pipeline.command(stage)}", highlight=False, soft_wrap=True, markup=False)
    for note in notes:
        console.print(f"[yellow]note:[/] {note}", highlight=False, soft_wrap=True)
    console.print(f"{len(stages)} stages; nothing was run (--dry-run)", highlight=False)


def one_line_errors(run: Callable[[], T]) -> T:
    """`run()`, with what a stage raises for the user to act on (a bad config or input, a missing extra, a failed
    env, agent or rank) as one line, and Ctrl-C as one line saying that the same command resumes; `proctor --debug
    run ...` shows the traceback."""
    from proctor.cli.errors import debug_enabled
    from proctor.cli.rollout_cmd import stopped
    from proctor.pipeline.launch import RankFailure
    from proctor.rollout.engine import AgentFailing
    from proctor.rollout.failures import EnvFailures
    from proctor.serving.process import ServerExited
    from proctor.serving.vllm_server import VLLMServerError

    try:
        return run()
    except (ValueError, FileNotFoundError, ImportError, RankFailure, EnvFailures, AgentFailing, ServerExited,
            VLLMServerError) as e:
        if debug_enabled():
            raise
        fail(e)
    except KeyboardInterrupt as e:
        stopped(e)


@app.command("run")
def run_cmd(
    config: Annotated[Path, typer.Argument(help="the loop's YAML config, e.g. "
                                           "examples/pipeline/quickstart-household.yaml")],
    out: Annotated[Path | None, typer.Option("--out", help="run directory (overrides the config's `out`)")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="validate the config and print its stages (what each "
                                          "runs, with which model, into which folder) without running any")] = False,
    reuse: Annotated[Path | None, typer.Option("--reuse", help="an earlier run's folder: its stages whose config "
                                               "and inputs this run shares are copied from there instead of "
                                               "run (e.g. demos, SFT and rollouts when only the PRM changed)")]
    = None,
    stage: Annotated[str | None, typer.Option("--stage", help="run only this stage (a key `--dry-run` lists, e.g. "
                                              "iter-0/sft) and record it in the run's manifest; its inputs must "
                                              "exist. Under torchrun / accelerate launch every rank runs it")] = None,
    result_file: Annotated[Path | None, typer.Option("--result-file", hidden=True, help="(set by the loop when it "
                                                     "launches a stage) write the stage's result here instead of "
                                                     "recording it")] = None,
) -> None:
    """Run (or resume) the iterated loop: demos → SFT → (rollouts → targets → PRM → evaluations → monitor →
    improvement by online DPO or best-of-N distillation) × K; writes summary.json and report.html into the run
    directory."""
    from pydantic import ValidationError

    from proctor.pipeline import PipelineConfig, run_pipeline
    from proctor.pipeline.table import result_tables

    data = load_yaml_config(config)
    if out is not None:
        data["out"] = str(out)
    try:
        cfg = PipelineConfig.model_validate(data)
    except ValidationError as e:
        fail(wrong_command(config, data, PipelineConfig) or e, where=str(config))
    if dry_run:
        print_plan(cfg)
        if reuse is not None:
            console.print(f"[yellow]note:[/] --reuse {reuse}: which stages are copied is decided as each stage "
                          "starts (its config is built then)", highlight=False, soft_wrap=True)
        return
    if stage is not None:
        from proctor.pipeline.run import run_stage

        record = one_line_errors(lambda: run_stage(cfg, stage, result_file))
        if result_file is None:
            print_stage(stage, record)
        return
    summary = one_line_errors(lambda: run_pipeline(cfg, report=print_stage, reuse=reuse))
    for table in result_tables(summary):
        console.print(table)
    from proctor.evaluation.report import build_report

    console.print(f"report: {build_report(cfg.out)}", highlight=False)

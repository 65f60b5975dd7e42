"""`run_eval(EvalConfig)`: roll an agent config out (or run a search method) on a split's tasks and write what
it scored.

    out/summary.json, summary.csv      the evaluation (`proctor.evaluation.summary.eval_summary`)
    out/trajectories/                  the rollout's trajectory store (resumable)
    out/scored/                        with `prm`: the same trajectories with `Step.scores[score_key]` (of
                                       that one PRM: `proctor.evaluation.scoring.claim_scores`)

With `ns` (a sweep), each N gets its own folder `out/n<N>/` laid out as above, and `out/sweep.json`,
`out/sweep.csv` and `out/success_vs_n.png` hold success against N.

An episode that ended in `env_error` fails the evaluation (`proctor.rollout.failures`): its summary is written,
listing it under `crashed`, and then `EnvFailures` is raised; the same evaluation again retries those episodes.
Into a folder that holds an evaluation, the same one resumes, one of another agent, search or PRM is refused in one
line naming the field that differs (`proctor.outputs`), and `overwrite` starts it over.
"""

from __future__ import annotations

import csv
import io
import json
import re
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from proctor.agents.registry import AgentSpec, agent_config
from proctor.envs.registry import check_spec, import_env_module
from proctor.evaluation.config import EvalConfig, dump_agent
from proctor.evaluation.loading import SWEEP_KIND
from proctor.evaluation.plots import success_vs_n_png
from proctor.evaluation.scoring import claim_scores, score_store
from proctor.evaluation.summary import SUMMARY_KIND, SUMMARY_VERSION, eval_summary, summary_csv
from proctor.outputs import remove_outputs
from proctor.rollout import EnvFailures, RolloutConfig, run_rollout
from proctor.rollout.failures import env_failures
from proctor.search.registry import SearchSpec, search_config
from proctor.search.run import SearchRunConfig, run_search
from proctor.store import TrajectoryStore

STORE_DIR, SCORED_DIR = "trajectories", "scored"
#: what a sweep writes into the evaluation's folder, besides its N folders
SWEEP_FILES = ("sweep.json", "sweep.csv", "success_vs_n.png")


@dataclass
class EvalResult:
    out: Path
    summaries: list[dict[str, Any]] = field(default_factory=list)
    sweep: dict[str, Any] | None = None
    plot: Path | None = None

    @property
    def summary(self) -> dict[str, Any]:
        """The summary of a single evaluation (the last N of a sweep)."""
        return self.summaries[-1]


def run_eval(cfg: EvalConfig, overwrite: bool = False) -> EvalResult:
    """Run (or resume) the evaluation `cfg` describes; see the module docstring for what it writes and when it is
    refused. `overwrite`: start it over (what `cfg.out` holds of an evaluation is removed first)."""
    if cfg.env_module:
        import_env_module(cfg.env_module)
    check_spec(cfg.env, cfg.env_kwargs)  # an unknown env, a missing extra, a bad argument: before any work
    if overwrite:
        remove_outputs(eval_outputs(cfg.out))
    cfg.out.mkdir(parents=True, exist_ok=True)
    base, remake = dump_agent(cfg.method), search_config if cfg.search is not None else agent_config
    runs = [(cfg.method, cfg.out, cfg.policy_name(), None)] if cfg.ns is None else \
        [(remake({**base, "n": n}), cfg.out / f"n{n}", f"{cfg.policy_name()} N={n}", n) for n in cfg.ns]
    result = EvalResult(cfg.out)
    with ExitStack() as stack:  # every PRM-scores store is claimed before any episode runs
        scored = [stack.enter_context(claim_scores(out / SCORED_DIR, cfg.prm, cfg.score_key))
                  if cfg.prm is not None else None for _, out, _, _ in runs]
        for (method, out, name, n), store in zip(runs, scored, strict=True):
            result.summaries.append(_evaluate(cfg, method, out, name, n, store))
    if cfg.ns is None:
        return result
    rows = [{"n": s["n"], "policy": s["policy"], "dir": f"n{s['n']}", "episodes": s["episodes"],
             "successes": s["successes"], "success_rate": s["success_rate"], "success_ci95": s["success_ci95"],
             "mean_steps": s["mean_steps"], "budget": s["budget"]} for s in result.summaries]
    result.sweep = {"kind": SWEEP_KIND, "version": SUMMARY_VERSION, "policy": cfg.policy_name(), "env": cfg.env,
                    "split": cfg.split, "search" if cfg.search is not None else "agent": base, "rows": rows}
    (cfg.out / "sweep.json").write_text(json.dumps(result.sweep, indent=2))
    (cfg.out / "sweep.csv").write_text(_sweep_csv(rows))
    result.plot = success_vs_n_png(rows, cfg.out / "success_vs_n.png",
                                   f"{cfg.policy_name()} on {cfg.env}/{cfg.split}: success vs N")
    return result


def eval_outputs(out: Path) -> list[Path]:
    """What `out` holds of an evaluation: its stores and summaries, a sweep's files and its N folders."""
    names = [STORE_DIR, SCORED_DIR, "summary.json", "summary.csv", *SWEEP_FILES]
    return [out / name for name in names if (out / name).exists()] + \
        sorted(p for p in out.glob("n*") if p.is_dir() and re.fullmatch(r"n\d+", p.name))


def _evaluate(cfg: EvalConfig, method: AgentSpec | SearchSpec, out: Path, name: str, n: int | None,
              scored: TrajectoryStore | None) -> dict[str, Any]:
    started = time.monotonic()
    where = {"env": cfg.env, "env_kwargs": cfg.env_kwargs, "env_module": cfg.env_module, "out": out / STORE_DIR,
             "split": cfg.split, "tasks": cfg.tasks, "samples": cfg.samples, "batch": cfg.batch, "seed": cfg.seed,
             "workers": cfg.workers, "step_timeout": cfg.step_timeout, "progress": cfg.progress}
    if isinstance(method, SearchSpec):
        result = run_search(SearchRunConfig(**where, search=method))
    else:
        try:
            result = run_rollout(RolloutConfig(**where, agent=method, retry_failed=cfg.retry_failed))
        except EnvFailures as e:  # raised again below, after the summary is written
            result = e.result
    wanted = {(t, k) for t in result.task_ids for k in range(cfg.samples)}
    try:
        trajs = sorted((t for t in result.store.load() if t.key in wanted), key=lambda t: t.key)
    finally:
        result.store.close()
    unscored: list[str] = []
    store, key = STORE_DIR, None
    if scored is not None:
        trajs, unscored = score_store(trajs, cfg.prm, scored, cfg.score_key, cfg.prm_batch_size, cfg.progress,
                                      cfg.device, cfg.dtype, server=cfg.prm_server)
        store, key = SCORED_DIR, cfg.score_key
    summary = {
        "kind": SUMMARY_KIND, "version": SUMMARY_VERSION, "policy": name, "n": n, "env": cfg.env,
        "env_kwargs": cfg.env_kwargs, "split": cfg.split, "tasks": len(result.task_ids), "task_ids": result.task_ids, "samples": cfg.samples,
        "seed": cfg.seed, "search" if isinstance(method, SearchSpec) else "agent": dump_agent(method),
        "store": store, "score_key": key,
        "prm_path": str(cfg.prm) if cfg.prm else None, "unscored": unscored,
        **eval_summary(trajs, wanted, key),
        "wall_s": round(time.monotonic() - started, 3),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    (out / "summary.csv").write_text(summary_csv(summary))
    failures = env_failures(trajs, out / STORE_DIR)
    if failures is not None:
        raise failures
    return summary


def _sweep_csv(rows: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["n", "policy", "episodes", "successes", "success_rate", "ci95_low", "ci95_high", "mean_steps",
                "env_steps"])
    for r in rows:
        w.writerow([r["n"], r["policy"], r["episodes"], r["successes"], f"{r['success_rate']:.4f}",
                    f"{r['success_ci95'][0]:.4f}", f"{r['success_ci95'][1]:.4f}", f"{r['mean_steps']:.3f}",
                    r["budget"].get("env_steps", "")])
    return buf.getvalue()

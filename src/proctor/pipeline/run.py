"""`run_pipeline(PipelineConfig)`: the iterated AgentPRM loop, one stage function per step, each recorded
in `manifest.json` (lineage, resume at stage granularity).

Layout of the run directory:

    model/                      the starting model (built tiny, when asked)
    demos/                      expert demonstrations (trajectory store)
    iter-<k>/policy/            π_k (iteration 0: SFT on the demos; then online DPO)
    iter-<k>/rollouts/          π_k on the train tasks        (k < iterations, or k = 0)
    iter-<k>/targets/           per-step targets (+ trajectories/ with Step.targets filled)
    iter-<k>/candidates/        (prm_candidates) candidate actions at π_k's states, completed by π_k
    iter-<k>/candidate-pairs/   (prm_candidates) their Bradley–Terry pairs
    iter-<k>/prm/               Q_k, initialised from π_k
    iter-<k>/eval/<name>/       each evaluation (summary.json, trajectory store)
    iter-<k>/monitor/           (monitor) MC re-labels of the evaluated policy's actions
    iter-<k>/improve/           online DPO of π_k against Q_k (→ iter-<k+1>/policy)
    monitor.png                 (monitor) success, PRM score and MC re-labels by iteration
    summary.json                the results table of every evaluation, by iteration
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from proctor.pipeline.config import EvalEntry, PipelineConfig, TaskSection
from proctor.pipeline.manifest import Manifest
from proctor.prm.likelihood import LikelihoodPRMConfig
from proctor.rl.bon_distill import BonDistillConfig
from proctor.rl.online_dpo import OnlineDPOConfig

log = logging.getLogger(__name__)

Report = Callable[[str, dict[str, Any]], None]


def fill(value: Any, policy: Path, prm: Path | None) -> Any:
    """`value` with the placeholders `$policy` / `$prm` replaced by the iteration's folders."""
    if isinstance(value, dict):
        return {k: fill(v, policy, prm) for k, v in value.items()}
    if isinstance(value, list):
        return [fill(v, policy, prm) for v in value]
    if value == "$policy":
        return str(policy)
    if value == "$prm":
        if prm is None:
            raise ValueError("an evaluation names $prm, but no PRM is trained before it")
        return str(prm)
    return value


def fresh_stage(work: Path, nxt: Path) -> None:
    """Start a policy-improvement stage over: remove an interrupted attempt's `work` folder, make `nxt`'s parent."""
    if work.exists():
        shutil.rmtree(work)
    nxt.parent.mkdir(parents=True, exist_ok=True)


class Pipeline:
    """The loop of `run_pipeline`, stage by stage (see module docstring)."""

    def __init__(self, cfg: PipelineConfig, report: Report | None = None, reuse: Path | None = None):
        self.cfg = cfg
        self.out = cfg.out
        self.report = report or (lambda stage, payload: None)
        self.manifest = Manifest(self.out, cfg.model_dump(mode="json"), cfg.seed, env=cfg.env, reuse=reuse)
        self.results: list[dict[str, Any]] = []
        self.model_dir: str | None = None  # the starting model, once `model()` has run
        self._split_ids: dict[str, set[str]] = {}
        self.served = served_generation(cfg) if cfg.generation.engine == "vllm" else None

    # -- generation by a served policy (`generation: {engine: vllm}`) ------------------------------------
    def agent(self, value: Any, policy: Path, prm: Path | None = None) -> Any:
        """`value` with `$policy`/`$prm` filled (`fill`); with a served policy, every hf or choice agent of the
        iteration's policy becomes its served counterpart (`ServedPolicy.agent_config`)."""
        filled = fill(value, policy, prm)
        return filled if self.served is None else served_agents(filled, str(policy), self.served)

    def serving(self, policy: Path, run: Callable[[], Any]) -> Callable[[], Any]:
        """`run`, with the served policy following `policy` first (nothing without a served policy)."""
        if self.served is None:
            return run

        def serve_then_run() -> Any:
            self.served.follow(str(policy))
            return run()

        return serve_then_run

    def training(self, run: Callable[[], Any]) -> Callable[[], Any]:
        """`run`, with the vLLM server stopped first (training needs the device's memory; the next stage that
        samples restarts it)."""
        if self.served is None:
            return run

        def stop_then_run() -> Any:
            self.served.stop()
            return run()

        return stop_then_run

    def resolve_tasks(self, section: TaskSection) -> int | list[str] | None:
        """The section's tasks as its stage's config takes them (`TaskSection.task_ids`); listed ids (a panel)
        must be tasks of the section's split."""
        tasks = section.task_ids()
        if isinstance(tasks, list):
            if section.split not in self._split_ids:
                from proctor.envs.registry import EnvSpec
                from proctor.rollout.run import select_tasks

                self._split_ids[section.split] = set(select_tasks(EnvSpec(self.cfg.env, self.cfg.env_kwargs),
                                                                  section.split, None))
            missing = [t for t in tasks if t not in self._split_ids[section.split]]
            if missing:
                where = f"panel {str(section.panel)!r}" if section.panel is not None else "tasks"
                raise ValueError(f"{where}: {len(missing)} task ids are not tasks of split {section.split!r} of env "
                                 f"{self.cfg.env!r}, e.g. {missing[0]!r}")
        return tasks

    # -- stages -----------------------------------------------------------------------------------
    def model(self) -> str:
        cfg = self.cfg.model
        if cfg.path is not None:
            return cfg.path
        out = self.out / "model"

        def build() -> None:
            from proctor.models import build_tiny

            build_tiny(out, **{"seed": self.cfg.seed, **(cfg.tiny or {})})

        rec = self.manifest.stage("model", iteration=0, inputs=[], outputs=[out / "config.json"], config=cfg.tiny,
                                  run=build)
        self.report("model", rec)
        return str(out)

    def rollout(self, key: str, agent: dict[str, Any] | Any, section: Any, out: Path, iteration: int,
                inputs: list[Path], policy: Path | None = None) -> dict[str, Any]:
        from proctor.rollout import RolloutConfig, run_rollout

        rcfg = RolloutConfig(env=self.cfg.env, env_kwargs=self.cfg.env_kwargs, agent=agent, out=out,
                             split=section.split, tasks=self.resolve_tasks(section), samples=section.samples,
                             batch=section.batch, seed=self.cfg.seed, workers=self.cfg.workers,
                             step_timeout=self.cfg.step_timeout)
        rec = self.manifest.stage(key, iteration=iteration, inputs=inputs, outputs=[out / "manifest.json"],
                                  config=rcfg,
                                  run=self.serving(policy, lambda: run_rollout(rcfg)) if policy else lambda: run_rollout(rcfg),
                                  result=lambda r: r.summary.to_dict())
        self.report(key, rec)
        return rec

    def sft(self, model: str, demos: Path, out: Path) -> None:
        from proctor.rl.sft import train_sft

        scfg = self.cfg.sft.stage_config(self.cfg, {"$model": model, "$demos": demos, "$out": out})
        rec = self.manifest.stage("iter-0/sft", iteration=0, inputs=[demos], outputs=[out / "config.json"],
                                  config=scfg, run=self.training(lambda: train_sft(scfg)))
        self.report("sft", rec)

    def targets(self, k: int, rollouts: Path) -> Path:
        from proctor.credit.stage import run_targets

        out = self.out / f"iter-{k}" / "targets"
        tcfg = self.cfg.targets.stage_config(self.cfg, {"$rollouts": rollouts, "$out": out,
                                                        "$targets": out / "trajectories"})
        rec = self.manifest.stage(f"iter-{k}/targets", iteration=k, inputs=[rollouts],
                                  outputs=[out / "targets.parquet", out / "trajectories" / "manifest.json"],
                                  config=tcfg, run=lambda: run_targets(tcfg),
                                  result=lambda s: {key: s.get(key) for key in ("records", "states", "warning")})
        self.report("targets", rec)
        return out / "trajectories"

    def candidate_pairs(self, k: int, agent: dict[str, Any], rollouts: Path, inputs: list[Path]) -> tuple[Path, Path]:
        """Candidate actions at π_k's states, completed by π_k, and their pairs: (pairs folder, completions)."""
        from proctor.credit.stage import TargetsConfig, run_targets
        from proctor.rollout import RolloutConfig, run_rollout

        section = self.cfg.prm_candidates
        assert section is not None
        comps = self.out / f"iter-{k}" / "candidates"
        rcfg = RolloutConfig(env=self.cfg.env, env_kwargs=self.cfg.env_kwargs, agent=agent, out=comps,
                             batch=section.batch, seed=self.cfg.seed, workers=self.cfg.workers,
                             step_timeout=self.cfg.step_timeout,
                             start={"source": rollouts, "prefix_lengths": "states", "completions": section.completions,
                                    "per_source": section.per_source,
                                    "candidates": {"seed": self.cfg.seed, **section.candidates}})
        rec = self.manifest.stage(f"iter-{k}/candidates", iteration=k, inputs=inputs + [rollouts],
                                  outputs=[comps / "manifest.json"], config=rcfg,
                                  run=self.serving(inputs[0], lambda: run_rollout(rcfg)),
                                  result=lambda r: r.summary.to_dict())
        self.report(f"iter-{k}/candidates", rec)
        out = self.out / f"iter-{k}" / "candidate-pairs"
        tcfg = TargetsConfig(method="candidate-pairs", params={"gamma": section.gamma, "margin": section.margin},
                             input=comps, out=out, split="keep")
        rec = self.manifest.stage(f"iter-{k}/candidate-pairs", iteration=k, inputs=[comps],
                                  outputs=[out / "targets.parquet"], config=tcfg,
                                  run=lambda: run_targets(tcfg),
                                  result=lambda s: {key: s.get(key) for key in ("records", "warning")})
        self.report("candidate-pairs", rec)
        if not rec["result"]["records"]:
            raise ValueError(f"{out}: no candidate pairs (no two candidates of a state differ by the margin "
                             f"{section.margin}; {rec['result']['warning'] or ''}): roll out more tasks or states")
        return out, comps

    def prm(self, k: int, policy: Path, labelled: Path, pairs_of: Path | None = None) -> Path:
        """Q_k on `policy`: regression on the targets of the trajectories in `labelled`, or, with `pairs_of`
        (the candidates' completions), Bradley–Terry on the pairs in `labelled`. The `prm` section may name the
        starting model (`$model`), the loop's demonstrations (`$demos`) and the iteration's rollouts, with their
        targets (`$rollouts`)."""
        from proctor.prm.trainer import train_prm

        out = self.out / f"iter-{k}" / "prm"
        pcfg = self.cfg.prm.stage_config(self.cfg, {
            "$policy": policy, "$model": self.model_dir, "$demos": self.out / "demos", "$rollouts": labelled,
            "$targets": labelled, "$candidates": pairs_of, "$out": out})
        if isinstance(pcfg, LikelihoodPRMConfig):
            return self.likelihood_prm(k, pcfg, policy, labelled, out)

        def train() -> list[float]:
            _, _, trainer = train_prm(pcfg)
            losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
            (out / "train_log.json").write_text(json.dumps({"losses": losses}, indent=2))
            return losses

        rec = self.manifest.stage(f"iter-{k}/prm", iteration=k,
                                  inputs=[Path(pcfg.model.backbone), labelled, *([pairs_of] if pairs_of else [])],
                                  outputs=[out / "train_log.json"], config=pcfg,
                                  run=self.training(train), result=lambda losses: {"first_loss": losses[0] if losses else None,
                                                                    "last_loss": losses[-1] if losses else None})
        self.report("prm", rec)
        return out

    def likelihood_prm(self, k: int, lcfg: LikelihoodPRMConfig, policy: Path, labelled: Path, out: Path) -> Path:
        """Q_k = σ(β·log π_θ(a|s) + b) from `policy` (`proctor.prm.likelihood`), on the targets in `labelled`,
        reading states with the policy agent's prompt (`lcfg`, from the `prm` section)."""
        from proctor.prm.likelihood import LIKELIHOOD_FILE, train_likelihood_prm

        rec = self.manifest.stage(f"iter-{k}/prm", iteration=k, inputs=[policy, labelled],
                                  outputs=[out / LIKELIHOOD_FILE], config=lcfg,
                                  run=self.training(lambda: train_likelihood_prm(lcfg)),
                                  result=lambda r: {"first_loss": r["curve"][0]["loss"],
                                                    "last_loss": r["curve"][-1]["loss"], "examples": r["examples"]})
        self.report("prm", rec)
        return out

    def evaluate(self, k: int, entry: EvalEntry, policy: Path, prm: Path | None) -> dict[str, Any]:
        out = self.out / f"iter-{k}" / "eval" / _slug(entry.name)
        section = entry.section(self.cfg.evaluate)
        tasks = self.resolve_tasks(section)
        if entry.tasks is not None and entry.panel is None:  # the first N of the evaluation's tasks
            tasks = tasks[:entry.tasks] if isinstance(tasks, list) else min(entry.tasks, tasks or entry.tasks)
        from proctor.evaluation import EvalConfig, run_eval

        method = {"agent": self.agent(entry.agent, policy, prm)} if entry.agent is not None else {
            "search": self.agent(entry.search, policy, prm)}
        ecfg = EvalConfig(env=self.cfg.env, env_kwargs=self.cfg.env_kwargs, out=out, name=entry.name, **method,
                          split=section.split, tasks=tasks, samples=section.samples, batch=section.batch,
                          seed=self.cfg.seed, workers=self.cfg.workers, step_timeout=self.cfg.step_timeout,
                          prm=prm if "$prm" not in json.dumps(entry.agent or entry.search) else None)
        rec = self.manifest.stage(f"iter-{k}/eval/{_slug(entry.name)}", iteration=k, inputs=[policy] + ([prm] if prm else []),
                                  outputs=[out / "summary.json"], config=ecfg,
                                  run=self.serving(policy, lambda: run_eval(ecfg).summary), result=_headline)
        row = {"iteration": k, "policy": entry.name, **rec["result"], "dir": self.manifest.rel(out)}
        self.results.append(row)
        self.report("eval", row)
        return row

    def monitor(self, k: int, agent: dict[str, Any], policy: Path, prm: Path) -> dict[str, Any]:
        """The reward-hacking monitor on iteration k's evaluation of the policy (`proctor.pipeline.monitor`)."""
        from proctor.pipeline.monitor import relabel

        cfg = self.cfg.monitor
        assert cfg is not None
        scored = self.out / f"iter-{k}" / "eval" / _slug(self.cfg.monitored_entry().name) / "scored"
        out = self.out / f"iter-{k}" / "monitor"
        rec = self.manifest.stage(f"iter-{k}/monitor", iteration=k, inputs=[scored, policy, prm],
                                  outputs=[out / "manifest.json"], config=cfg,
                                  run=self.serving(policy, lambda: relabel(
                                      scored, out, env=self.cfg.env, env_kwargs=self.cfg.env_kwargs, agent=agent,
                                      cfg=cfg, seed=self.cfg.seed, workers=self.cfg.workers,
                                      step_timeout=self.cfg.step_timeout)),
                                  result=lambda r: r)
        row = {"iteration": k, **rec["result"]}
        self.report("monitor", row)
        return row

    def improve(self, k: int, policy: Path, prm: Path) -> Path:
        """π_{k+1} from π_k and Q_k: online DPO (`improve.method: online-dpo`, the default) or best-of-N
        distillation (`bon-distill`)."""
        work = self.out / f"iter-{k}" / "improve"
        nxt = self.out / f"iter-{k + 1}" / "policy"
        # `$rollouts`: π_k's rollouts of this iteration, already made for Q_k
        dcfg = self.cfg.improve.stage_config(self.cfg, {"$policy": policy, "$prm": prm, "$out": work,
                                                        "$rollouts": self.out / f"iter-{k}" / "rollouts"})
        if isinstance(dcfg, BonDistillConfig):
            train = self._bon_distill(dcfg, work, nxt)
        else:
            assert isinstance(dcfg, OnlineDPOConfig)
            train = self._online_dpo(k, dcfg, policy, work, nxt)
        inputs = [policy, prm] + ([Path(dcfg.states_from)] if dcfg.states_from is not None else [])
        rec = self.manifest.stage(f"iter-{k}/improve", iteration=k, inputs=inputs,
                                  outputs=[nxt / "config.json"], config=dcfg, run=self.training(train),
                                  result=lambda r: r)
        self.report("improve", rec)
        return nxt

    def _online_dpo(self, k: int, dcfg: OnlineDPOConfig, policy: Path, work: Path, nxt: Path
                    ) -> Callable[[], dict[str, Any]]:
        from proctor.rl.online_dpo import NoPreferencePairs, train_online_dpo

        def train() -> dict[str, Any]:
            fresh_stage(work, nxt)
            try:
                result = train_online_dpo(dcfg)
            except NoPreferencePairs as e:  # the PRM prefers nothing: π_{k+1} is π_k, and the record says so
                log.warning("iteration %d: online DPO skipped, π_%d = π_%d: %s", k, k + 1, k, e)
                shutil.copytree(policy, nxt, dirs_exist_ok=True)
                return {"skipped": str(e)}
            shutil.copytree(result.policy_dir, nxt, dirs_exist_ok=True)
            return {"iterations": result.iterations}

        return train

    def _bon_distill(self, dcfg: BonDistillConfig, work: Path, nxt: Path) -> Callable[[], dict[str, Any]]:
        from proctor.rl.bon_distill import METRICS_FILE, train_bon_distill

        def train() -> dict[str, Any]:
            fresh_stage(work, nxt)
            shutil.copytree(train_bon_distill(dcfg), nxt, dirs_exist_ok=True)
            metrics = json.loads((work / METRICS_FILE).read_text())
            return {key: metrics[key] for key in ("states", "mean_top_target", "curve", "seconds")}

        return train

    # -- the loop ----------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        import proctor.search  # noqa: F401  (registers the search agent kinds evaluations may name)

        quiet_library_progress()
        cfg = self.cfg
        model = self.model_dir = self.model()
        demos = self.out / "demos"
        self.rollout("demos", cfg.demos.agent, cfg.demos, demos, 0, [])
        policy = self.out / "iter-0" / "policy"
        self.sft(model, demos, policy)
        agent = {**cfg.policy_agent, "model": "$policy"}
        prm: Path | None = None
        monitor: list[dict[str, Any]] = []
        for k in range(cfg.iterations + 1):
            if k < cfg.iterations or cfg.iterations == 0:
                rollouts = self.out / f"iter-{k}" / "rollouts"
                self.rollout(f"iter-{k}/rollouts", self.agent(agent, policy), cfg.rollout, rollouts, k, [policy],
                             policy)
                if cfg.prm_candidates is None:
                    prm = self.prm(k, policy, self.targets(k, rollouts))
                else:
                    completer = cfg.prm_candidates.agent or agent
                    pairs, comps = self.candidate_pairs(k, self.agent(completer, policy), rollouts, [policy])
                    prm = self.prm(k, policy, pairs, pairs_of=comps)
            for entry in cfg.evaluate.entries:
                if entry.iterations is None or k in entry.iterations:
                    self.evaluate(k, entry, policy, prm)
            watched = cfg.monitored_entry() if cfg.monitor is not None else None
            if watched is not None and prm is not None and (watched.iterations is None or k in watched.iterations):
                monitor.append(self.monitor(k, self.agent(agent, policy), policy, prm))
            if k < cfg.iterations:
                policy = self.improve(k, policy, prm)
        if monitor:
            from proctor.evaluation.plots import monitor_png

            monitor_png(monitor, self.out / "monitor.png")
        paired_with_first(self.results, self.out)
        summary = {"env": cfg.env, "seed": cfg.seed, "results": self.results, "monitor": monitor,
                   "stages_seconds": {key: rec["seconds"] for key, rec in self.manifest.data["stages"].items()}}
        (self.out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True, default=str))
        return summary


def run_pipeline(cfg: PipelineConfig, report: Report | None = None, reuse: Path | None = None) -> dict[str, Any]:
    """Run (or resume) the loop `cfg` describes; returns the summary also written to `cfg.out/summary.json`.
    `report(stage, record)` is called after each stage (the CLI prints from it). `reuse`: an earlier run's folder
    whose stages with the same config and inputs are copied rather than run (`proctor.pipeline.manifest`)."""
    pipeline = Pipeline(cfg, report, reuse)
    try:
        return pipeline.run()
    finally:
        if pipeline.served is not None:
            pipeline.served.stop()


def served_generation(cfg: PipelineConfig) -> Any:
    """The run's vLLM server (`generation: {engine: vllm}`): full weights, restarted on each new iterate, on one
    port kept in `out/vllm.json` so that a resumed run's agents (and so its stores) are the same."""
    from proctor.rl.served_policy import ServedPolicy
    from proctor.serving.vllm_server import free_port

    record = cfg.out / "vllm.json"
    port = cfg.generation.server.port or (json.loads(record.read_text())["port"] if record.is_file() else free_port())
    cfg.out.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps({"port": port}))
    server = cfg.generation.server.model_copy(update={"port": port})
    return ServedPolicy(cfg.generation.model_copy(update={"server": server}), "", lora=False,
                        log_file=cfg.out / "vllm.log")


def served_agents(value: Any, policy: str, served: Any) -> Any:
    """`value` (an agent or search config) with every hf or choice agent whose `model` is `policy` replaced by its
    served counterpart."""
    if isinstance(value, list):
        return [served_agents(v, policy, served) for v in value]
    if not isinstance(value, dict):
        return value
    value = {k: served_agents(v, policy, served) for k, v in value.items()}
    if value.get("kind") in ("hf", "choice") and value.get("model") == policy:
        return served.agent_config(value)
    return value


def paired_with_first(results: list[dict[str, Any]], root: Path) -> None:
    """Give every result row after the first `vs_first`: its paired difference in success with the first row (π0
    at iteration 0 in the quickstart) on the (task, sample) keys both ran, with the bootstrap interval and
    McNemar's exact p (`proctor.evaluation.compare.paired`)."""
    from proctor.evaluation.compare import paired
    from proctor.evaluation.loading import load_run

    if len(results) < 2:
        return
    first = results[0]
    base = load_run(root / first["dir"])
    for row in results[1:]:
        row["vs_first"] = {"policy": first["policy"], "iteration": first["iteration"],
                           **paired(base, load_run(root / row["dir"]))}


def quiet_library_progress() -> None:
    """Silence transformers' and datasets' per-file progress bars (loading 20 tensors, writing one shard or
    one Parquet file): the stages report their own progress."""
    import datasets
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    datasets.disable_progress_bars()


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in name).strip("-") or "policy"


def _headline(summary: dict[str, Any]) -> dict[str, Any]:
    keys = ("episodes", "successes", "success_rate", "success_ci95", "mean_steps", "mean_score", "budget",
            "invalid_action_rate")
    row = {k: summary[k] for k in keys if k in summary}
    prm = summary.get("prm") or {}
    if prm.get("mean_step_score") is not None:  # the reward-hacking monitor: the PRM's view next to success
        row["prm_mean_score"] = prm["mean_step_score"]
    return row

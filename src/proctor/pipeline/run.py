"""`run_pipeline(PipelineConfig)`: the iterated AgentPRM loop as a plan of stages (`proctor.pipeline.stage`), each
recorded in `manifest.json` (lineage, resume at stage granularity) with the command that runs it.

`Pipeline.stages` is the one loop: `proctor run` runs its stages, `--dry-run` prints them with their commands,
and `proctor run RUN/config.yaml --stage KEY` runs one of them, by hand, from a job script or in each process of a
launcher (the `launch` section: `proctor.pipeline.launch`).

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
    config.yaml                 the resolved loop config every stage's command reads
    logs/<stage>/               a launched stage's logs: the launcher's and each rank's
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import yaml

from proctor.pipeline.config import (
    BonDistillSection,
    EvalEntry,
    LikelihoodPRMSection,
    OnlineDPOSection,
    PipelineConfig,
    TaskSection,
)
from proctor.pipeline.manifest import Manifest
from proctor.pipeline.prm_server import with_prm_server
from proctor.pipeline.stage import RUN_CONFIG, Stage, describe_agent, describe_tasks, slug, stage_command
from proctor.rl.bon_distill import BonDistillConfig
from proctor.rl.online_dpo import OnlineDPOConfig
from proctor.training.distributed import barrier, is_main_process

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
    """Start a policy-improvement stage over: remove an interrupted attempt's `work` folder, make `nxt`'s parent
    (the main process, while the others wait)."""
    if is_main_process():
        if work.exists():
            shutil.rmtree(work)
        nxt.parent.mkdir(parents=True, exist_ok=True)
    barrier()


class Pipeline:
    """The loop of `run_pipeline` as a sequence of `Stage`s (see module docstring): `stages()` yields them in the
    loop's order; `plan()` lists them without running any (`proctor run --dry-run`), `run()` runs or resumes them
    all, and `run_stage(key)` runs one (`proctor run RUN/config.yaml --stage KEY`). Nothing touches the run folder
    until `run()` or `run_stage()` opens it."""

    def __init__(self, cfg: PipelineConfig, report: Report | None = None, reuse: Path | None = None,
                 sizes: Mapping[str, int] | None = None):
        """`sizes`: the env's split sizes ({split: tasks}, `split_sizes`) for the plan's descriptions."""
        self.cfg = cfg
        self.out = cfg.out
        self.report = report or (lambda stage, payload: None)
        self.reuse = reuse
        self.sizes = sizes
        self.manifest: Manifest | None = None
        self.results: list[dict[str, Any]] = []
        self.served: Any = None  # the vLLM server of `generation: {engine: vllm}`, once the run is open
        self.served_prm: Any = None  # the PRM server of `prm_serving: {engine: server}`, once the run is open
        self._split_ids: dict[str, set[str]] = {}

    # -- the run folder -----------------------------------------------------------------------------------------
    def open(self, served: bool = True) -> Manifest:
        """Open (or create) the run folder: its manifest, the resolved config every stage's command reads
        (`RUN/config.yaml`) and, with `generation: {engine: vllm}` and `served`, the served policy's record."""
        if self.manifest is None:
            main = is_main_process()
            self.manifest = Manifest(self.out, self.cfg.identity(), self.cfg.seed, env=self.cfg.env,
                                     reuse=self.reuse, write=main, upgrade=PipelineConfig.recorded_identity)
            if main:  # this run's own (a resume may launch otherwise: `PipelineConfig.identity`)
                (self.out / RUN_CONFIG).write_text(yaml.safe_dump(self.cfg.model_dump(mode="json"), sort_keys=False))
        if served and self.served is None and self.cfg.generation.engine == "vllm":
            self.served = served_generation(self.cfg)
        if served and self.served_prm is None and self.cfg.prm_serving.engine == "server":
            self.served_prm = served_prm(self.cfg)
        return self.manifest

    def stop_servers(self) -> None:
        """Stop the run's servers (the served policy, the served PRM); the policy server's requests by replica
        (data-parallel engine) are added to `out/vllm.json` first."""
        if self.served is not None and self.served.server.running and is_main_process():
            record = self.out / "vllm.json"
            try:
                counts = self.served.server.requests_by_engine()
            except httpx.HTTPError as e:
                log.warning("vLLM: its request counts could not be read (%s)", e)
            else:
                record.write_text(json.dumps({**json.loads(record.read_text()), "requests_by_engine": counts}))
        for server in (self.served, self.served_prm):
            if server is not None:
                server.stop()

    def agent(self, value: Any, policy: Path, prm: Path | None = None) -> Any:
        """`value` with `$policy`/`$prm` filled (`fill`); with a served policy, every hf or choice agent of the
        iteration's policy becomes its served counterpart (`ServedPolicy.agent_config`)."""
        filled = fill(value, policy, prm)
        return filled if self.served is None else served_agents(filled, str(policy), self.served)

    def resolve_tasks(self, section: TaskSection) -> int | list[str] | None:
        """The section's tasks as its stage's config takes them (`TaskSection.task_ids`); listed ids (a panel) must
        be tasks of the section's split (one line naming the first that is not)."""
        tasks = section.task_ids()
        if not isinstance(tasks, list):
            return tasks
        if section.split not in self._split_ids:
            from proctor.rollout.run import select_tasks

            self._split_ids[section.split] = set(select_tasks(self.cfg.env_spec(), section.split, None))
        missing = [t for t in tasks if t not in self._split_ids[section.split]]
        if missing:
            where = f"panel {str(section.panel)!r}" if section.panel is not None else "tasks"
            raise ValueError(f"{where}: {len(missing)} task ids are not tasks of split {section.split!r} of env "
                             f"{self.cfg.env!r}, e.g. {missing[0]!r}")
        return tasks

    # -- the stages ---------------------------------------------------------------------------------------------
    def stages(self) -> Iterator[Stage]:
        """The loop's stages in order (module docstring): each is built when the one before it has run, from the
        config alone (no stage reads another's result to decide what comes next)."""
        cfg = self.cfg
        model = self.start_model()
        if cfg.model.tiny is not None:
            yield self.model_stage()
        demos = self.out / "demos"
        yield self.rollout_stage("demos", cfg.demos.agent, cfg.demos, demos, 0, [], None,
                                 describe_agent(cfg.demos.agent, "π0", None))
        policy = self.out / "iter-0" / "policy"
        yield self.sft_stage(model, demos, policy)
        agent = {**cfg.policy_agent, "model": "$policy"}
        prm: Path | None = None
        for k in range(cfg.iterations + 1):
            pi = f"π{k}"
            if k < cfg.iterations or cfg.iterations == 0:
                rollouts = self.out / f"iter-{k}" / "rollouts"
                yield self.rollout_stage(f"iter-{k}/rollouts", self.agent(agent, policy), cfg.rollout, rollouts, k,
                                         [policy], policy, describe_agent(agent, pi, None))
                if cfg.prm_candidates is None:
                    labelled, pairs_of = self.out / f"iter-{k}" / "targets" / "trajectories", None
                    yield self.targets_stage(k, rollouts)
                else:
                    completer = cfg.prm_candidates.agent or agent
                    yield self.candidates_stage(k, self.agent(completer, policy), rollouts, policy,
                                                describe_agent(completer, pi, None))
                    labelled, pairs_of = self.out / f"iter-{k}" / "candidate-pairs", self.out / f"iter-{k}" / "candidates"
                    yield self.candidate_pairs_stage(k, pairs_of, labelled)
                prm = self.out / f"iter-{k}" / "prm"
                yield self.prm_stage(k, policy, labelled, pairs_of, prm)
            for entry in cfg.evaluate.entries:
                if entry.iterations is None or k in entry.iterations:
                    yield self.eval_stage(k, entry, policy, prm)
            watched = cfg.monitored_entry() if cfg.monitor is not None else None
            if watched is not None and prm is not None and (watched.iterations is None or k in watched.iterations):
                yield self.monitor_stage(k, self.agent(agent, policy), policy, prm, watched)
            if k < cfg.iterations:
                assert prm is not None
                yield self.improve_stage(k, policy, prm)
                policy = self.out / f"iter-{k + 1}" / "policy"

    def start_model(self) -> str:
        """The starting model: `model.path`, or the folder the `model` stage builds the tiny model in."""
        return self.cfg.model.path if self.cfg.model.path is not None else str(self.out / "model")

    def model_stage(self) -> Stage:
        out, tiny = self.out / "model", self.cfg.model.tiny

        def build(_: Any) -> None:
            from proctor.models import build_tiny

            build_tiny(out, **{"seed": self.cfg.seed, **(tiny or {})})

        return Stage("model", 0, "build a tiny model", f"tiny {tiny}", out, lambda: tiny, [], [out / "config.json"],
                     build)

    def rollout_stage(self, key: str, agent: Any, section: TaskSection, out: Path, iteration: int,
                      inputs: list[Path], policy: Path | None, who: str) -> Stage:
        from proctor.rollout import RolloutConfig, run_rollout

        def config() -> RolloutConfig:
            return RolloutConfig(**self.cfg.env_ref(), agent=agent, out=out,
                                 split=section.split, tasks=self.resolve_tasks(section), samples=section.samples,
                                 batch=section.batch, seed=self.cfg.seed, workers=self.cfg.workers,
                                 step_timeout=self.cfg.step_timeout,
                                 retry_failed=self.served is not None and policy is not None)

        return Stage(key, iteration, describe_tasks(self.cfg.env, section, self.sizes), who, out, config, inputs,
                     [out / "manifest.json"], run_rollout, lambda r: r.summary.to_dict(), serves=policy)

    def sft_stage(self, model: str, demos: Path, out: Path) -> Stage:
        from proctor.rl.sft import train_sft

        start = f"the tiny model ({model})" if self.cfg.model.tiny is not None else model
        return Stage("iter-0/sft", 0, f"SFT, {self.cfg.sft.steps} steps on the demonstrations", f"{start} → π0", out,
                     lambda: self.cfg.sft.stage_config(self.cfg, {"$model": model, "$demos": demos, "$out": out}),
                     [demos], [out / "config.json"], train_sft, trains=True, name="sft")

    def targets_stage(self, k: int, rollouts: Path) -> Stage:
        from proctor.credit.stage import run_targets

        out = self.out / f"iter-{k}" / "targets"
        params = "".join(f", {key}={value}" for key, value in (self.cfg.targets.params or {}).items())
        return Stage(f"iter-{k}/targets", k, f"{self.cfg.targets.method} targets of π{k}'s rollouts{params}", "-",
                     out, lambda: self.cfg.targets.stage_config(self.cfg, {"$rollouts": rollouts, "$out": out,
                                                                           "$targets": out / "trajectories"}),
                     [rollouts], [out / "targets.parquet", out / "trajectories" / "manifest.json"],
                     lambda c: run_targets(c, overwrite=True),  # a stage not done starts over
                     lambda s: {key: s.get(key) for key in ("records", "states", "warning")}, name="targets")

    def candidates_stage(self, k: int, agent: Any, rollouts: Path, policy: Path, who: str) -> Stage:
        """Candidate actions at π_k's states, completed by π_k (`prm_candidates`)."""
        from proctor.rollout import RolloutConfig, run_rollout

        section = self.cfg.prm_candidates
        assert section is not None
        comps = self.out / f"iter-{k}" / "candidates"

        def config() -> RolloutConfig:
            return RolloutConfig(**self.cfg.env_ref(), agent=agent, out=comps,
                                 batch=section.batch, seed=self.cfg.seed, workers=self.cfg.workers,
                                 step_timeout=self.cfg.step_timeout, retry_failed=self.served is not None,
                                 start={"source": rollouts, "prefix_lengths": "states",
                                        "completions": section.completions, "per_source": section.per_source,
                                        "candidates": {"seed": self.cfg.seed, **section.candidates}})

        return Stage(f"iter-{k}/candidates", k, f"candidate actions at {section.per_source or 'all'} states of each "
                     f"rollout, {section.completions} completions each", who, comps, config, [policy, rollouts],
                     [comps / "manifest.json"], run_rollout, lambda r: r.summary.to_dict(), serves=policy)

    def candidate_pairs_stage(self, k: int, comps: Path, out: Path) -> Stage:
        """The candidates' Bradley–Terry pairs; none at all is an error naming the margin."""
        from proctor.credit.stage import TargetsConfig, run_targets

        section = self.cfg.prm_candidates
        assert section is not None

        def pairs(tcfg: TargetsConfig) -> dict[str, Any]:
            summary = run_targets(tcfg, overwrite=True)  # a stage not done starts over
            if not summary.get("records"):
                raise ValueError(f"{out}: no candidate pairs (no two candidates of a state differ by the margin "
                                 f"{section.margin}; {summary.get('warning') or ''}): roll out more tasks or states")
            return summary

        return Stage(f"iter-{k}/candidate-pairs", k, f"Bradley–Terry pairs at margin {section.margin}", "-", out,
                     lambda: TargetsConfig(method="candidate-pairs", input=comps, out=out, split="keep",
                                           params={"gamma": section.gamma, "margin": section.margin}),
                     [comps], [out / "targets.parquet"], pairs,
                     lambda s: {key: s.get(key) for key in ("records", "warning")}, name="candidate-pairs")

    def prm_stage(self, k: int, policy: Path, labelled: Path, pairs_of: Path | None, out: Path) -> Stage:
        """Q_k on `policy`: a PRM head on the targets of the trajectories in `labelled` (or Bradley–Terry on the
        pairs in `labelled`, with `pairs_of` the candidates' completions), or the likelihood PRM from π_k. The
        `prm` section may name the starting model (`$model`), the loop's demonstrations (`$demos`) and the
        iteration's rollouts with their targets (`$rollouts`)."""
        folders = {"$policy": policy, "$model": self.start_model(), "$demos": self.out / "demos",
                   "$rollouts": labelled, "$targets": labelled, "$candidates": pairs_of, "$out": out}
        pi, name, section = f"π{k}", f"Q{k}", self.cfg.prm

        def config() -> Any:
            return section.stage_config(self.cfg, folders)

        if isinstance(section, LikelihoodPRMSection):
            from proctor.prm.likelihood import LIKELIHOOD_FILE, train_likelihood_prm

            anchor = {"$demos": "the demonstrations", "$rollouts": f"{pi}'s rollouts"}.get(
                str(section.anchor), str(section.anchor))
            what = f"likelihood PRM, {section.steps} steps" + (f", anchored on {anchor}" if section.anchor else "")
            return Stage(f"iter-{k}/prm", k, what, f"{pi} → {name}", out, config, [policy, labelled],
                         [out / LIKELIHOOD_FILE], train_likelihood_prm,
                         lambda r: {"first_loss": r["curve"][0]["loss"], "last_loss": r["curve"][-1]["loss"],
                                    "examples": r["examples"]}, trains=True, name="prm")
        from proctor.prm.trainer import TRAIN_FILE, train_prm

        def train(pcfg: Any) -> list[float]:
            return train_prm(pcfg, overwrite=True).losses  # a stage not done starts over

        backbone = str(folders.get(section.model.backbone, section.model.backbone))
        start = {"$policy": pi, "$model": self.start_model()}.get(section.model.backbone, section.model.backbone)
        return Stage(f"iter-{k}/prm", k, f"PRM head ({section.model.head}, loss {section.loss or 'default'})",
                     f"{start} → {name}", out, config, [Path(backbone), labelled, *([pairs_of] if pairs_of else [])],
                     [out / TRAIN_FILE], train,
                     lambda losses: {"first_loss": losses[0] if losses else None,
                                     "last_loss": losses[-1] if losses else None}, trains=True, name="prm")

    def eval_stage(self, k: int, entry: EvalEntry, policy: Path, prm: Path | None) -> Stage:
        from proctor.evaluation import EvalConfig, run_eval

        out = self.out / f"iter-{k}" / "eval" / slug(entry.name)
        section = entry.section(self.cfg.evaluate)
        given = entry.agent if entry.agent is not None else entry.search
        if prm is None and "$prm" in json.dumps(given):
            raise ValueError(f"evaluation {entry.name!r} names $prm, but no PRM is trained before it")

        def config() -> EvalConfig:
            tasks = self.resolve_tasks(section)
            if entry.tasks is not None and entry.panel is None:  # the first N of the evaluation's tasks
                tasks = tasks[:entry.tasks] if isinstance(tasks, list) else min(entry.tasks, tasks or entry.tasks)
            method = {"agent": self.agent(entry.agent, policy, prm)} if entry.agent is not None else {
                "search": self.agent(entry.search, policy, prm)}
            scored_by = prm if "$prm" not in json.dumps(given) else None  # the policy's episodes, scored by Q_k
            server = self.served_prm.ref() if self.served_prm is not None and prm is not None else None
            if server is not None:
                method = with_prm_server(method, str(prm), server)
            return EvalConfig(**self.cfg.env_ref(), out=out, name=entry.name, **method,
                              split=section.split, tasks=tasks, samples=section.samples, batch=section.batch,
                              seed=self.cfg.seed, workers=self.cfg.workers, step_timeout=self.cfg.step_timeout,
                              prm=scored_by, prm_server=server if scored_by is not None else None,
                              retry_failed=entry.agent is not None and (self.served is not None or server is not None))

        runs = f"evaluate {entry.name!r} on " + describe_tasks(self.cfg.env, section, self.sizes,
                                                                first=None if entry.panel else entry.tasks)
        return Stage(f"iter-{k}/eval/{slug(entry.name)}", k, runs,
                     describe_agent(given, f"π{k}", f"Q{k}" if prm is not None else None), out, config,
                     [policy] + ([prm] if prm else []), [out / "summary.json"], lambda c: run_eval(c).summary,
                     _headline, serves=policy, scores=prm, name="eval")

    def monitor_stage(self, k: int, agent: dict[str, Any], policy: Path, prm: Path, watched: EvalEntry) -> Stage:
        """The reward-hacking monitor on iteration k's evaluation of the policy (`proctor.pipeline.monitor`)."""
        from proctor.pipeline.monitor import relabel

        cfg = self.cfg.monitor
        assert cfg is not None
        scored = self.out / f"iter-{k}" / "eval" / slug(watched.name) / "scored"
        out = self.out / f"iter-{k}" / "monitor"
        return Stage(f"iter-{k}/monitor", k, f"MC re-labels of {cfg.states} actions of {watched.name!r}, "
                     f"{cfg.completions} completions each", f"π{k} completes; Q{k} scored", out, lambda: cfg,
                     [scored, policy, prm], [out / "manifest.json"],
                     lambda c: relabel(scored, out, env=self.cfg, agent=agent,
                                       cfg=c, seed=self.cfg.seed, workers=self.cfg.workers,
                                       step_timeout=self.cfg.step_timeout), lambda r: r, serves=policy,
                     name="monitor")

    def improve_stage(self, k: int, policy: Path, prm: Path) -> Stage:
        """π_{k+1} from π_k and Q_k: online DPO (`improve.method: online-dpo`, the default) or best-of-N
        distillation (`bon-distill`)."""
        work = self.out / f"iter-{k}" / "improve"
        nxt = self.out / f"iter-{k + 1}" / "policy"
        pi, name, improve = f"π{k}", f"Q{k}", self.cfg.improve
        rollouts = self.out / f"iter-{k}" / "rollouts"  # `$rollouts`: π_k's rollouts, already made for Q_k

        on_loop_server = improves_on_loop_server(self.cfg)

        def config() -> Any:
            built = improve.stage_config(self.cfg, {"$policy": policy, "$prm": prm, "$out": work,
                                                    "$rollouts": rollouts})
            return built.model_copy(update={"generation": loop_server(self.cfg)}) if on_loop_server else built

        if isinstance(improve, BonDistillSection):
            train = self._bon_distill(work, nxt)
            states = {"$rollouts": f"{pi}'s rollouts"}.get(str(improve.states_from), str(improve.states_from))
            init = {"$prm": f"{name}'s LM", "$policy": pi}.get(str(improve.init), str(improve.init or pi))
            what = (f"best-of-{improve.n} distillation into {init}, {improve.epochs} epochs on up to "
                    f"{improve.max_states or 'all'} states of {states}")
        else:
            assert isinstance(improve, OnlineDPOSection)
            train = self._online_dpo(k, policy, work, nxt)
            tasks = improve.values(self.cfg, {}).get("tasks")
            tasks = ("all" if tasks is None else f"{len(tasks)}" + (f" of panel {improve.panel}" if improve.panel
                                                                   else " listed") if isinstance(tasks, list)
                     else f"the first {tasks}")
            states = f", iteration 1's states from {improve.states_from}" if improve.states_from else ""
            what = (f"online DPO, {improve.iterations} iteration(s) of {improve.rollouts_per_task} rollout(s) "
                    f"on {self.cfg.env} {improve.split} tasks: {tasks}{states}")
        states_from = improve.states_from
        inputs = [policy, prm] + ([rollouts if str(states_from) == "$rollouts" else Path(states_from)]
                                  if states_from is not None else [])
        return Stage(f"iter-{k}/improve", k, what, f"{pi} against {name} → π{k + 1}", nxt, config, inputs,
                     [nxt / "config.json"], train, lambda r: r, trains=True,
                     serves=policy if on_loop_server else None, name="improve")

    def _online_dpo(self, k: int, policy: Path, work: Path, nxt: Path) -> Callable[[OnlineDPOConfig], dict[str, Any]]:
        from proctor.rl.online_dpo import NoPreferencePairs, train_online_dpo

        def train(dcfg: OnlineDPOConfig) -> dict[str, Any]:
            fresh_stage(work, nxt)
            try:
                result = train_online_dpo(dcfg)
            except NoPreferencePairs as e:  # the PRM prefers nothing: π_{k+1} is π_k, and the record says so
                log.warning("iteration %d: online DPO skipped, π_%d = π_%d: %s", k, k + 1, k, e)
                if is_main_process():
                    shutil.copytree(policy, nxt, dirs_exist_ok=True)
                return {"skipped": str(e)}
            if is_main_process():
                shutil.copytree(result.policy_dir, nxt, dirs_exist_ok=True)
            return {"iterations": result.iterations}

        return train

    def _bon_distill(self, work: Path, nxt: Path) -> Callable[[BonDistillConfig], dict[str, Any]]:
        from proctor.rl.bon_distill import METRICS_FILE, train_bon_distill

        def train(dcfg: BonDistillConfig) -> dict[str, Any]:
            fresh_stage(work, nxt)
            student = train_bon_distill(dcfg)
            if not is_main_process():
                return {}
            shutil.copytree(student, nxt, dirs_exist_ok=True)
            metrics = json.loads((work / METRICS_FILE).read_text())
            return {key: metrics[key] for key in ("states", "mean_top_target", "curve", "seconds")}

        return train

    # -- running them ---------------------------------------------------------------------------------------
    def plan(self) -> list[Stage]:
        """Every stage, in order, without running any (`proctor run --dry-run`)."""
        return list(self.stages())

    def launched(self, stage: Stage) -> bool:
        """Whether `stage` runs in launched processes (`launch`; any training stage the device plan gives GPUs of
        its own), rather than in this one."""
        launch = self.cfg.launch
        return stage.trains and (launch.launches(stage.name) or (self.cfg.devices.training is not None
                                                                 and stage.name in launch.stages))

    def frees_devices_to_train(self) -> bool:
        """Whether the vLLM server stops while a stage trains: when it shares CUDA devices with training (on the CPU
        there is no device memory to free, and with a device plan apart each has its own GPUs)."""
        import torch

        return torch.cuda.is_available() and not self.cfg.devices.apart

    def command(self, stage: Stage) -> str:
        """The exact command that runs `stage` (under its launcher when it is launched)."""
        return stage_command(self.out, stage.key, self.cfg.launch.words() if self.launched(stage) else None)

    def execute(self, stage: Stage, launched: bool | None = None) -> dict[str, Any]:
        """Run `stage` unless the manifest records it done (copy it from `reuse` when that run has it): a stage
        that samples from π_k has the served policy follow π_k first; a training stage has it stopped first and,
        when `launch` says so, runs under the launcher. Returns the stage's record."""
        manifest = self.open()
        if manifest.done(stage.key) is not None:
            return manifest.stage(stage.key, iteration=stage.iteration, inputs=[], outputs=[], config=None,
                                  run=lambda: None)
        launched = self.launched(stage) if launched is None else launched
        config = stage.config()
        run, result = (lambda: stage.run(config)), stage.result
        if launched:
            run, result = (lambda: self.launch(stage)), (lambda r: r)
        if stage.trains:  # a trainer refuses a non-empty folder: an interrupted attempt's is removed first
            inner_train = run

            def run() -> Any:
                if is_main_process() and stage.out.exists():
                    shutil.rmtree(stage.out)
                barrier()
                return inner_train()
        if self.served is not None and stage.serves is not None:
            served, inner, policy = self.served, run, stage.serves

            def run() -> Any:  # a training stage that samples (the improvement) makes it follow its iterates
                served.follow(str(policy))
                try:
                    return inner()
                finally:
                    if stage.trains:
                        served.forget()
        elif self.served is not None and stage.trains and self.frees_devices_to_train():
            served, inner = self.served, run

            def run() -> Any:  # training needs the GPUs' memory; the next stage that samples restarts it
                served.stop()
                return inner()
        if self.served_prm is not None and stage.scores is not None:
            served_q, scoring, scores = self.served_prm, run, stage.scores

            def run() -> Any:
                served_q.follow(str(scores))
                return scoring()
        servers = [(what, server) for what, server, used in (("the vLLM server", self.served, stage.serves),
                                                             ("the PRM server", self.served_prm, stage.scores))
                   if server is not None and used is not None]
        if servers:
            watched = run

            def run() -> Any:  # a server that died during the stage fails it, whatever the stage made of that
                try:
                    result = watched()
                except Exception as e:
                    died(stage, servers, e)
                    raise
                died(stage, servers)
                return result
        return manifest.stage(stage.key, iteration=stage.iteration, inputs=stage.inputs, outputs=stage.outputs,
                              config=config, run=run, result=result, command=self.command(stage))

    def launch(self, stage: Stage) -> dict[str, Any]:
        """Run `stage` in the processes `launch` asks for; returns the result its main process wrote."""
        from proctor.pipeline.launch import DevicePlan, run_launched

        logs = self.out / "logs" / slug(stage.key)
        args = ["run", str(self.out / RUN_CONFIG), "--stage", stage.key]
        if self.cfg.launch.nodes > 1:
            from proctor.pipeline.nodes import run_on_nodes

            return run_on_nodes(self.cfg.launch, stage.key, args, logs, logs / "result.json")
        return run_launched(stage.key, self.cfg.launch.words(), args, logs, logs / "result.json",
                            env=DevicePlan.visible(self.cfg.devices.training))

    def run(self) -> dict[str, Any]:
        """Run (or resume) every stage; returns the summary (also `RUN/summary.json`)."""
        import proctor.search  # noqa: F401  (registers the search agent kinds evaluations may name)

        quiet_library_progress()
        self.open()
        monitor: list[dict[str, Any]] = []
        for stage in self.stages():
            rec = self.execute(stage)
            if stage.name == "eval":
                row = {"iteration": stage.iteration, "policy": rec["config"]["name"], **rec["result"],
                       "dir": self.manifest.rel(stage.out)}
                self.results.append(row)
                self.report("eval", row)
            elif stage.name == "monitor":
                row = {"iteration": stage.iteration, **rec["result"]}
                monitor.append(row)
                self.report("monitor", row)
            else:
                self.report(stage.name, rec)
        if monitor:
            from proctor.evaluation.plots import monitor_png

            monitor_png(monitor, self.out / "monitor.png")
        paired_with_first(self.results, self.out)
        summary = {"env": self.cfg.env, "seed": self.cfg.seed, "results": self.results, "monitor": monitor,
                   "stages_seconds": {key: rec["seconds"] for key, rec in self.manifest.data["stages"].items()}}
        (self.out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True, default=str))
        return summary

    def run_stage(self, key: str, result_file: Path | None = None) -> dict[str, Any]:
        """Run the one stage `key` in this process (and, under a launcher, in each of its ranks). Its inputs must
        exist. With `result_file` (the orchestrator launched it) the main process writes the stage's result there
        and the orchestrator records it; without, the main process records it in the run's manifest."""
        import proctor.search  # noqa: F401  (registers the search agent kinds evaluations may name)

        quiet_library_progress()
        plan = self.plan()
        stage = next((s for s in plan if s.key == key), None)
        if stage is None:
            raise ValueError(f"no stage {key!r} in this run; its stages are: {', '.join(s.key for s in plan)}")
        missing = [p for p in stage.inputs if not Path(p).exists()]
        if missing:
            raise FileNotFoundError(f"stage {key}: its input {missing[0]} is not there yet; run the stages before it "
                                    f"first (`proctor run {self.out / RUN_CONFIG} --dry-run` lists them)")
        self.open(served=result_file is None)
        if result_file is None:
            return self.execute(next(s for s in self.stages() if s.key == key), launched=False)
        value = stage.run(stage.config())
        if not is_main_process():
            return {}
        result = stage.result(value)
        result_file.write_text(json.dumps(result, default=str))
        return result


def run_pipeline(cfg: PipelineConfig, report: Report | None = None, reuse: Path | None = None) -> dict[str, Any]:
    """Run (or resume) the loop `cfg` describes; returns the summary also written to `cfg.out/summary.json`.
    `report(stage, record)` is called after each stage (the CLI prints from it). `reuse`: an earlier run's folder
    whose stages with the same config and inputs are copied rather than run (`proctor.pipeline.manifest`)."""
    pipeline = Pipeline(cfg, report, reuse)
    try:
        return pipeline.run()
    finally:
        pipeline.stop_servers()


def plan_stages(cfg: PipelineConfig, sizes: Mapping[str, int] | None = None) -> list[Stage]:
    """The stages `run_pipeline(cfg)` runs, in order, without running any; `sizes` (`split_sizes`) adds the splits'
    task counts to their descriptions."""
    return Pipeline(cfg, sizes=sizes).plan()


def run_stage(cfg: PipelineConfig, key: str, result_file: Path | None = None) -> dict[str, Any]:
    """Run stage `key` of the loop `cfg` describes (`Pipeline.run_stage`)."""
    pipeline = Pipeline(cfg)
    try:
        return pipeline.run_stage(key, result_file)
    finally:
        pipeline.stop_servers()


def served_generation(cfg: PipelineConfig) -> Any:
    """The run's vLLM server (`generation: {engine: vllm}`): full weights, each new iterate reloaded in place
    (`weight_reload`; a restart when that fails), on one port kept in `out/vllm.json` so that a resumed run's
    agents (and so its stores) are the same; on the device plan's `devices.generation` when given."""
    from proctor.rl.served_policy import ServedPolicy
    from proctor.serving.vllm_server import free_port

    record = cfg.out / "vllm.json"
    port = cfg.generation.server.port or (json.loads(record.read_text())["port"] if record.is_file() else free_port())
    cfg.out.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps({"port": port}))
    server = served_server_config(cfg).model_copy(update={"port": port})
    if cfg.devices.generation is not None:  # the device plan's GPUs for the server
        from proctor.pipeline.launch import DevicePlan

        server = server.model_copy(update={"env": {**server.env, **DevicePlan.visible(cfg.devices.generation)}})
    return ServedPolicy(cfg.generation.model_copy(update={"server": server}), "", lora=False,
                        log_file=cfg.out / "vllm.log")


def died(stage: Stage, servers: list[tuple[str, Any]], cause: BaseException | None = None) -> None:
    """Raise `ServerExited` (one line) when one of the `servers` a stage used exited during it: nothing of the
    stage is recorded, and the same command restarts the server and resumes the stage (its stores keep what was
    made; the failed episodes are retried)."""
    from proctor.serving.process import ServerExited

    for what, server in servers:
        if (code := server.exited()) is not None:
            raise ServerExited(f"stage {stage.key}: {what} exited with code {code} during it (its log: "
                               f"{server.log_file}); what the stage made is kept, and running the same command "
                               "restarts the server and resumes the stage") from cause


def improves_on_loop_server(cfg: PipelineConfig) -> bool:
    """Whether the improvement samples from the loop's vLLM server (`generation: {engine: vllm}` and an `improve`
    section whose own `generation` is local, the default): its trainer attaches to it and makes it follow its
    iterates. Decided by value, so that a stage run from the written `RUN/config.yaml` decides the same."""
    return cfg.generation.engine == "vllm" and cfg.improve.generation.engine == "local"


def loop_server(cfg: PipelineConfig) -> Any:
    """The `generation` of a trainer that samples from the loop's running vLLM server (`GenerationBackend.url`, the
    port that `served_generation` keeps in `out/vllm.json`; the same from a launched stage's process)."""
    from proctor.rl.served_policy import GenerationBackend

    record = cfg.out / "vllm.json"  # written when the run opens; before that (a dry run) the configured port
    port = json.loads(record.read_text())["port"] if record.is_file() else cfg.generation.server.port
    return GenerationBackend(engine="vllm", url=f"http://127.0.0.1:{port}/v1",
                             server=served_server_config(cfg).model_copy(update={"port": port}))


def served_server_config(cfg: PipelineConfig) -> Any:
    """The loop's vLLM server settings: the `generation` section's, with `weight_reload` (each full-weight iterate
    reloads in place) and `enable_lora` when the improvement trains LoRA on it (its iterates hot-load)."""
    lora = improves_on_loop_server(cfg) and getattr(cfg.improve, "lora", None) is not None
    return cfg.generation.server.model_copy(update={"weight_reload": True,
                                                    "enable_lora": cfg.generation.server.enable_lora or lora})


def served_prm(cfg: PipelineConfig) -> Any:
    """The run's PRM server (`prm_serving: {engine: server}`), on one port kept in `out/prm-server.json` so that a
    resumed run's evaluation configs are the same; on the device plan's `devices.prm` when given."""
    from proctor.pipeline.launch import DevicePlan
    from proctor.pipeline.prm_server import ServedPRM, served_likelihood_prm
    from proctor.serving.vllm_server import free_port

    record = cfg.out / "prm-server.json"
    port = cfg.prm_serving.port or (json.loads(record.read_text())["port"] if record.is_file() else free_port())
    cfg.out.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps({"port": port}))
    env = DevicePlan.visible(cfg.devices.prm)
    if isinstance(cfg.prm, LikelihoodPRMSection):  # its LM on vLLM, scored by prompt_logprobs
        return served_likelihood_prm(cfg.prm_serving, cfg.generation.server, port, cfg.out / "prm-server.log", env)
    return ServedPRM(cfg.prm_serving, port, cfg.out / "prm-server.log", env=env)


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


def _headline(summary: dict[str, Any]) -> dict[str, Any]:
    keys = ("episodes", "successes", "success_rate", "success_ci95", "mean_steps", "mean_score", "budget",
            "invalid_action_rate")
    row = {k: summary[k] for k in keys if k in summary}
    prm = summary.get("prm") or {}
    if prm.get("mean_step_score") is not None:  # the reward-hacking monitor: the PRM's view next to success
        row["prm_mean_score"] = prm["mean_step_score"]
    return row

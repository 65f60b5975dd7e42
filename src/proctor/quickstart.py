"""`proctor quickstart`: the whole AgentPRM loop on a CPU in minutes, as one config of `proctor run`.

    tiny model → searching-expert demonstrations → SFT → π0 → π0's rollouts → MC-Q → PRM Q0 (from π0) →
    evaluate π0, best-of-N(π0, Q0), beam search → π1 against Q0 (household: best-of-N distillation from Q0's LM;
    the generating envs: online DPO) → evaluate π1, best-of-N(π1, Q0) → summary.json + report.html

Each env has a preset sized for 2 CPU cores (`PRESETS`); the sizes can be scaled down for smoke tests. The
run directory resumes stage by stage (`manifest.json`), and the run is reproducible by seed.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from proctor.pipeline import PipelineConfig, run_pipeline

#: the policy sees the last 2 steps and a memory line of its earlier actions (it learns where it has looked); the
#: choice agent ranks the admissible actions itself, so the prompt does not list them
_PROMPT: dict[str, Any] = {"history": 2, "memory": True, "show_admissible": False, "system": ""}


def _policy(temperature: float, kind: str = "choice", prompt: dict[str, Any] | None = None) -> dict[str, Any]:
    """The policy π_k as an agent: `choice` ranks the env's admissible actions by the model's log-likelihood,
    `hf` generates the action (envs without admissible lists); sampled at `temperature`."""
    return {"kind": kind, "model": "$policy", "temperature": temperature, "prompt": prompt or _PROMPT}


#: the scalar-head PRM (packed rows: 1.27× faster than padded, the same losses) and online DPO on fresh train
#: tasks for pairs with a PRM score gap > 0.05: the loop's defaults where no recipe is measured to do better
_HEAD_PRM: dict[str, Any] = {"packing": True, "batch_size": 8, "learning_rate": 5e-4}
_HEAD_DPO: dict[str, Any] = {"split": "train", "tasks": 12, "n_actions": 4, "beta": 0.1, "learning_rate": 2e-4,
                             "batch_size": 8, "epochs": 2, "margin": 0.05}


def _preset(env: str, env_kwargs: dict[str, Any], expert: str, policy: dict[str, Any], *, demos: int,
            sft_steps: int, rollout_tasks: int, prm: dict[str, Any], improve: dict[str, Any], eval_tasks: int,
            beam_tasks: int, n: int) -> dict[str, Any]:
    """What every preset shares, with its sizes: the 128×4 tiny Llama, SFT on the expert's demonstrations (one
    example per step, loss on the agent's turns and 0.2 on the rest), one iteration of rollouts (4 samples per
    task) → MC-Q → PRM → online DPO, the monitor, and the evaluations (π_k, best-of-n(π_k, Q0), and beam search
    2×2 with Q0 at iteration 0 on the first `beam_tasks`)."""
    return {
        "env": env,
        "env_kwargs": env_kwargs,
        "model": {"tiny": {"hidden_size": 128, "layers": 4, "heads": 4, "vocab_size": 3000}},
        "demos": {"agent": {"kind": "expert", "expert": expert}, "split": "train", "tasks": demos},
        "sft": {"steps": sft_steps, "batch_size": 6, "learning_rate": 3e-3, "examples": "steps",
                "context_weight": 0.2, "prompt": policy["prompt"]},
        "policy_agent": {k: v for k, v in policy.items() if k != "model"},
        "iterations": 1,
        "rollout": {"split": "train", "tasks": rollout_tasks, "samples": 4, "batch": 32},
        "targets": {"method": "mc-q", "params": {"gamma": 0.95}},
        "prm": prm,
        "improve": improve,
        "monitor": {"states": 30, "completions": 2},
        "evaluate": {"split": "test", "tasks": eval_tasks, "samples": 1, "batch": 50, "entries": [
            {"name": "policy", "agent": policy},
            {"name": f"best-of-{n} (PRM Q0)", "agent": {"kind": "best-of-n", "n": n, "prm": "$prm", "agent": policy}},
            {"name": "beam 2x2 (PRM Q0)", "iterations": [0], "tasks": beam_tasks,
             "search": {"method": "beam", "agent": policy, "prm": "$prm", "beams": 2, "expansions": 2}},
        ]},
    }


def _household() -> dict[str, Any]:
    """Household, `small` preset (6 receptacles, 4 task types). SFT recipe measured in
    `experiments/sft_household.py`: 1,200 steps of 6 searching-expert steps; the choice policy wins 46–48% of
    200 test tasks greedy, 42% sampled at T = 1 (three seeds). The PRM is the likelihood PRM anchored on the
    demonstrations (`proctor.prm.likelihood`): a scalar head on this backbone does not rank π0's actions
    (README, "What the quickstart does"); 750 steps of 16 labelled and 8 demonstrated steps cost what 600 steps of
    16 and 16 did, and their Q0 gave best-of-8 more on 200 valid tasks for both seeds tried
    (`experiments/prm_recipe_valid.py`). π1 is best-of-8(π0, Q0) distilled into Q0's LM at 700 states of π0's
    rollouts (`proctor.rl.bon_distill`): on 600 valid tasks +7.3 points over π0, where online DPO of π0 against Q0
    (β 0.5, lr 5e-5, the same 700 states) gave +4.8 (README, "What π1's gain is made of")."""
    prm = {"kind": "likelihood", "anchor": "$demos", "anchor_weight": 1.0, "steps": 750, "batch_size": 16,
           "anchor_batch_size": 8, "learning_rate": 1e-3, "warmup_ratio": 1 / 15}
    improve = {"method": "bon-distill", "init": "$prm", "states_from": "$rollouts", "max_states": 700, "n": 8,
               "epochs": 2, "batch_size": 8, "learning_rate": 5e-5}
    return _preset("household", {"preset": "small", "max_steps": 20}, "search", _policy(1.0), demos=2000,
                   sft_steps=1200, rollout_tasks=100, prm=prm, improve=improve, eval_tasks=200, beam_tasks=40, n=8)


def _generating(env: str, expert: str, max_steps: int, history: int | None) -> dict[str, Any]:
    """An env without admissible lists (the policy generates its action with the `hf` agent): the household
    recipe with fewer demonstrations and smaller rollouts (generation is slower than ranking). Not yet tuned:
    the sizes run the loop end to end; how much the policy and the PRM learn at them is not measured."""
    prompt = {"history": history, "memory": history is not None, "show_admissible": False, "system": ""}
    policy = {**_policy(1.0, "hf", prompt), "max_new_tokens": 24}
    prm = {**_HEAD_PRM, "steps": 100}
    return _preset(env, {"max_steps": max_steps}, expert, policy, demos=1000, sft_steps=800, rollout_tasks=24,
                   prm=prm, improve=_HEAD_DPO, eval_tasks=50, beam_tasks=20, n=4)


def _twenty_questions() -> dict[str, Any]:
    """Twenty questions (ArCHer's task): questions from the information-gain expert; 20 turns."""
    return _generating("twenty_questions", "infogain", max_steps=20, history=4)


def _arithmetic() -> dict[str, Any]:
    """Stepwise arithmetic word problems: one calculation per step from the solver expert."""
    return _generating("arithmetic", "solver", max_steps=8, history=None)


#: env name → preset (a `PipelineConfig` without `out`/`seed`)
PRESETS: dict[str, Callable[[], dict[str, Any]]] = {"household": _household, "twenty_questions": _twenty_questions,
                                                    "arithmetic": _arithmetic}


class QuickstartConfig(BaseModel):
    """Which env, where, which seed, and an optional down-scaling of the preset's sizes (smoke tests)."""

    model_config = ConfigDict(extra="forbid")

    env: str = Field(default="household", description="the env whose preset runs (`proctor quickstart --help` "
                     "lists the presets)")
    out: Path = Field(default=Path("runs/quickstart"), description="the run folder (re-run to resume)")
    seed: int = Field(default=0, description="the run's seed: every stage's seed derives from it")
    scale: float = Field(default=1.0, gt=0, le=1, description="multiply task counts and steps by this")


def pipeline_config(cfg: QuickstartConfig) -> PipelineConfig:
    """The quickstart as a `PipelineConfig` (what `proctor run` would run)."""
    if cfg.env not in PRESETS:
        raise ValueError(f"no quickstart preset for env {cfg.env!r}; presets: {', '.join(sorted(PRESETS))}")
    data = PRESETS[cfg.env]()
    if cfg.scale < 1:
        data = _scaled(data, cfg.scale)
    return PipelineConfig.model_validate({**data, "out": cfg.out, "seed": cfg.seed})


def _scaled(data: dict[str, Any], scale: float) -> dict[str, Any]:
    data = copy.deepcopy(data)

    def down(section: dict[str, Any], key: str) -> None:
        if key in section:
            section[key] = max(1, round(section[key] * scale))

    for name in ("demos", "rollout", "improve", "evaluate"):
        down(data[name], "tasks")
    down(data["monitor"], "states")
    down(data["improve"], "max_states")
    if data["improve"].get("method", "online-dpo") == "online-dpo":
        data["improve"]["margin"] = 0.0  # a barely trained PRM scores the candidates within any margin
    down(data["sft"], "steps")
    down(data["prm"], "steps")  # the likelihood PRM
    down(data["prm"].get("training", {}), "max_steps")  # a PRM head
    return data


def run_quickstart(cfg: QuickstartConfig, report: Callable[[str, dict[str, Any]], None] | None = None
                   ) -> dict[str, Any]:
    """Run (or resume) the quickstart; returns the pipeline summary, with `report_html` (the report's path)."""
    from proctor.evaluation.report import build_report

    summary = run_pipeline(pipeline_config(cfg), report)
    summary["report_html"] = str(build_report(cfg.out))
    return summary

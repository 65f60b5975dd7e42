"""`proctor prm eval --trajectories`: a PRM against held-out agent trajectories (the library half).

Three questions, each with its sample size and a 95% interval:

1. Is it more than a constant? The spread of its scores over every held-out step.
2. Does it match the targets (`Step.targets[target]`, e.g. MC-Q from `proctor targets --write-back`)?
   Brier = mean (score − target)² and step AUROC against 𝟙[target ≥ 0.5] (`proctor.stats.auroc`); intervals
   by a percentile bootstrap over tasks (`ranking.bootstrap_by_group`), since steps of one task correlate.
3. Does it rank actions? At held-out states, candidate actions with MC-Q estimates from candidate completions
   (`proctor.rollout.starts.CandidateConfig`, `proctor.credit.candidates`): pairs whose MC-Q differ by
   ≥ margin, accuracy = how often the PRM scores the better one strictly higher (Wilson interval, and a
   bootstrap over tasks). For comparison, the same accuracy of "prefer the expert's action" (score 1 for
   `info["expert_action"]`, 0 otherwise) when the states record it.

A PRM saved with `score_at: state` (a value model V(s)) is read at the end of each state; it scores no
actions, so it gets 1. and 2. only.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from proctor.credit.candidates import by_state, candidate_q
from proctor.credit.montecarlo import MCConfig
from proctor.prm.metrics import brier_score
from proctor.prm.ranking import bootstrap_by_group, pairwise_accuracy, ranking_pairs, spread
from proctor.prm.rendering import render_states
from proctor.prm.scoring import PRMScorer
from proctor.progress import StageProgress
from proctor.prompts.render import prefix_at
from proctor.stats import auroc
from proctor.trajectory import Trajectory


def step_scores(scorer: PRMScorer, trajs: Sequence[Trajectory], score_at: str = "action",
                progress: bool = False) -> list[list[float]]:
    """Per-step scores of every trajectory: after each action (a PRM / Q) or at each state (V(s))."""
    out: list[list[float]] = []
    chunk = max(1, scorer.batch_size * 4)
    with StageProgress("prm eval: steps", total=len(trajs), enabled=progress, unit="trajectories") as bar:
        for i in range(0, len(trajs), chunk):
            part = trajs[i : i + chunk]
            if score_at == "state":
                examples = [render_states(scorer.tokenizer, t, [None] * len(t.steps), marker=scorer.marker)
                            for t in part]
                out += scorer.score_examples(examples)
            else:
                out += scorer.score_trajectories(part)
            bar.advance(len(part))
    return out


def _interval(groups: Sequence[Hashable], fn, n_boot: int, seed: int) -> list[float] | None:
    ci = bootstrap_by_group(groups, fn, n_boot, seed)
    return None if ci is None else list(ci)


def target_agreement(scores: Sequence[float], targets: Sequence[float], tasks: Sequence[Hashable],
                     n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Brier and step AUROC (targets ≥ 0.5 positive) with sample sizes and bootstrap-over-tasks intervals."""
    s, y = np.asarray(scores, dtype=float), np.asarray(targets, dtype=float)
    out: dict[str, Any] = {"steps": len(s), "tasks": len(set(tasks)), "positives": int((y >= 0.5).sum()),
                           "target_mean": float(y.mean()), "target_std": float(y.std()),
                           "interval": f"95% percentile bootstrap over tasks ({n_boot} resamples)"}
    if s.min() >= 0 and s.max() <= 1:
        out["brier"] = brier_score(s, y)
        out["brier_ci95"] = _interval(tasks, lambda i: brier_score(s[i], y[i]), n_boot, seed)
        out["brier_of_constant_mean"] = brier_score(np.full_like(y, y.mean()), y)
    else:
        out["brier"], out["brier_note"] = None, "scores are not probabilities (a raw-valued head)"
    try:
        out["auroc"] = auroc(s, y)
        out["auroc_ci95"] = _interval(tasks, lambda i: auroc(s[i], y[i]), n_boot, seed)
    except ValueError as e:
        out["auroc"], out["auroc_note"] = None, str(e)
    return out


def action_ranking(scorer: PRMScorer, sources: Sequence[Trajectory], completions: Sequence[Trajectory],
                   margin: float = 0.2, mc: MCConfig | None = None, n_boot: int = 1000, seed: int = 0,
                   progress: bool = False) -> dict[str, Any]:
    """Pairwise ranking accuracy at held-out states (module docstring, 3.)."""
    by_id = {t.id: t for t in sources}
    estimates = candidate_q(completions, mc)
    missing = sorted({e.source_id for e in estimates} - set(by_id))
    if missing:
        raise ValueError(f"candidate completions name source trajectory {missing[0]!r}, which is not among the "
                         f"{len(by_id)} trajectories evaluated ({len(missing)} such sources)")
    states = by_state(estimates)
    q = {s: {a: e.q for a, e in acts.items()} for s, acts in states.items()}
    pairs = ranking_pairs(q, margin)
    scored: dict[tuple[str, int], dict[str, float]] = {}
    wanted = sorted({p.state for p in pairs})
    with StageProgress("prm eval: candidates", total=len(wanted), enabled=progress, unit="states") as bar:
        for src, t in wanted:
            actions = sorted(q[(src, t)])
            values = scorer.score_actions(prefix_at(by_id[src], t), actions)
            scored[(src, t)] = dict(zip(actions, values, strict=True))
            bar.advance(1)
    prm = pairwise_accuracy(pairs, lambda s, a: scored[s][a])
    task_of = [by_id[p.state[0]].task_id for p in pairs]
    right = np.asarray([scored[p.state][p.better] > scored[p.state][p.worse] for p in pairs], dtype=float)
    out: dict[str, Any] = {
        "margin": margin, "states_with_candidates": len(states), "states_with_pairs": len(wanted),
        "tasks": len(set(task_of)), "candidates": len(estimates),
        "completions_per_candidate": [min(e.n for e in estimates), max(e.n for e in estimates)],
        "prm": {**prm.as_dict(),
                "ci95_bootstrap_tasks": _interval(task_of, lambda i: float(right[i].mean()), n_boot, seed)},
        "candidate_score_spread": spread([v for acts in scored.values() for v in acts.values()]),
    }
    expert = {s: by_id[s[0]].steps[s[1]].info.get("expert_action") for s in wanted}
    if all(a is not None for a in expert.values()):
        base = pairwise_accuracy(pairs, lambda s, a: float(a == expert[s]))
        out["prefer_expert"] = base.as_dict()
        out["better_is_expert"] = sum(p.better == expert[p.state] for p in pairs) / len(pairs)
    return out


def evaluate_trajectories(scorer: PRMScorer, trajs: Sequence[Trajectory], *, target: str | None = None,
                          completions: Sequence[Trajectory] | None = None, margin: float = 0.2,
                          mc: MCConfig | None = None, n_boot: int = 1000, seed: int = 0,
                          progress: bool = False) -> dict[str, Any]:
    """The report of `proctor prm eval --trajectories` (module docstring)."""
    if not trajs:
        raise ValueError("no trajectories to evaluate")
    score_at = scorer.score_at
    scores = step_scores(scorer, trajs, score_at, progress)
    flat = [x for row in scores for x in row]
    report: dict[str, Any] = {"trajectories": len(trajs), "tasks": len({t.task_id for t in trajs}),
                              "steps": len(flat), "score_at": score_at, "score_spread": spread(flat)}
    if target is not None:
        s, y, g = [], [], []
        for t, row in zip(trajs, scores, strict=True):
            for step, x in zip(t.steps, row, strict=True):
                if target in step.targets:
                    s.append(x)
                    y.append(float(step.targets[target]))
                    g.append(t.task_id)
        if not s:
            have = sorted({k for t in trajs for st in t.steps for k in st.targets})
            raise ValueError(f"no step has target {target!r} (targets present: {have}); run `proctor targets "
                             "--write-back` on these trajectories")
        report["targets"] = {"target": target, **target_agreement(s, y, g, n_boot, seed)}
    if completions is not None:
        if score_at == "state":
            report["ranking"] = {"note": "a value model V(s) (score_at: state) scores no actions"}
        else:
            report["ranking"] = action_ranking(scorer, trajs, completions, margin, mc, n_boot, seed, progress)
    return report

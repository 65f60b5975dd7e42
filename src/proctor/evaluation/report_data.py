"""What `report.html` shows, gathered from any folder of proctor outputs: every evaluation (`summary.json`),
sweep (`sweep.json`), trajectory store not already part of an evaluation (a `proctor run`/`rollout`/
quickstart folder), and training log (`train_log.json`, HF `trainer_state.json`). Plain JSON-ready data."""

from __future__ import annotations

import logging
import os
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from proctor.evaluation.loading import SWEEP_KIND, EvalRun, is_eval_summary, load_run, read_json
from proctor.evaluation.metrics import auroc, calibration_bins, where_it_went_wrong
from proctor.evaluation.summary import NO_TYPE, eval_summary, step_score
from proctor.store import STORE_FORMAT, TrajectoryStore
from proctor.trajectory import Trajectory

log = logging.getLogger(__name__)

#: the Step.targets key shown as the MC-Q target
MCQ = "mc-q"
#: folder names never searched (inside a store, caches)
SKIP_DIRS = {"shards", "__pycache__", "node_modules"}


def _is_store(folder: Path) -> bool:
    path = folder / "manifest.json"
    if not path.is_file():
        return False
    try:
        return read_json(path).get("format") == STORE_FORMAT
    except ValueError:
        return False


def _walk(root: Path) -> list[Path]:
    """Every folder under `root` (itself included), sorted, skipping hidden ones and store internals."""
    found = []
    for here, dirs, _ in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIP_DIRS)
        found.append(Path(here))
    return sorted(found)


def _rel(path: Path, root: Path) -> str:
    rel = path.relative_to(root).as_posix()
    return rel if rel != "." else root.name


def step_view(step: Any, key: str | None) -> dict[str, Any]:
    """One step as the viewer shows it (short field names keep the page small)."""
    meta = step.info.get("candidate_meta") if isinstance(step.info.get("candidate_meta"), dict) else {}
    cands = []
    for c in meta.get("candidates") or []:
        if isinstance(c, dict) and "action" in c:
            cands.append({"action": str(c["action"]), "score": c.get("score"), "count": c.get("count", 1),
                          "chosen": str(c["action"]) == step.action})
    admissible = step.info.get("admissible_actions")
    view = {"o": step.observation, "a": step.action, "rw": step.reward, "v": step.valid, "s": step_score(step, key),
            "q": step.targets.get(MCQ), "tg": {k: v for k, v in step.targets.items() if k != MCQ}, "sc": step.scores,
            "c": cands, "adm": len(admissible) if isinstance(admissible, list) else None}
    if step.reason:
        view["why"] = step.reason
    if step.info.get("expert_action"):
        view["x"] = step.info["expert_action"]
    return view


def trajectory_view(t: Trajectory, key: str | None) -> dict[str, Any]:
    steps = [step_view(s, key) for s in t.steps]
    scores = [s["s"] for s in steps]
    wrong = where_it_went_wrong(scores) if any(s is not None for s in scores) else None
    return {"id": t.id, "task_id": t.task_id, "sample": t.sample, "task": t.task, "split": t.split,
            "task_type": str(t.task_meta.get("task_type", NO_TYPE)), "success": t.success,
            "termination": t.termination, "error": t.error, "env_score": t.score, "agent": t.agent,
            "final": t.final_observation, "steps": steps, "wrong": wrong}


def _annotations(trajs: list[Trajectory]) -> int:
    return sum(len(s.targets) + len(s.scores) for t in trajs for s in t.steps)


def _prm_points(trajs: list[Trajectory], key: str | None) -> dict[str, Any] | None:
    """Last-step PRM score against success, per episode, with its reliability bins and AUROC."""
    pts = []
    for t in trajs:
        last = [x for s in t.steps if (x := step_score(s, key)) is not None]
        if last:
            pts.append((last[-1], t.success))
    if not pts:
        return None
    scores, wins = [p[0] for p in pts], [p[1] for p in pts]
    both = any(wins) and not all(wins)
    return {"n": len(pts), "bins": calibration_bins(scores, wins, bins=5),
            "auroc": auroc(scores, [float(w) for w in wins]) if both else None,
            "points": [[round(s, 4), int(w)] for s, w in pts]}


def _policy(pid: str, name: str, rel: str, source: str, summary: dict[str, Any], trajs: list[Trajectory],
            key: str | None, limit: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    shown = trajs[:limit]
    info = {"id": pid, "name": name, "dir": rel, "source": source, "env": summary.get("env"),
            "split": summary.get("split"), "n": summary.get("n"), "summary": summary,
            "prm_vs_success": _prm_points(trajs, key), "total": len(trajs), "shown": len(shown)}
    return info, [trajectory_view(t, key) for t in shown]


#: JSON files that are never training logs (model, tokenizer and store metadata)
NOT_LOGS = {"tokenizer.json", "tokenizer_config.json", "config.json", "generation_config.json", "manifest.json",
            "special_tokens_map.json", "prm_config.json", "proctor_tiny.json", "vocab.json", "added_tokens.json"}
#: larger JSON files are not read as logs
MAX_LOG_BYTES = 5_000_000


def _training_logs(folders: list[Path], root: Path) -> list[dict[str, Any]]:
    """Loss curves from every JSON file that holds one: `{"losses": [...]}` (proctor's PRM and SFT logs),
    a `log` / `log_history` list of `{step, loss, ...}` (HF `trainer_state.json`, DPO metrics), at the top
    level or one level down; of a run's `checkpoint-*` copies, the one with the most entries."""
    best: dict[str, tuple[int, dict[str, Any]]] = {}
    for folder in folders:
        for path in sorted(folder.glob("*.json")):
            if path.name in NOT_LOGS or path.stat().st_size > MAX_LOG_BYTES:
                continue
            try:
                series = _series(_read_any(path))
            except ValueError as e:
                log.warning("report: skipped %s", e)
                continue
            if not series:
                continue
            run = folder.parent if folder.name.startswith("checkpoint-") else folder
            label = f"{_rel(run, root)}/{path.name}" if run != root else path.name
            size = max(len(v) for v in series.values())
            if label not in best or size > best[label][0]:
                best[label] = (size, {"name": label, "file": _rel(path, root), "series": series})
    return [v for _, v in sorted(best.values(), key=lambda x: x[1]["name"])]


def _read_any(path: Path) -> Any:
    import json

    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: not readable JSON ({e})") from None


def _series(data: Any, depth: int = 0) -> dict[str, list[list[float]]]:
    """{metric: [[step, value], ...]} from the known log layouts (see `_training_logs`)."""
    out: dict[str, list[list[float]]] = defaultdict(list)
    rows: list[Any] = []
    if isinstance(data, list):
        rows = data
    elif isinstance(data, dict):
        losses = data.get("losses")
        if isinstance(losses, list):
            for i, v in enumerate(losses):
                if isinstance(v, int | float) and not isinstance(v, bool):
                    out["loss"].append([i + 1, float(v)])
                elif isinstance(v, dict):
                    _entry(out, v, i + 1)
        for key in ("log_history", "log"):
            if isinstance(data.get(key), list):
                rows = data[key]
                break
    for i, entry in enumerate(rows):
        if isinstance(entry, dict):
            _entry(out, entry, i + 1)
    if not out and depth == 0 and isinstance(data, dict):
        for value in data.values():
            if isinstance(value, dict | list):
                for k, v in _series(value, 1).items():
                    out[k] += v
    return dict(out)


def _entry(out: dict[str, list[list[float]]], entry: dict[str, Any], default_step: int) -> None:
    step = entry.get("step", default_step)
    for k, v in entry.items():
        if (k == "loss" or k.endswith("_loss")) and isinstance(v, int | float) and not isinstance(v, bool):
            out[k].append([float(step), float(v)])


def _unique_names(policies: list[dict[str, Any]]) -> None:
    """Policies sharing a name (the same evaluation in several iterations) get their folder's first
    differing path component, or their whole folder, appended."""
    by_name: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for p in policies:
        by_name[p["name"]].append(p)
    for same in by_name.values():
        if len(same) < 2:
            continue
        heads = [p["dir"].split("/")[0] for p in same]
        for p, head in zip(same, heads, strict=True):
            p["name"] = f"{p['name']} · {head if len(set(heads)) == len(heads) else p['dir']}"


def _with_targets(t: Trajectory, extra: dict[str, list[dict[str, float]]]) -> Trajectory:
    """`t` with the step targets another store holds for the same trajectory id (e.g. its MC-Q labels)."""
    labels = extra.get(t.id)
    if not labels or len(labels) != len(t.steps):
        return t
    steps = [s.model_copy(update={"targets": {**lab, **s.targets}}) for s, lab in zip(t.steps, labels, strict=True)]
    return t.model_copy(update={"steps": steps})


def _made(run: EvalRun) -> datetime:
    """When an evaluation was made: the creation time its trajectory store records (a resume keeps it)."""
    manifest = run.dir / str(run.summary.get("store")) / "manifest.json"
    try:
        made = datetime.fromisoformat(read_json(manifest)["created"])
    except (ValueError, TypeError, KeyError):
        return datetime.max.replace(tzinfo=UTC)  # unknown: after the others, in folder order
    return made if made.tzinfo else made.replace(tzinfo=UTC)


def collect(root: Path, max_trajectories: int = 400) -> dict[str, Any]:
    """Everything the report shows about the outputs under `root` (see module docstring).

    A trajectory store that holds only episodes of an evaluation (its labelled copy) is not a policy of
    its own: its step targets (MC-Q) are shown on the evaluation's steps. Of stores holding the same
    episodes, the most annotated is shown."""
    root = Path(root)
    if not root.is_dir():
        raise ValueError(f"{root}: no such folder")
    folders = _walk(root)
    evals, claimed, sweeps = [], set(), []
    for folder in folders:
        if (folder / "summary.json").is_file() and is_eval_summary(folder / "summary.json"):
            evals.append(load_run(folder))
            claimed.update(p for p in folder.iterdir() if p.is_dir() and _is_store(p))
        if (folder / "sweep.json").is_file():
            sweep = read_json(folder / "sweep.json", SWEEP_KIND)
            sweeps.append({"policy": sweep.get("policy"), "dir": _rel(folder, root), "rows": sweep.get("rows", [])})
    evals.sort(key=_made)  # the order they were made: the first is the baseline
    stores = []
    for folder in folders:
        if folder not in claimed and _is_store(folder):
            trajs = TrajectoryStore.open(folder).load()
            if trajs:
                stores.append((folder, sorted(trajs, key=lambda t: t.key)))
    targets = {t.id: [dict(s.targets) for s in t.steps] for _, trajs in stores for t in trajs
               if any(s.targets for s in t.steps)}
    eval_ids = {t.id for run in evals for t in run.trajectories}
    by_ids: dict[frozenset[str], tuple[Path, list[Trajectory]]] = {}
    for folder, trajs in stores:
        ids = frozenset(t.id for t in trajs)
        if ids <= eval_ids:
            continue
        if ids not in by_ids or _annotations(trajs) > _annotations(by_ids[ids][1]):
            by_ids[ids] = (folder, trajs)
    policies: list[dict[str, Any]] = []
    trajectories: dict[str, list[dict[str, Any]]] = {}
    for run in evals:
        pid = f"p{len(policies)}"
        trajs = [_with_targets(t, targets) for t in run.trajectories]
        info, views = _policy(pid, run.policy, _rel(run.dir, root), "eval", run.summary, trajs,
                              run.summary.get("score_key"), max_trajectories)
        policies.append(info)
        trajectories[pid] = views
    for folder, trajs in sorted(by_ids.values(), key=lambda x: x[0]):
        name = _rel(folder, root)
        summary = {"policy": name, "env": trajs[0].env, "split": trajs[0].split, **eval_summary(trajs)}
        pid = f"p{len(policies)}"
        info, views = _policy(pid, name, name, "store", summary, trajs, None, max_trajectories)
        policies.append(info)
        trajectories[pid] = views
    if not policies:
        raise ValueError(f"{root}: no evaluation (summary.json, sweep.json) or trajectory store under it; nothing "
                         "to report")
    _unique_names(policies)
    return {"root": str(root.resolve()), "title": root.resolve().name, "policies": policies, "sweeps": sweeps,
            "paired": _paired_rows(root), "training": _training_logs(folders, root), "trajectories": trajectories}


def _paired_rows(root: Path) -> list[dict[str, Any]]:
    """A `proctor run` or quickstart folder's result rows paired with its first row (`vs_first` in its
    summary.json, `proctor.pipeline.run.paired_with_first`); none for other folders."""
    path = root / "summary.json"
    if not path.is_file() or is_eval_summary(path):
        return []
    results = read_json(path).get("results")
    fields = {"pairs", "diff", "diff_ci95", "b01", "b10", "p_value", "iteration", "policy"}
    return [{k: r[k] for k in ("iteration", "policy", "vs_first")} for r in results or []
            if isinstance(r, dict) and isinstance(r.get("vs_first"), dict) and fields <= r["vs_first"].keys()
            and r["vs_first"]["diff"] is not None]

"""Score every step of evaluated trajectories with a PRM, into a second trajectory store (resumable).

The rollout store stays as the rollout wrote it; `score_store` writes each trajectory again with
`Step.scores[key]` filled (one forward pass per trajectory, `PRMScorer.score_trajectories`), skipping
those already scored. The scores' store records which PRM (its folder and files) and key wrote them
(`claim_scores`, by the one rule of `proctor.outputs`), so it never holds the scores of two PRMs. A trajectory
too long for the PRM's `max_length` is copied unscored and named in the returned list."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from proctor.outputs import model_identity
from proctor.progress import StageProgress
from proctor.store import TrajectoryStore, open_for_run
from proctor.trajectory import Trajectory

log = logging.getLogger(__name__)


def with_scores(traj: Trajectory, scores: Sequence[float], key: str) -> Trajectory:
    """A copy of `traj` with `Step.scores[key]` = the t-th score on step t."""
    if len(scores) != len(traj.steps):
        raise ValueError(f"trajectory {traj.id}: {len(scores)} scores for {len(traj.steps)} steps")
    steps = [s.model_copy(update={"scores": {**s.scores, key: float(x)}}) for s, x in zip(traj.steps, scores,
                                                                                           strict=True)]
    return traj.model_copy(update={"steps": steps})


def claim_scores(out: Path, prm_path: Path, key: str = "prm", overwrite: bool = False) -> TrajectoryStore:
    """The store `out` for the scores under `key` of the PRM at `prm_path`, locked (`proctor.store.open_for_run`):
    the same PRM's and key's scores resume, another's are refused in one line naming the field that differs
    (`OutputExistsError`), `overwrite` empties it first. Cheap: claim it before any episode runs."""
    identity = {"prm": model_identity(prm_path), "score_key": key}
    return open_for_run(out, "scores", identity, overwrite=overwrite, what="PRM scores")[0]


def score_store(trajs: Sequence[Trajectory], prm_path: Path, store: TrajectoryStore, key: str = "prm",
                batch_size: int = 8, progress: bool = True, device: str = "auto", dtype: str | None = "auto",
                server: Any = None) -> tuple[list[Trajectory], list[str]]:
    """Score `trajs` with the PRM at `prm_path` (opened by `proctor.prm.ref.PRMRef` on `device` in `dtype`, or on
    `server`, a `ServerRef`) into `store` (claimed for them: `claim_scores`); returns the scored
    trajectories (in the order of `trajs`) and the ids of those that could not be scored (copied without
    scores)."""
    from proctor.prm.ref import PRMRef
    from proctor.prm.scoring import ScoringError

    done = {t.id: t for t in store.load()}
    todo = [t for t in trajs if t.id not in done and t.steps]
    for t in trajs:  # episodes without steps (crashed at reset) have nothing to score
        if t.id not in done and not t.steps:
            store.append(t)
            done[t.id] = t
    unscored: list[str] = [t.id for t in done.values() if t.steps and not any(key in s.scores for s in t.steps)]
    if todo:
        scorer = PRMRef(prm=prm_path, prm_server=server, prm_batch=batch_size, device=device, dtype=dtype).open()
        with StageProgress("prm scoring", total=len(todo), unit="trajectories", enabled=progress) as bar:
            for i in range(0, len(todo), batch_size):
                chunk = todo[i:i + batch_size]
                try:
                    scored = [with_scores(t, s, key) for t, s in zip(chunk, scorer.score_trajectories(chunk),
                                                                     strict=True)]
                except ScoringError:
                    scored = []
                    for t in chunk:
                        try:
                            scored.append(with_scores(t, scorer.score_trajectories([t])[0], key))
                        except ScoringError as e:
                            log.warning("%s", e)
                            unscored.append(t.id)
                            scored.append(t)
                for t in scored:
                    store.append(t)
                    done[t.id] = t
                bar.advance(len(chunk))
    return [done[t.id] for t in trajs], unscored

"""`Manifest(reuse=...)` / `proctor run --reuse`: a new run copies the stages of an earlier one whose config and
inputs it shares, and runs every stage that reads what it made itself."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from proctor.pipeline.manifest import Manifest


def run_three_stages(root: Path, lr: float, width: int, reuse: Path | None = None) -> tuple[Manifest, list[str]]:
    """model (config: width) → train (reads the model by config path only, like SFT; config: lr) → eval (input:
    the trained folder). Returns the manifest and the stages that ran."""
    manifest = Manifest(root, {"out": str(root), "lr": lr, "width": width}, seed=0, reuse=reuse)
    ran: list[str] = []

    def make(key: str, folder: str, text: str):
        def run() -> str:
            ran.append(key)
            (root / folder).mkdir(parents=True, exist_ok=True)
            (root / folder / "done.txt").write_text(text)
            return text
        return run

    manifest.stage("model", iteration=0, inputs=[], outputs=[root / "model" / "done.txt"], config={"width": width},
                   run=make("model", "model", f"width {width}"))
    manifest.stage("train", iteration=0, inputs=[], outputs=[root / "policy" / "done.txt"],
                   config={"lr": lr, "model": str(root / "model")}, run=make("train", "policy", f"lr {lr}"))
    manifest.stage("eval", iteration=0, inputs=[root / "policy"], outputs=[root / "eval" / "done.txt"],
                   config={"out": str(root / "eval")}, run=make("eval", "eval", "eval"),
                   result=lambda text: {"made": text})
    return manifest, ran


def test_the_same_stages_are_copied_and_recorded_with_their_source(tmp_path):
    first, ran = run_three_stages(tmp_path / "a", lr=0.1, width=8)
    assert ran == ["model", "train", "eval"]
    again, ran = run_three_stages(tmp_path / "b", lr=0.1, width=8, reuse=tmp_path / "a")
    assert ran == []
    for key, rec in again.data["stages"].items():
        before = first.data["stages"][key]
        assert rec["reused_from"] == str(tmp_path / "a") and rec["seconds"] == before["seconds"]
        # the config is this run's (its own folder), the outputs are copied into it
        assert json.dumps(rec["config"]).count(str(tmp_path / "a")) == 0
        assert (tmp_path / "b" / rec["outputs"][0]).read_text() == (tmp_path / "a" / before["outputs"][0]).read_text()
    assert again.data["stages"]["eval"]["result"] == first.data["stages"]["eval"]["result"] == {"made": "eval"}


def test_a_changed_stage_runs_and_so_does_every_stage_that_reads_it(tmp_path):
    run_three_stages(tmp_path / "a", lr=0.1, width=8)
    manifest, ran = run_three_stages(tmp_path / "b", lr=0.2, width=8, reuse=tmp_path / "a")
    assert ran == ["train", "eval"]  # eval's config is unchanged, but it reads the new policy
    assert "reused_from" in manifest.data["stages"]["model"]
    assert (tmp_path / "b" / "policy" / "done.txt").read_text() == "lr 0.2"
    # a stage that names a re-made folder only in its config (the model, for SFT) runs too
    _, ran = run_three_stages(tmp_path / "c", lr=0.1, width=16, reuse=tmp_path / "a")
    assert ran == ["model", "train", "eval"]


def test_a_resumed_reusing_run_keeps_what_it_made_and_copies_over_a_partial_attempt(tmp_path):
    run_three_stages(tmp_path / "a", lr=0.1, width=8)
    (tmp_path / "b" / "model").mkdir(parents=True)
    (tmp_path / "b" / "model" / "stale.txt").write_text("from an interrupted attempt")
    _, ran = run_three_stages(tmp_path / "b", lr=0.2, width=8, reuse=tmp_path / "a")
    assert ran == ["train", "eval"] and not (tmp_path / "b" / "model" / "stale.txt").exists()
    _, ran = run_three_stages(tmp_path / "b", lr=0.2, width=8, reuse=tmp_path / "a")
    assert ran == []  # resumed: all done here


def test_reuse_names_a_folder_without_a_run_a_broken_manifest_or_the_run_itself(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"no run to reuse stages from"):
        run_three_stages(tmp_path / "b", lr=0.1, width=8, reuse=tmp_path / "missing")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "manifest.json").write_text('{"config": {}}')
    with pytest.raises(ValueError, match=r"broken/manifest.json: not a `proctor run` manifest to reuse stages from"):
        run_three_stages(tmp_path / "b", lr=0.1, width=8, reuse=tmp_path / "broken")
    run_three_stages(tmp_path / "a", lr=0.1, width=8)
    with pytest.raises(ValueError, match="cannot reuse its own folder"):
        run_three_stages(tmp_path / "a", lr=0.1, width=8, reuse=tmp_path / "a")

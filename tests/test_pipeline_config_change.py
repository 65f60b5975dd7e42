"""A run folder of another config: `proctor run` refuses it in one line naming the fields that differ, and
`--dry-run` says so instead of marking the folder's stages done."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from proctor.cli import app
from proctor.pipeline.manifest import MANIFEST, Manifest, config_differences, config_mismatch

QUICKSTART = Path(__file__).resolve().parents[1] / "examples" / "pipeline" / "quickstart-household.yaml"


def test_config_differences_name_every_field_that_differs():
    old = {"sft": {"steps": 1200, "lr": 0.003}, "seed": 0, "evaluate": {"entries": [{"n": 8}, {"n": 2}]},
           "gone": True, "tags": [1, 2]}
    new = {"sft": {"steps": 800, "lr": 0.003}, "seed": 0, "evaluate": {"entries": [{"n": 8}, {"n": 4}]},
           "added": "x", "tags": [1, 2, 3]}
    assert config_differences(old, new) == [
        "sft.steps: 1200 → 800", "evaluate.entries.1.n: 2 → 4", 'added: (unset) → "x"', "tags: [1, 2] → [1, 2, 3]",
        "gone: true → (unset)"]
    assert config_differences(new, new) == []
    assert config_differences({"a": "x" * 100}, {"a": "y"}) == [f'a: "{"x" * 58}… → "y"']


def test_config_mismatch_names_the_first_five_and_counts_the_rest():
    old = {f"f{i}": i for i in range(8)}
    line = config_mismatch(Path("runs/x") / MANIFEST, old, {**old, **{f"f{i}": -i for i in range(1, 8)}})
    assert line == ("runs/x/manifest.json: the run in this directory has another config (f1: 1 → -1; f2: 2 → -2; "
                    "f3: 3 → -3; f4: 4 → -4; f5: 5 → -5; and 2 more); resume it with the same config, or choose a "
                    "new output directory")
    assert config_mismatch(Path("runs/x") / MANIFEST, old, dict(old)) is None


def test_a_manifest_refuses_another_config_naming_the_field(tmp_path):
    Manifest(tmp_path, {"sft": {"steps": 1200}, "seed": 0}, seed=0)
    Manifest(tmp_path, {"sft": {"steps": 1200}, "seed": 0}, seed=0)  # the same config resumes
    with pytest.raises(ValueError, match=r"has another config \(sft\.steps: 1200 → 800\); resume it"):
        Manifest(tmp_path, {"sft": {"steps": 800}, "seed": 0}, seed=0)


def dry_run(config: Path) -> list[str]:
    res = CliRunner().invoke(app, ["run", str(config), "--dry-run"], terminal_width=400)
    assert res.exit_code == 0, res.output
    return res.output.splitlines()


def test_dry_run_marks_done_stages_only_for_the_same_config(tmp_path, monkeypatch):
    from proctor.pipeline import PipelineConfig

    monkeypatch.chdir(tmp_path)
    data = yaml.safe_load(QUICKSTART.read_text())
    (tmp_path / "loop.yaml").write_text(yaml.safe_dump(data))
    recorded = PipelineConfig.model_validate(data).model_dump(mode="json")
    out = tmp_path / data["out"]
    out.mkdir(parents=True)
    stages = {"demos": {"outputs": []}, "iter-0/sft": {"outputs": []}}
    (out / MANIFEST).write_text(json.dumps({"config": recorded, "stages": stages}))
    lines = dry_run(tmp_path / "loop.yaml")
    assert [line.split()[0] for line in lines if line.endswith("(done)")] == ["demos", "iter-0/sft"]
    assert not any("another config" in line for line in lines)

    data["sft"]["steps"] = 800
    (tmp_path / "loop.yaml").write_text(yaml.safe_dump(data))
    lines = dry_run(tmp_path / "loop.yaml")
    assert not any(line.endswith("(done)") for line in lines)
    note = next(line for line in lines if "another config" in line)
    assert note.startswith("note: no stage is done for this config, and `proctor run` stops at once: ")
    assert "has another config (sft.steps: 1200 → 800); resume it" in note

"""experiments/prm_recipe_valid.py: its variant syntax, and a run end to end on a scaled-down household quickstart
(the run's Q0 and a retrained one, each as best-of-N on valid tasks paired with π0)."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments"))
recipe = importlib.import_module("prm_recipe_valid")


def test_variant_syntax():
    assert recipe.variant("base") == ("base", None)
    assert recipe.variant('a8={"anchor_batch_size": 8, "steps": 750}') == ("a8", {"anchor_batch_size": 8, "steps": 750})
    for bad, message in (("a8", "give base or NAME=JSON"), ("a8={steps", "not JSON"), ("a8=[1]", "an object")):
        with pytest.raises(argparse.ArgumentTypeError, match=message):
            recipe.variant(bad)


def test_a_folder_without_a_finished_run_is_one_line(tmp_path, capsys):
    (tmp_path / "run").mkdir()
    with pytest.raises(SystemExit):
        recipe.main(["--run", str(tmp_path / "run"), "--work", str(tmp_path / "w"), "--variant", "base"])
    assert "no manifest.json" in capsys.readouterr().err
    (tmp_path / "run" / "manifest.json").write_text(json.dumps({"stages": {}}))
    with pytest.raises(SystemExit):
        recipe.main(["--run", str(tmp_path / "run"), "--work", str(tmp_path / "w"), "--variant", "base"])
    assert "no finished stage iter-0/prm" in capsys.readouterr().err


@pytest.mark.slow
def test_end_to_end_on_a_scaled_quickstart(tmp_path):
    from proctor.quickstart import QuickstartConfig, run_quickstart

    run_quickstart(QuickstartConfig(out=tmp_path / "run", scale=0.01))
    result = recipe.main(["--run", str(tmp_path / "run"), "--work", str(tmp_path / "work"), "--tasks", "3",
                          "--n", "2", "--variant", "base", "--variant", 'short={"steps": 2}'])
    base, short = result["variants"]["base"], result["variants"]["short"]
    assert base["prm_train_s"] is None and base["pairs"] == short["pairs"] == 3
    assert short["fields"] == {"steps": 2} and short["prm_train_s"] > 0
    saved = json.loads((tmp_path / "work" / "short" / "prm" / "likelihood_prm.json").read_text())
    assert saved["config"]["steps"] == 2 and saved["config"]["anchor_weight"] == 1.0  # the run's config, one field changed
    assert 0.0 <= result["pi0_success"] <= 1.0 and 0.0 <= short["success"] <= 1.0
    again = recipe.main(["--run", str(tmp_path / "run"), "--work", str(tmp_path / "work"), "--tasks", "3",
                         "--n", "2", "--variant", 'short={"steps": 2}'])
    assert again["variants"]["short"]["prm_train_s"] == saved["wall_s"]  # reused, not retrained
    with pytest.raises(ValueError, match="a PRM trained with another steps"):  # the same name, other fields
        recipe.main(["--run", str(tmp_path / "run"), "--work", str(tmp_path / "work"), "--tasks", "3",
                     "--n", "2", "--variant", 'short={"steps": 3}'])
    with pytest.raises(ValueError, match="holds an evaluation of 3 episodes, not 2 tasks"):
        recipe.main(["--run", str(tmp_path / "run"), "--work", str(tmp_path / "work"), "--tasks", "2",
                     "--variant", "base"])

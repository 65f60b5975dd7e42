"""The quickstart is one config of `proctor run`: its presets validate, scale down, and name the stages of
the AgentPRM loop (the end-to-end run is `tests/test_pipeline.py` and CI's `proctor quickstart`)."""

from __future__ import annotations

import pytest

from proctor.quickstart import PRESETS, QuickstartConfig, pipeline_config


@pytest.mark.parametrize("env", sorted(PRESETS))
def test_presets_are_valid_pipeline_configs(env, tmp_path):
    cfg = pipeline_config(QuickstartConfig(env=env, out=tmp_path))
    names = [e.name for e in cfg.evaluate.entries]
    assert cfg.env == env and cfg.iterations >= 1 and len(names) == len(set(names))
    kinds = {e.agent["kind"] if e.agent else e.search["method"] for e in cfg.evaluate.entries}
    assert {"best-of-n", "beam"} <= kinds  # the policy is compared with search against its PRM


def test_scale_shrinks_sizes_but_not_below_one(tmp_path):
    full = pipeline_config(QuickstartConfig(out=tmp_path))
    small = pipeline_config(QuickstartConfig(out=tmp_path, scale=0.0001))
    assert small.demos.tasks == small.rollout.tasks == small.evaluate.tasks == 1
    assert small.sft.steps == 1 < full.sft.steps
    assert small.improve.max_states == 1 < full.improve.max_states  # π1's training states: π0's rollouts
    assert str(small.improve.states_from) == str(full.improve.states_from) == "$rollouts"
    assert small.evaluate.entries == full.evaluate.entries


def test_unknown_env_is_one_clear_error(tmp_path):
    with pytest.raises(ValueError, match="no quickstart preset for env 'nope'"):
        pipeline_config(QuickstartConfig(env="nope", out=tmp_path))


@pytest.mark.slow
@pytest.mark.parametrize("env", ["twenty_questions", "arithmetic"])
def test_generating_presets_run_end_to_end(env, tmp_path):
    from proctor.quickstart import run_quickstart

    summary = run_quickstart(QuickstartConfig(env=env, out=tmp_path / "run", scale=0.02))
    assert [(r["iteration"], r["policy"]) for r in summary["results"]] == [
        (0, "policy"), (0, "best-of-4 (PRM Q0)"), (0, "beam 2x2 (PRM Q0)"), (1, "policy"), (1, "best-of-4 (PRM Q0)")]
    assert [m["iteration"] for m in summary["monitor"]] == [0, 1]
    assert (tmp_path / "run" / "report.html").exists()

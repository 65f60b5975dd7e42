"""`proctor.prm.ref.PRMRef`: which PRM a config scores with, declared once, and `PRMRef.open`, the one way a PRM is
opened; the earlier openers still import, with a warning."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from proctor.agents.registry import ServerRef
from proctor.prm.ref import PRMRef

SERVER = ServerRef(base_url="http://127.0.0.1:9/v1", api_key_env="PRM_KEY")


class FakeRemote:
    """Stands in for `RemotePRMScorer`, which asks the server's /health when built."""

    def __init__(self, base_url: str, api_key_env: str, batch_size: int):
        self.base_url, self.api_key_env, self.batch_size = base_url, api_key_env, batch_size


@pytest.fixture
def no_server(monkeypatch):
    import proctor.prm.remote

    monkeypatch.setattr(proctor.prm.remote, "RemotePRMScorer", FakeRemote)


def test_a_ref_needs_a_prm_folder_or_a_server(tmp_path):
    with pytest.raises(ValidationError, match="prm\n.*a PRM folder is needed"):
        PRMRef()
    with pytest.raises(ValidationError, match="no PRM folder there"):
        PRMRef(prm=str(tmp_path / "missing"))
    assert PRMRef(prm=tmp_path).prm == str(tmp_path)  # a Path is read as its text
    assert PRMRef(prm="served-head", prm_server=SERVER).prm == "served-head"  # a served head: only a name


def test_open_gives_a_local_head_s_scorer_on_the_ref_s_device_and_batch(scalar_prm_dir):
    from proctor.prm.scoring import PRMScorer

    scorer = PRMRef(prm=scalar_prm_dir, prm_batch=3, device="cpu", dtype="float32").open()
    assert isinstance(scorer, PRMScorer) and scorer.batch_size == 3
    assert next(scorer.prm.parameters()).device.type == "cpu"


def test_open_reaches_a_served_head_through_prm_server(no_server):
    scorer = PRMRef(prm="served-head", prm_server=SERVER, prm_batch=5).open()
    assert (scorer.base_url, scorer.api_key_env, scorer.batch_size) == (SERVER.base_url, "PRM_KEY", 5)


def test_every_config_that_scores_with_a_prm_shares_the_ref_s_field_descriptions():
    from proctor.evaluation.config import EvalConfig
    from proctor.integrations.trl import RewardConfig
    from proctor.rl.bon_distill import BonDistillConfig
    from proctor.rl.online_dpo import OnlineDPOConfig
    from proctor.rl.ppo import PPOConfig
    from proctor.search import BeamConfig, BestOfNConfig

    server = PRMRef.model_fields["prm_server"].description
    batch = PRMRef.model_fields["prm_batch"].description
    configs = [EvalConfig, RewardConfig, BonDistillConfig, OnlineDPOConfig, PPOConfig, BeamConfig, BestOfNConfig]
    assert {c.model_fields["prm_server"].description for c in configs} == {server}
    assert {BestOfNConfig.model_fields["prm_batch"].description, EvalConfig.model_fields["prm_batch_size"].description,
            RewardConfig.model_fields["prm_batch_size"].description} == {batch}


@pytest.mark.parametrize(("module", "old"), [("proctor.prm.likelihood", "open_scorer"),
                                             ("proctor.search.scorer", "load_scorer")])
def test_the_earlier_openers_import_with_a_warning_and_open_through_the_ref(module, old, no_server):
    import importlib

    with pytest.warns(DeprecationWarning, match=f"{module}.{old} is now proctor.prm.ref.open_scorer"):
        opener = getattr(importlib.import_module(module), old)
    scorer = opener("served-head", 7, "cpu", "auto", SERVER)
    assert (scorer.base_url, scorer.batch_size) == (SERVER.base_url, 7)


def test_the_search_configs_earlier_base_imports_as_the_ref():
    with pytest.warns(DeprecationWarning, match="proctor.search.scorer.PRMScoring is now proctor.prm.ref.PRMRef"):
        from proctor.search.scorer import PRMScoring
    assert PRMScoring is PRMRef

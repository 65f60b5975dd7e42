"""proctor.registry: the one registry helper, and every registry of the package built on it."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict, Field

from proctor.registry import Registry, UnknownName, did_you_mean, validate_config


def test_a_registry_adds_decorates_lists_and_refuses_a_second_entry_of_a_name():
    reg = Registry[int]("credit method", {"mc-v": 2})
    reg.add("mc-q", 1)

    @reg.register("spa")
    def spa() -> None: ...

    assert reg["spa"] is spa and list(reg) == ["mc-v", "mc-q", "spa"] and len(reg) == 3
    assert reg.names() == ["mc-q", "mc-v", "spa"] and list(reg.sorted()) == ["mc-q", "mc-v", "spa"]
    assert "mc-q" in reg and reg.get("nope") is None  # a Mapping: `get` has a default, `[]` is strict
    with pytest.raises(ValueError, match="credit method 'mc-q' is already registered"):
        reg.add("mc-q", 3)


def test_an_unknown_name_is_one_line_with_the_closest_and_the_known_names():
    reg = Registry[int]("credit method", {"mc-q": 1, "mc-v": 2, "preference": 3})
    with pytest.raises(UnknownName) as err:
        reg["mc_q"]
    assert str(err.value) == "unknown credit method 'mc_q' (did you mean 'mc-q'?); known: mc-q, mc-v, preference"
    assert isinstance(err.value, KeyError) and isinstance(err.value, ValueError)  # callers catch either
    with pytest.raises(UnknownName, match=r"unknown credit method 'zzz'; known: mc-q, mc-v, preference$"):
        reg["zzz"]  # nothing close: no guess


def test_one_did_you_mean_hint_for_every_unknown_name_field_or_argument():
    assert did_you_mean("stesp", ["seed", "steps"]) == " (did you mean 'steps'?)"
    assert did_you_mean("zzz", ["steps"]) == "" and did_you_mean(3, ["steps"]) == ""
    src = Path(__file__).resolve().parents[1] / "src" / "proctor"
    guessing = sorted(p.relative_to(src).as_posix() for p in src.rglob("*.py") if "get_close_matches" in p.read_text())
    assert guessing == ["registry.py"]  # the others call `did_you_mean`


def test_validate_config_names_the_entry_and_each_bad_field():
    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        gamma: float = Field(default=0.9, le=1)

    assert validate_config(Params, None, "method 'mc-q'").gamma == 0.9
    made = Params(gamma=0.5)
    assert validate_config(Params, made, "method 'mc-q'") is made
    with pytest.raises(ValueError, match=r"^bad parameters for method 'mc-q': gamma: .*; gama: Extra inputs"):
        validate_config(Params, {"gamma": 2, "gama": 1}, "method 'mc-q'")


@pytest.mark.parametrize(("lookup", "typo", "says"), [
    ("proctor.envs.registry:entry", "housheold", "unknown environment 'housheold' (did you mean 'household'?)"),
    ("proctor.credit.registry:get_method", "mc_q", "unknown credit method 'mc_q' (did you mean 'mc-q'?)"),
    ("proctor.search.registry:get_search", "beem", "unknown search method 'beem' (did you mean 'beam'?)"),
    ("proctor.rl.trainers:trainer", "grpp", "unknown training method 'grpp' (did you mean 'grpo'?)"),
    ("proctor.prm.objectives:objective", "bce2", "unknown PRM loss 'bce2' (did you mean 'bce'?)"),
    ("proctor.agents.registry:agent_config", "rnadom", "unknown agent kind 'rnadom' (did you mean 'random'?)"),
])
def test_every_registry_of_the_package_is_one_and_guesses_a_typo(lookup, typo, says):
    import importlib

    import proctor.credit
    import proctor.envs
    import proctor.search  # noqa: F401  (fill their registries)

    module, name = lookup.split(":")
    with pytest.raises(UnknownName) as err:
        getattr(importlib.import_module(module), name)(typo)
    assert str(err.value).startswith(says)


def test_the_rl_math_families_and_the_experts_are_registries():
    from proctor.envs.experts import EXPERTS, ExpertUnavailable, expert_policy
    from proctor.rl.advantages import ADVANTAGES
    from proctor.rl.dpo_losses import DPO_LOSSES
    from proctor.rl.policy_losses import KL_PENALTIES, POLICY_LOSSES
    from proctor.rl.td import TARGET_HEADS, TRAJECTORY_FILTERS

    for reg in (ADVANTAGES, DPO_LOSSES, KL_PENALTIES, POLICY_LOSSES, TARGET_HEADS, TRAJECTORY_FILTERS):
        assert isinstance(reg, Registry), reg
    import proctor.envs  # noqa: F401  (registers the built-in envs' experts)

    assert isinstance(EXPERTS["household"], Registry) and expert_policy("household", "search")
    with pytest.raises(ExpertUnavailable, match="no expert 'serch' for env 'household'"):
        expert_policy("household", "serch")

"""proctor.renames: an old config field or module attribute keeps working, with one line naming the new one."""

from __future__ import annotations

import logging
import types

import pytest

from proctor.renames import moved_names, renamed_fields


def test_an_old_field_is_read_as_its_new_one_with_a_note(caplog):
    with caplog.at_level(logging.WARNING, logger="proctor.renames"):
        out = renamed_fields({"base": {"kind": "random"}, "batch": 4, "n": 2}, {"base": "agent", "batch": "prm_batch"},
                             "best-of-n agent: ")
    assert out == {"agent": {"kind": "random"}, "prm_batch": 4, "n": 2}
    assert [r.getMessage() for r in caplog.records] == [
        "best-of-n agent: base: now `agent` (read as it; rename it in the config)",
        "best-of-n agent: batch: now `prm_batch` (read as it; rename it in the config)"]


def test_new_names_or_no_mapping_pass_as_they_are(caplog):
    data = {"agent": "random", "prm_batch": 4}
    with caplog.at_level(logging.WARNING, logger="proctor.renames"):
        assert renamed_fields(data, {"batch": "prm_batch"}) is data
        assert renamed_fields("random", {"batch": "prm_batch"}) == "random"
    assert not caplog.records


def test_both_spellings_is_an_error_naming_the_one_to_keep():
    with pytest.raises(ValueError, match="batch and prm_batch both given; `batch` is the old name of `prm_batch`: "
                                         "keep `prm_batch`"):
        renamed_fields({"batch": 4, "prm_batch": 8}, {"batch": "prm_batch"})


def test_a_moved_module_attribute_resolves_with_a_deprecation_warning(monkeypatch):
    import sys

    module = types.ModuleType("proctor_fake_module")
    module.NewName = object()
    module.__getattr__ = moved_names("proctor_fake_module", {"OldName": "NewName"})
    monkeypatch.setitem(sys.modules, "proctor_fake_module", module)
    with pytest.warns(DeprecationWarning, match="proctor_fake_module.OldName is now proctor_fake_module.NewName"):
        assert module.OldName is module.NewName
    with pytest.raises(AttributeError, match="has no attribute 'Other'"):
        module.Other  # noqa: B018


def test_a_name_moved_to_another_module_resolves_there_with_a_deprecation_warning(monkeypatch):
    import sys

    module = types.ModuleType("proctor_fake_old")
    module.__getattr__ = moved_names("proctor_fake_old", {"Old": "proctor.renames:moved_names"})
    monkeypatch.setitem(sys.modules, "proctor_fake_old", module)
    with pytest.warns(DeprecationWarning, match="proctor_fake_old.Old is now proctor.renames.moved_names"):
        assert module.Old is moved_names

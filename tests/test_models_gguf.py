"""GGUF checkpoints without a real model: which paths name one, and the one-line errors (the real model's
tests are in test_realmodel.py)."""

from __future__ import annotations

import importlib.util

import pytest
from typer.testing import CliRunner

from proctor.cli import app
from proctor.models import convert_gguf, load
from proctor.models.gguf import find_gguf
from proctor.models.loading import check_model_source


def test_find_gguf_names_a_file_or_the_one_in_a_folder(tmp_path):
    (tmp_path / "m.gguf").write_bytes(b"")
    assert find_gguf(tmp_path / "m.gguf") == tmp_path / "m.gguf"
    assert find_gguf(tmp_path) == tmp_path / "m.gguf"
    assert find_gguf(tmp_path / "missing") is None and find_gguf("org/name") is None
    (tmp_path / "config.json").write_text("{}")
    assert find_gguf(tmp_path) is None  # a model folder, whatever else it holds
    (tmp_path / "config.json").unlink()
    (tmp_path / "n.gguf").write_bytes(b"")
    with pytest.raises(ValueError, match="holds 2 .gguf files"):
        find_gguf(tmp_path)


def test_missing_gguf_package_is_one_line_saying_what_to_install(tmp_path, monkeypatch):
    (tmp_path / "m.gguf").write_bytes(b"")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "gguf" else real(name, *a))
    with pytest.raises(ImportError, match="pip install gguf"):
        load(tmp_path / "m.gguf")


def test_a_folder_loader_points_to_convert(tmp_path):
    (tmp_path / "m.gguf").write_bytes(b"")
    with pytest.raises(FileNotFoundError, match="proctor models convert"):
        check_model_source(tmp_path / "m.gguf")


def test_convert_refuses_what_it_cannot_use(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file or folder"):
        convert_gguf(tmp_path / "missing.gguf", tmp_path / "out")
    (tmp_path / "m.gguf").write_bytes(b"")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "x").write_text("")
    with pytest.raises(FileExistsError, match="not an empty folder"):
        convert_gguf(tmp_path / "m.gguf", tmp_path / "out")
    result = CliRunner().invoke(app, ["models", "convert", str(tmp_path / "m.gguf"), str(tmp_path / "o"),
                                      "--dtype", "int8"])
    assert result.exit_code == 2 and "choose float32 or bfloat16" in result.output

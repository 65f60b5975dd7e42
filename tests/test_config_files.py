"""A config file reads as its author wrote it: numbers as YAML users write them (`3e-4`) are numbers wherever
proctor reads a YAML config, and a file that is not a config mapping is one error line naming it."""

from __future__ import annotations

import pytest
import yaml
from typer.testing import CliRunner

from proctor.cli import app
from proctor.yaml_config import load_yaml, read_yaml_config


def test_exponent_numbers_are_floats_as_in_yaml_1_2():
    text = ("a: 3e-4\nb: 1e-5\nc: 5.0e-5\nd: 1e5\ne: 1.5E+3\nf: -2e-3\ng: .5e1\n"
            "n: 10\no: 0x1f\np: 1_000\nq: '3e-4'\nr: 3e\ns: e5\nt: 3e-4x\nu: 0.5\nv: .inf")
    got = load_yaml(text)
    assert {k: got[k] for k in "abcdefg"} == {"a": 3e-4, "b": 1e-5, "c": 5e-5, "d": 1e5, "e": 1.5e3, "f": -2e-3,
                                               "g": 5.0}
    assert all(isinstance(got[k], float) for k in "abcdefg")
    assert {k: got[k] for k in "nopqrstuv"} == {"n": 10, "o": 31, "p": 1000, "q": "3e-4", "r": "3e", "s": "e5",
                                                "t": "3e-4x", "u": 0.5, "v": float("inf")}
    assert isinstance(got["n"], int)
    assert yaml.safe_load("a: 3e-4") == {"a": "3e-4"}  # PyYAML's own loader is left as it was


def test_read_yaml_config_names_the_file(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("training: {learning_rate: 3e-4, adam_epsilon: 1e-8}\n")
    assert read_yaml_config(path) == {"training": {"learning_rate": 3e-4, "adam_epsilon": 1e-8}}
    with pytest.raises(FileNotFoundError, match="nope.yaml: no such config file"):
        read_yaml_config(tmp_path / "nope.yaml")
    path.write_text("- a\n- b\n")
    with pytest.raises(ValueError, match="c.yaml: expected a mapping of config fields, got list"):
        read_yaml_config(path)
    path.write_text("a: [1, 2\nb: 3\n")
    with pytest.raises(ValueError, match=r"c.yaml: not valid YAML \(.*\)$") as err:
        read_yaml_config(path)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("command", [["run"], ["train", "sft"], ["rollout", "--config"], ["eval", "--config"]])
def test_a_config_that_is_not_a_mapping_is_one_line(tmp_path, command):
    path = tmp_path / "c.yaml"
    path.write_text("a: [1, 2\n")
    res = CliRunner().invoke(app, [*command, str(path)], terminal_width=400)
    assert res.exit_code == 2, res.output
    assert res.output.strip().splitlines() == [res.output.strip()] and "c.yaml: not valid YAML" in res.output

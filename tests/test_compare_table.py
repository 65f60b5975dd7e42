"""`proctor compare` and the report label rows by evaluation name, the baseline first, and read at 80 columns: three
real evaluations run as `docs/guides/evaluate.md` runs them, none given a --name (π0 and π1: `choice` agents that
differ in one field; beam search over π0 with a tiny PRM). `make_compare_folder` is shared with the browser test."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from proctor.cli import app
from test_report import make_prm

NAMES = ["pi0", "pi1", "beam"]


def make_compare_folder(root: Path, backbone: Path) -> Path:
    """`proctor eval` of pi0, pi1 and beam under `root`, in that order; returns `root`."""
    prm = make_prm(root.parent / f"{root.name}-prm", backbone)
    common = ["--env", "household", "--env-arg", "max_steps=5", "--split", "test", "--tasks", "2", "--no-progress",
              "--agent", "choice", "--model", str(backbone), "--agent-arg", 'prompt={"history": 2, "memory": true}']
    beam = ["--search", "beam", "--search-arg", f"prm={prm}", "--search-arg", "beams=2", "--search-arg", "expansions=2"]
    for name, extra in zip(NAMES, (["--temperature", "1"], ["--temperature", "0.5"], ["--temperature", "1", *beam]),
                           strict=True):
        result = CliRunner().invoke(app, ["eval", *common, *extra, "--out", str(root / name)])
        assert result.exit_code == 0, result.output
    return root


@pytest.fixture(scope="session")
def compare_root(tmp_path_factory, tiny_model_dir) -> Path:
    return make_compare_folder(tmp_path_factory.mktemp("compare") / "ev", tiny_model_dir)


def first_cells(text: str) -> list[str]:
    """The first cell of every row of the tables in `text` (a wrapped name's lines joined)."""
    cells: list[str] = []
    for line in text.splitlines():
        if line.startswith("│"):
            cell = line.split("│")[1].strip()
            if cell and line.split("│")[2].strip():
                cells.append(cell)
            elif cell:
                cells[-1] += " " + cell
    return cells


def compare_output(dirs: list[Path], monkeypatch, width: int | None) -> str:
    """`proctor compare DIRS` as printed at `width` columns, or piped (None)."""
    from proctor.cli import eval_cmd

    if width is not None:
        monkeypatch.setattr(eval_cmd, "console", Console(width=width))
    result = CliRunner().invoke(app, ["compare", *map(str, dirs)])
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.mark.parametrize(("width", "widest"), [(80, 80), (None, 100)])
def test_compare_labels_rows_by_name_at_80_columns_and_piped(compare_root, monkeypatch, width, widest):
    out = compare_output([compare_root / n for n in NAMES], monkeypatch, width)
    assert max(len(line) for line in out.splitlines()) <= widest, out
    assert first_cells(out) == [*NAMES, "pi1", "beam"], out  # whole names, the baseline pi0 first
    assert "…" not in out and "{" not in out
    assert "paired with pi0" in out and "McNemar" in out


def test_a_long_name_wraps_whole_at_80_columns(compare_root):
    from proctor.evaluation.compare import compare
    from proctor.evaluation.compare_table import comparison_tables

    result = compare([compare_root / n for n in NAMES], resamples=100)
    long = "pi1: distilled from best-of-8 with the scalar-head PRM"
    result.rows[1]["label"] = long
    console = Console(width=80, record=True)
    for table in comparison_tables(result):
        console.print(table)
    out = console.export_text()
    assert max(len(line) for line in out.splitlines()) <= 80
    assert first_cells(out) == ["pi0", long, "beam", long, "beam"], out


def test_report_rows_are_named_evaluations_baseline_first(compare_root):
    from proctor.evaluation.report_data import collect

    assert [p["name"] for p in collect(compare_root)["policies"]] == NAMES

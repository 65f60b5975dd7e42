"""`proctor report DIR`: (re)build the self-contained report.html of any eval, run or quickstart folder."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from proctor.cli.options import console, fail
from proctor.cli.root import app


@app.command("report")
def report_cmd(
    folder: Annotated[Path, typer.Argument(help="a `proctor eval`, `proctor run` or quickstart output folder")],
    out: Annotated[Path | None, typer.Option("--out", help="where to write it (default FOLDER/report.html)")] = None,
    max_trajectories: Annotated[int, typer.Option("--max-trajectories", help="episodes per policy in the viewer")] = 400,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="replace an --out file that is not a report of "
                                            "FOLDER")] = False,
) -> None:
    """Write report.html: results table, success by task type, plots and a trajectory viewer, in one file
    that opens from disk (no server, no network). Rows are the evaluations in the order they were made, labelled
    by their names; the first is the baseline. A folder with no evaluation or trajectory store is an error."""
    from proctor.evaluation.report import build_report

    if max_trajectories < 1:
        fail(f"--max-trajectories must be >= 1, got {max_trajectories}")
    try:
        path = build_report(folder, out, max_trajectories=max_trajectories, overwrite=overwrite)
    except (ValueError, FileNotFoundError) as e:
        fail(e)
    console.print(f"wrote {path}")

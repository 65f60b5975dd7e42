"""`build_report(folder)`: one self-contained `report.html` (inline CSS and JS, the data embedded as JSON,
opens from disk with no server and no network) for any folder of proctor outputs: the results table, success
by task type, plots (success vs N, PRM score vs true success, training curves) and a trajectory viewer
(every step's observation and action, the PRM score of the chosen action, the candidates best-of-N weighed,
the MC-Q target, and where a failed episode went wrong)."""

from __future__ import annotations

import html
import json
import math
import re
import time
from importlib import resources
from pathlib import Path

from proctor.evaluation.report_data import collect
from proctor.outputs import claim_output

TEMPLATE = "report_template.html"


def _finite(data: object) -> object:
    """`data` with NaN and ±inf floats as None (JSON has no such numbers; the page shows them as —)."""
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {k: _finite(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [_finite(v) for v in data]
    return data


def embed_json(data: object) -> str:
    """JSON that is safe inside a <script> element: '<', '>' and '&' become \\u escapes, so no text in a
    trajectory can close the element or start markup; NaN and ±inf become null."""
    text = json.dumps(_finite(data), separators=(",", ":"), allow_nan=False, default=str)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render_report(data: dict) -> str:
    """The report page for `data` (as `report_data.collect` returns it)."""
    template = resources.files("proctor.evaluation").joinpath(TEMPLATE).read_text(encoding="utf-8")
    page = template.replace("__TITLE__", html.escape(str(data.get("title", "")))).replace("__DATA__", embed_json(data))
    return page


def build_report(folder: str | Path, out: str | Path | None = None, max_trajectories: int = 400,
                 overwrite: bool = False) -> Path:
    """Write `out` (default `folder/report.html`, rebuilt every time) for the outputs under `folder`; returns its
    path. At most `max_trajectories` episodes per policy are embedded in the viewer (the page says how many). An
    `out` elsewhere follows `proctor.outputs`' rule: a report of `folder` is rebuilt, any other file is refused
    unless `overwrite`. A folder with nothing to report is an error."""
    folder = Path(folder)
    path = Path(out) if out is not None else folder / "report.html"
    if path.resolve() != (folder / "report.html").resolve():
        claim_output(path, {"source": str(folder.resolve())}, recorded=_report_source(path),
                     present=[path] if path.exists() else [], overwrite=overwrite, what="report")
    data = collect(folder, max_trajectories=max_trajectories)
    data["generated"] = time.strftime("%Y-%m-%d %H:%M")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_report(data), encoding="utf-8")
    return path


def _report_source(path: Path) -> dict[str, str] | None:
    """The folder a report file was built from (`{"source": ...}`, the `root` its embedded data starts with);
    None for a file that is not a proctor report."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    found = re.search(r'<script type="application/json" id="report-data">\{"root":("(?:[^"\\]|\\.)*")', text)
    return {"source": json.loads(found.group(1))} if found else None

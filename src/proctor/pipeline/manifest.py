"""`manifest.json`: the lineage of a pipeline run, and stage-granular resume.

Every stage that finishes is recorded with its iteration, its inputs and outputs (paths relative to the run
directory), its config, the run's seed, the git revision of the code and its wall time; a re-run skips the
stages recorded as done (and whose outputs still exist), so an interrupted run resumes at the stage it was in.
The run also records its `environment`: the Python, the versions of the packages that change the numbers (those
of `RECORDED_PACKAGES` and those the run's env depends on, e.g. alfworld and textworld: `proctor.envs.versions`),
and torch's thread count. The same seed trains other models when any of them differ (README, the quickstart), so
a resume in another environment is logged as a warning naming what differs.

A new run can reuse the stages of an earlier one (`reuse`, `proctor run --reuse`): a stage whose config (the
earlier run's folder read as this one's) and inputs are those of the earlier run's stage is copied from there
instead of run, and recorded with `reused_from` and the earlier wall time. A stage that reads what a stage of
this run made (rather than copied) runs, so a changed PRM recipe re-runs the PRM and all that follows it.
Paths outside the run folder (a model on disk, a data file) are compared by name, not by content.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from proctor.outputs import field_differences, shown

T = TypeVar("T")

MANIFEST = "manifest.json"
#: the packages whose versions change a run's numbers
RECORDED_PACKAGES = ("torch", "transformers", "tokenizers", "accelerate", "peft", "datasets", "numpy")

log = logging.getLogger(__name__)


def git_revision() -> str | None:
    """The git revision of the installed code (None outside a git checkout)."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], check=False, cwd=Path(__file__).resolve().parent,
                             capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def environment(env: str | None = None) -> dict[str, Any]:
    """The Python version, the installed versions of `RECORDED_PACKAGES` and of the packages env `env` depends
    on (None: not installed), and torch's thread count."""
    import torch

    from proctor.envs.versions import env_versions, package_version

    versions: dict[str, str | None] = {name: package_version(name) for name in RECORDED_PACKAGES}
    if env is not None:
        versions.update(env_versions(env))
    return {"python": platform.python_version(), "packages": versions, "torch_threads": torch.get_num_threads()}


def environment_changes(recorded: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """"name: recorded → now" for every entry of the environment that differs (packages one by one)."""
    def flat(env: dict[str, Any]) -> dict[str, Any]:
        return {**{k: v for k, v in env.items() if k != "packages"}, **env.get("packages", {})}

    old, new = flat(recorded), flat(now)
    return [f"{k}: {old.get(k)} → {new.get(k)}" for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]


#: the differing fields a config-mismatch message names (the rest are counted)
SHOWN_DIFFERENCES = 5
def config_differences(old: Any, new: Any, field: str = "") -> list[str]:
    """"field: old → new" for every field where two configs (JSON data) differ (`proctor.outputs.field_differences`:
    `sft.steps: 1200 → 800`, `evaluate.entries.1.agent.n: 8 → 4`); values as JSON, cut at 60 characters; a field
    only one config has is `(unset)` in the other."""
    return [f"{path or '<config>'}: {shown(a)} → {shown(b)}" for path, a, b in field_differences(old, new, field)]


def config_mismatch(path: Path, recorded: Any, config: dict[str, Any],
                    upgrade: Callable[[Any], Any] | None = None) -> str | None:
    """The one line refusing to resume the run recorded in manifest `path` with `config`, naming the fields that
    differ (recorded → this config); None when the configs are the same, also once `upgrade` has read the
    recorded config as this version of the code does (fields added since with their defaults, renamed ones
    moved)."""
    if upgrade is not None and recorded != config:
        try:
            recorded = upgrade(recorded)
        except ValueError:  # a recorded config this version cannot read: its fields are compared as they are
            pass
    differences = config_differences(recorded, config)
    if not differences:
        return None
    shown = "; ".join(differences[:SHOWN_DIFFERENCES])
    more = len(differences) - SHOWN_DIFFERENCES
    return (f"{path}: the run in this directory has another config ({shown}{f'; and {more} more' if more > 0 else ''}"
            "); resume it with the same config, or choose a new output directory")


class Manifest:
    """The run directory's `manifest.json` (see module docstring)."""

    def __init__(self, root: Path, config: dict[str, Any], seed: int, env: str | None = None,
                 reuse: Path | None = None, write: bool = True, upgrade: Callable[[Any], Any] | None = None):
        """`env`: the run's env, whose packages' versions the environment records too; `reuse`: an earlier run's
        folder whose matching stages are copied rather than run (module docstring); `write`: False in the other
        processes of a launched stage (the main one records); `upgrade`: reads a recorded config as this version
        of the code does (`config_mismatch`), so that a run resumes across a version that added a field."""
        self.root = Path(root)
        self.write = write
        self.path = self.root / MANIFEST
        self.reuse = ReusableRun(Path(reuse), self.root, config.get("out")) if reuse is not None else None
        if self.path.exists():
            self.data = json.loads(self.path.read_text())
            mismatch = config_mismatch(self.path, self.data.get("config"), config, upgrade)
            if mismatch is not None:
                raise ValueError(mismatch)
            if self.data.get("config") != config:  # the same config, as an earlier version recorded it
                self.data["config"] = config
                self._write()
            recorded = self.data.get("environment")  # runs from before this record have none
            changes = environment_changes(recorded, environment(env)) if recorded else []
            if changes:
                log.warning("%s: resuming in another environment than the run started in (%s); stages run from "
                            "here on may give other numbers than the same seed did there", self.path,
                            "; ".join(changes))
        else:
            self.data = {"format": "proctor.pipeline", "version": 1, "config": config, "seed": seed,
                         "git_revision": git_revision(), "environment": environment(env),
                         "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "stages": {}}
            self._write()

    def _write(self) -> None:
        if not self.write:
            return
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(f".tmp-{os.getpid()}")
        tmp.write_text(json.dumps(self.data, indent=2, sort_keys=True, default=str))
        os.replace(tmp, self.path)

    def rel(self, path: Path) -> str:
        path = Path(path)
        try:
            return str(path.resolve().relative_to(self.root.resolve()))
        except ValueError:
            return str(path)

    def done(self, key: str) -> dict[str, Any] | None:
        """The record of stage `key` if it finished and its outputs are still there."""
        rec = self.data["stages"].get(key)
        if rec is None or not all((self.root / p).exists() for p in rec["outputs"]):
            return None
        return rec

    def stage(self, key: str, *, iteration: int, inputs: list[Path], outputs: list[Path],
              config: BaseModel | dict[str, Any] | None, run: Callable[[], T],
              result: Callable[[T], dict[str, Any]] = lambda _: {}, command: str | None = None) -> dict[str, Any]:
        """Run stage `key` unless it is done; returns its record (with `result`'s summary of what it made, and the
        `command` that runs it by hand). A pydantic `config` is recorded with every field of its nested configs
        (an agent config's own fields, not only those of the base class it is declared as)."""
        rec = self.done(key)
        if rec is not None:
            return rec
        rec = {"iteration": iteration, "inputs": [self.rel(p) for p in inputs],
               "outputs": [self.rel(p) for p in outputs],
               "config": config.model_dump(mode="json", serialize_as_any=True) if isinstance(config, BaseModel)
               else config, **({"command": command} if command else {})}
        if self.reuse is not None and self._made_here(rec["inputs"] + self._paths_in(rec["config"])) == []:
            earlier = self.reuse.matching(key, rec)
            if earlier is not None:
                self.reuse.copy(earlier)
                self.data["stages"][key] = {**earlier, **{k: rec[k] for k in ("config", "command") if k in rec},
                                            "reused_from": str(self.reuse.root)}
                self._write()
                log.info("%s: reused from %s", key, self.reuse.root)
                return self.data["stages"][key]
        start = time.perf_counter()
        value = run()
        rec = {**rec, "seconds": round(time.perf_counter() - start, 2), "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
               "result": result(value)}
        self.data["stages"][key] = rec
        self._write()
        return rec

    def _paths_in(self, value: Any) -> list[str]:
        """The paths into this run's folder that a stage's config names (relative to it)."""
        if isinstance(value, dict):
            return [p for v in value.values() for p in self._paths_in(v)]
        if isinstance(value, list):
            return [p for v in value for p in self._paths_in(v)]
        root = str(self.root) + "/"
        return [value[len(root):]] if isinstance(value, str) and value.startswith(root) else []

    def _made_here(self, inputs: list[str]) -> list[str]:
        """The inputs that a stage of this run made by running (not by copying from the reused run)."""
        made = [out_dir(o) for rec in self.data["stages"].values() if "reused_from" not in rec
                for o in rec["outputs"]]
        return [i for i in inputs if any(i == d or i.startswith(d + "/") or d.startswith(i + "/") for d in made)]


def out_dir(output: str) -> str:
    """The folder a stage's recorded output file belongs to (what reusing the stage copies)."""
    return str(Path(output).parent)


class ReusableRun:
    """An earlier run's stages, offered to a new run in folder `into` (`Manifest(reuse=...)`); `into_name`: that
    folder as the new run's config writes it."""

    def __init__(self, root: Path, into: Path, into_name: str | None = None):
        self.root, self.into = root, into
        path = root / MANIFEST
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no run to reuse stages from (a `proctor run` folder has a {MANIFEST})")
        if root.resolve() == into.resolve():
            raise ValueError(f"{root}: a run cannot reuse its own folder (re-run it to resume)")
        try:
            data = json.loads(path.read_text())
            self.stages: dict[str, Any] = data["stages"]
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{path}: not a `proctor run` manifest to reuse stages from ({e!r})") from None
        self.names = (str(data.get("config", {}).get("out", root)), str(into_name or into))

    def _renamed(self, value: Any) -> Any:
        """`value` with every path in the earlier run's folder moved to the new run's."""
        old, new = self.names
        if isinstance(value, str) and (value == old or value.startswith(old + "/")):
            return new + value[len(old):]
        if isinstance(value, dict):
            return {k: self._renamed(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._renamed(v) for v in value]
        return value

    def matching(self, key: str, rec: dict[str, Any]) -> dict[str, Any] | None:
        """The earlier record of stage `key` when its inputs, outputs and config (with the earlier folder read as
        this run's) are `rec`'s and its outputs still exist; None otherwise."""
        earlier = self.stages.get(key)
        if earlier is None or earlier["inputs"] != rec["inputs"] or earlier["outputs"] != rec["outputs"]:
            return None
        if not all((self.root / o).exists() for o in earlier["outputs"]):
            return None
        now = json.loads(json.dumps(rec["config"], default=str))
        return earlier if self._renamed(earlier["config"]) == now else None

    def copy(self, rec: dict[str, Any]) -> None:
        """Copy the folders of `rec`'s outputs into the new run (replacing what an interrupted attempt left)."""
        folders = sorted({out_dir(o) for o in rec["outputs"]})
        for folder in [f for f in folders if not any(f.startswith(g + "/") for g in folders if g != f)]:
            target = self.into / folder
            if target.exists():
                shutil.rmtree(target)
            shutil.copytree(self.root / folder, target, symlinks=True)

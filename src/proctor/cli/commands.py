"""Imports every verb module so that each registers its commands on `proctor.cli.root.app`."""

from __future__ import annotations

import importlib

from proctor.cli.root import app
from proctor.search import agents as _search_agents  # noqa: F401  (registers the agent kind best-of-n)

#: the verb modules, in the order their commands appear in `proctor --help`
VERB_MODULES = ("quickstart_cmd", "run_cmd", "envs_cmd", "rollout_cmd", "targets_cmd", "prm_cmd", "train_cmd",
                "eval_cmd", "report_cmd", "serve_cmd", "serve_env_cmd", "models_cmd")

for _name in VERB_MODULES:
    importlib.import_module(f"proctor.cli.{_name}")

__all__ = ["app"]

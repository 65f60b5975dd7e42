"""`proctor train METHOD CONFIG`: train a policy with one of the registered trainers (`proctor.rl.trainers`)
from a YAML config; under `torchrun` / `accelerate launch` only the main process prints."""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from proctor.cli.dry_run import config_inputs, dry_run_text
from proctor.cli.options import validated_config
from proctor.cli.root import app
from proctor.rl.trainers import TRAINERS, trainer
from proctor.training.distributed import is_main_process

#: the registered methods as a choice for typer
Method = Enum("Method", {name: name for name in TRAINERS}, type=str)
METHODS_HELP = "\n\n".join(f"{name}: {entry.summary} ({entry.config.replace(':', '.')})"
                           for name, entry in TRAINERS.items())


@app.command("train", help="Train a policy: METHOD is one of the trainers below, CONFIG its YAML config (every "
             "field is described in the config class named). Prints one JSON line per iteration, then the policy "
             "folder.\n\n" + METHODS_HELP)
def train(
    method: Annotated[Method, typer.Argument(help="the training method", show_default=False)],
    config: Annotated[Path, typer.Argument(help="the method's config YAML")],
    output_dir: Annotated[Path | None, typer.Option("--output-dir", help="overrides the config's output_dir")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="validate the config and print it with every field "
                                          "resolved (YAML, defaults included) and the inputs it reads, each "
                                          "found here or not; trains nothing")] = False,
) -> None:
    from proctor.cli.errors import user_errors

    entry = trainer(method.value)
    config_class, train_fn = entry.load()
    cfg = validated_config(config, config_class, output_dir)
    if dry_run:
        typer.echo(dry_run_text(f"proctor train {method.value}", config, cfg, config_inputs(cfg)))
        return
    with user_errors(str(config)):
        result = train_fn(cfg)
    if not is_main_process():
        return  # several processes: one summary, the processes' lines would interleave
    metrics = Path(cfg.output_dir) / entry.metrics_file if entry.metrics_file else None
    for line in summary_lines(result, metrics):
        typer.echo(json.dumps(line))


def _without_logs(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_logs(v) for k, v in value.items() if k not in ("log", "curve", "losses")}
    return value


def summary_lines(result: Any, metrics_path: Path | None) -> list[dict[str, Any]]:
    """What `proctor train` prints: the iterations (per-step logs left out) and the policy folder, or, for a
    trainer that returns its folder, the folder, its metrics and their first/last losses."""
    if isinstance(result, Path):
        metrics = json.loads(metrics_path.read_text()) if metrics_path else {}
        losses = metrics.get("losses") or [r["loss"] for r in metrics.get("curve", [])]
        key = "output_dir" if metrics_path and metrics_path.name == "sft.json" else "policy_dir"
        line = {key: str(result), **{k: v for k, v in _without_logs(metrics).items() if k != "config"}}
        if losses:
            line.update(loss_first=losses[0], loss_last=losses[-1])
        return [line]
    return [*(_without_logs(m) for m in result.iterations), {"policy_dir": str(result.policy_dir)}]

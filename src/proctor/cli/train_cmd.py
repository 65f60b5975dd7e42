"""`proctor train ...`: train a policy from a YAML config (`sft`: supervised fine-tuning on demonstrations;
`dpo`: online DPO against a PRM; `bon-distill`: best-of-N distillation against a PRM; `grpo`, `ppo`: policy
gradient; `archer`, `chai`, `fbc`: ArCHer's critic-based methods and online filtered BC)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from proctor.cli.options import validated_config
from proctor.cli.root import app

train_app = typer.Typer(help="Train policies: SFT on demonstrations, online DPO, best-of-N distillation, GRPO/PPO, "
                        "ArCHer/CHAI/filtered BC.",
                        no_args_is_help=True)
app.add_typer(train_app, name="train")


@train_app.command("sft")
def sft(
    config: Annotated[Path, typer.Argument(help="SFTConfig YAML (see `proctor.rl.sft.SFTConfig`)")],
    output_dir: Annotated[Path | None, typer.Option("--output-dir", help="overrides the config's output_dir")] = None,
) -> None:
    """Fine-tune a causal LM on a trajectory store of demonstrations (loss on the agent's tokens); prints the
    policy folder and the loss as JSON."""
    from accelerate import PartialState

    from proctor.cli.errors import user_errors
    from proctor.rl.sft import METRICS_FILE, SFTConfig, train_sft

    cfg = validated_config(config, SFTConfig, output_dir)
    with user_errors(str(config)):
        out = train_sft(cfg)
    if not PartialState().is_main_process:
        return  # under accelerate launch / torchrun one summary: the processes' lines would interleave
    metrics = json.loads((out / METRICS_FILE).read_text())
    typer.echo(json.dumps({"output_dir": str(out), "examples": metrics["examples"],
                           "loss_first": metrics["loss_first"], "loss_last": metrics["loss_last"],
                           "wall_s": metrics["wall_s"]}))


@train_app.command("dpo")
def dpo(
    config: Annotated[Path, typer.Argument(help="OnlineDPOConfig YAML (see `proctor.rl.online_dpo`)")],
    output_dir: Annotated[Path | None, typer.Option("--output-dir", help="overrides the config's output_dir")] = None,
) -> None:
    """Online DPO against a PRM (AgentPRM stage 3); prints one JSON line per iteration, then the last policy."""
    from proctor.cli.errors import user_errors
    from proctor.rl.online_dpo import OnlineDPOConfig, train_online_dpo

    cfg = validated_config(config, OnlineDPOConfig, output_dir)
    with user_errors(str(config)):
        result = train_online_dpo(cfg)
    for metrics in result.iterations:
        row = {k: v for k, v in metrics.items() if k != "train"}
        row["train"] = {k: v for k, v in metrics.get("train", {}).items() if k != "log"}
        typer.echo(json.dumps(row))
    typer.echo(json.dumps({"policy_dir": str(result.policy_dir)}))


@train_app.command("bon-distill")
def bon_distill(
    config: Annotated[Path, typer.Argument(help="BonDistillConfig YAML (see `proctor.rl.bon_distill`)")],
    output_dir: Annotated[Path | None, typer.Option("--output-dir", help="overrides the config's output_dir")] = None,
) -> None:
    """Best-of-N distillation: train a `choice` policy towards the action law of best-of-N(policy, PRM) at the
    policy's states; prints the policy folder, the states and the loss as JSON."""
    from proctor.cli.errors import user_errors
    from proctor.rl.bon_distill import METRICS_FILE, BonDistillConfig, train_bon_distill

    cfg = validated_config(config, BonDistillConfig, output_dir)
    with user_errors(str(config)):
        policy_dir = train_bon_distill(cfg)
    metrics = json.loads((cfg.output_dir / METRICS_FILE).read_text())
    typer.echo(json.dumps({"policy_dir": str(policy_dir), "states": metrics["states"],
                           "loss_first": metrics["curve"][0]["loss"], "loss_last": metrics["curve"][-1]["loss"],
                           "seconds": metrics["seconds"]}))


def _policy_gradient(config: Path, output_dir: Path | None, method: str) -> None:
    """`proctor train grpo|ppo|archer|chai|fbc`: validate the YAML, train, print one JSON line per iteration (the
    per-step logs left out) and the policy."""
    from proctor.cli.errors import user_errors

    if method == "grpo":
        from proctor.rl.grpo import GRPOConfig as Config
        from proctor.rl.grpo import train_grpo as train
    elif method == "ppo":
        from proctor.rl.ppo import PPOConfig as Config
        from proctor.rl.ppo import train_ppo as train
    elif method == "archer":
        from proctor.rl.archer import ArCHerConfig as Config
        from proctor.rl.archer import train_archer as train
    elif method == "chai":
        from proctor.rl.chai import CHAIConfig as Config
        from proctor.rl.chai import train_chai as train
    else:
        from proctor.rl.filtered_bc import FilteredBCConfig as Config
        from proctor.rl.filtered_bc import train_filtered_bc as train
    cfg = validated_config(config, Config, output_dir)
    with user_errors(str(config)):
        result = train(cfg)
    for metrics in result.iterations:
        row = {k: {kk: vv for kk, vv in v.items() if kk != "log"} if isinstance(v, dict) else v
               for k, v in metrics.items()}
        typer.echo(json.dumps(row))
    typer.echo(json.dumps({"policy_dir": str(result.policy_dir)}))


@train_app.command("grpo")
def grpo(
    config: Annotated[Path, typer.Argument(help="GRPOConfig YAML (see `proctor.rl.grpo`)")],
    output_dir: Annotated[Path | None, typer.Option("--output-dir", help="overrides the config's output_dir")] = None,
) -> None:
    """GRPO / GiGPO over multi-turn trajectories with PPO clipping; one JSON line per iteration."""
    _policy_gradient(config, output_dir, "grpo")


@train_app.command("ppo")
def ppo(
    config: Annotated[Path, typer.Argument(help="PPOConfig YAML (see `proctor.rl.ppo`)")],
    output_dir: Annotated[Path | None, typer.Option("--output-dir", help="overrides the config's output_dir")] = None,
) -> None:
    """PPO with step-level rewards (env, PRM or SPA progress), a critic and token-level GAE."""
    _policy_gradient(config, output_dir, "ppo")


@train_app.command("archer")
def archer(
    config: Annotated[Path, typer.Argument(help="ArCHerConfig YAML (see `proctor.rl.archer`)")],
    output_dir: Annotated[Path | None, typer.Option("--output-dir", help="overrides the config's output_dir")] = None,
) -> None:
    """ArCHer: an utterance-level TD critic (double Q and V, Polyak target, replay buffer) and a token-level
    policy gradient with A = min Q − min V; one JSON line per iteration."""
    _policy_gradient(config, output_dir, "archer")


@train_app.command("chai")
def chai(
    config: Annotated[Path, typer.Argument(help="CHAIConfig YAML (see `proctor.rl.chai`)")],
    output_dir: Annotated[Path | None, typer.Option("--output-dir", help="overrides the config's output_dir")] = None,
) -> None:
    """Online CHAI: the frozen LM acts with the best of K samples by ArCHer's critic, which learns online."""
    _policy_gradient(config, output_dir, "chai")


@train_app.command("fbc")
def fbc(
    config: Annotated[Path, typer.Argument(help="FilteredBCConfig YAML (see `proctor.rl.filtered_bc`)")],
    output_dir: Annotated[Path | None, typer.Option("--output-dir", help="overrides the config's output_dir")] = None,
) -> None:
    """Online filtered BC: SFT on the generated steps of each iteration's best trajectories."""
    _policy_gradient(config, output_dir, "fbc")

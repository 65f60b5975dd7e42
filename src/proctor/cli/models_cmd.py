"""`proctor models tiny --out DIR`: build the tiny local backbone (model + tokenizer) that examples train on;
`proctor models convert SRC OUT`: write a GGUF checkpoint as a regular model folder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from proctor.cli.root import app

models_app = typer.Typer(help="Models: build a tiny local backbone; convert a GGUF checkpoint.", no_args_is_help=True)
app.add_typer(models_app, name="models")


def _quiet_hub() -> None:
    from huggingface_hub.utils import disable_progress_bars
    from transformers.utils import logging as hf_logging

    disable_progress_bars()
    hf_logging.disable_progress_bar()


@models_app.command("tiny")
def tiny(
    out: Annotated[Path, typer.Option("--out", help="folder to write (reused when built with the same sizes)")],
    hidden_size: Annotated[int, typer.Option(min=8, help="model width")] = 64,
    layers: Annotated[int, typer.Option(min=1, help="transformer layers")] = 2,
    heads: Annotated[int, typer.Option(min=1, help="attention heads (divide --hidden-size)")] = 4,
    vocab_size: Annotated[int, typer.Option(help="tokenizer vocabulary (at most)")] = 2000,
    arch: Annotated[str, typer.Option(help="llama | qwen2")] = "llama",
    seed: Annotated[int, typer.Option(help="weight initialisation seed")] = 0,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="replace a tiny model --out holds that was built "
                                            "with other arguments (without it, it is refused)")] = False,
) -> None:
    """A randomly initialised Llama (or Qwen2) with a byte-level BPE tokenizer trained offline on the built-in
    envs' text, saved as an HF folder (safetensors, ChatML template, the PRM step marker as one token).
    Prints {"model": DIR, "parameters": N, "vocab_size": V}."""
    from proctor.cli.errors import user_errors
    from proctor.cli.options import fail
    from proctor.models import build_tiny
    from proctor.models.tiny import ARCHS, MARKER_FILE

    if arch not in ARCHS:
        fail(f"--arch {arch!r}: choose one of {', '.join(ARCHS)}")
    if hidden_size % heads:
        fail(f"--hidden-size {hidden_size} is not divisible by --heads {heads}")
    _quiet_hub()  # writing one shard needs no bar
    with user_errors("models tiny"):
        path = build_tiny(out, arch=arch, hidden_size=hidden_size, layers=layers, heads=heads,
                          vocab_size=vocab_size, seed=seed, overwrite=overwrite)
    built = json.loads((path / MARKER_FILE).read_text())
    typer.echo(json.dumps({"model": str(path), "parameters": built["parameters"],
                           "vocab_size": built["vocab_size"]}))


@models_app.command("convert")
def convert(
    src: Annotated[Path, typer.Argument(help="a .gguf file, or a folder holding exactly one")],
    out: Annotated[Path, typer.Argument(help="model folder to write (reused when converted from the same file)")],
    dtype: Annotated[str, typer.Option(help="float32 | bfloat16")] = "float32",
) -> None:
    """Dequantize a GGUF checkpoint into a regular model folder (safetensors, tokenizer with its chat template)
    that every --model option reads without converting again. Prints {"model": OUT, "parameters": N}."""
    from proctor.cli.errors import user_errors
    from proctor.cli.options import fail

    if dtype not in ("float32", "bfloat16"):
        fail(f"--dtype {dtype!r}: choose float32 or bfloat16")
    _quiet_hub()
    with user_errors("models convert"):
        from proctor.models import convert_gguf
        from proctor.models.gguf import MARKER_FILE as CONVERTED

        path = convert_gguf(src, out, dtype)
    made = json.loads((path / CONVERTED).read_text())
    typer.echo(json.dumps({"model": str(path), "parameters": made["parameters"], "dtype": made["dtype"]}))

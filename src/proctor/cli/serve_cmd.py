"""`proctor serve --model PATH_OR_NAME`: an OpenAI-compatible server (see `proctor.serving`)."""

from __future__ import annotations

import os
from typing import Annotated

import typer
from rich.console import Console

from proctor.cli.prm_cmd import DEVICE_HELP, DTYPE_HELP
from proctor.cli.root import app

console = Console(stderr=True)


@app.command("serve")
def serve(
    model: Annotated[str, typer.Option(help="local model folder or Hugging Face hub name")],
    host: Annotated[str, typer.Option(help="interface to bind (keep 127.0.0.1 unless you need remote access)")]
    = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port")] = 8000,
    served_name: Annotated[str | None, typer.Option(help="model name clients send (default: --model)")] = None,
    api_key_env: Annotated[
        str | None, typer.Option(help="environment variable holding the API key clients must send as Bearer")
    ] = None,
    device: Annotated[str, typer.Option(help=f"where the model runs: {DEVICE_HELP}")] = "auto",
    dtype: Annotated[str, typer.Option(help=f"the model's inference dtype: {DTYPE_HELP}")] = "auto",
    limit: Annotated[list[str], typer.Option(
        help="server bound key=value (repeatable): max_body_bytes, max_rows, max_request_tokens, max_queue")]
    = [],  # noqa: B006 - typer needs a literal default
) -> None:
    """Serve a causal LM with OpenAI's /v1/models, /v1/chat/completions and /v1/completions."""
    import uvicorn

    from proctor.serving import Generator, create_app
    from proctor.serving.guards import ServerLimits, exposure_warning

    api_key = None
    if api_key_env is not None:
        api_key = os.environ.get(api_key_env)
        if not api_key:
            raise typer.BadParameter(f"environment variable {api_key_env} is unset or empty",
                                     param_hint="--api-key-env")
    if warning := exposure_warning(host, api_key):
        typer.echo(warning, err=True)
    try:
        limits = ServerLimits.from_pairs(limit)
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="--limit") from None
    name = served_name or model
    try:
        generator = Generator.load(model, dtype=dtype, device=device)
    except (OSError, ValueError, ImportError) as e:
        console.print(f"[red]cannot serve {model!r}:[/red] {e}")
        raise typer.Exit(code=2) from None
    auth = f"API key from ${api_key_env}" if api_key else "no API key"
    console.print(f"serving {model!r} as {name!r} on http://{host}:{port}/v1 ({auth})")
    uvicorn.run(create_app(generator, name, api_key, limits), host=host, port=port, log_level="info")

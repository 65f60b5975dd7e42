"""`proctor serve-env ENV`: a proctor env as an OpenEnv environment server (`proctor.integrations.openenv`)."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from proctor.cli.prm_cmd import DEVICE_HELP, DTYPE_HELP
from proctor.cli.root import app


@app.command("serve-env")
def serve_env(
    env: Annotated[str, typer.Argument(help="a proctor env (`proctor envs`), built-in or adapter")],
    env_arg: Annotated[list[str], typer.Option(
        "--env-arg", "--env-kwarg", help="env constructor argument key=value (repeatable)")] = [],  # noqa: B006
    host: Annotated[str, typer.Option(help="interface to bind (keep 127.0.0.1 unless you need remote access)")]
    = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port")] = 8000,
    split: Annotated[str, typer.Option(help="the split reset draws tasks from (in order) when the client names "
                                            "no task")] = "train",
    prm: Annotated[str | None, typer.Option(
        help="PRM folder: its score of each step becomes the step reward (the env's stays in env_reward)")] = None,
    api_key_env: Annotated[str | None, typer.Option(
        help="environment variable holding the API key clients must send as Bearer")] = None,
    max_sessions: Annotated[int, typer.Option(help="concurrent sessions (WebSocket connections), one env each")]
    = 4,
    seed: Annotated[int, typer.Option(help="run seed: a task's default env seed is derived from it")] = 0,
    device: Annotated[str, typer.Option(help=f"where the PRM runs: {DEVICE_HELP}")] = "auto",
    dtype: Annotated[str, typer.Option(help=f"the PRM's inference dtype: {DTYPE_HELP}")] = "auto",
) -> None:
    """Serve a proctor env as an OpenEnv environment server: episodes over the WebSocket /ws (OpenEnv's
    EnvClient), actions {"command": "..."}, rewards the env's or, with --prm, the PRM's step scores."""
    from proctor.cli.errors import user_errors
    from proctor.cli.options import fail, parse_key_values

    api_key = None
    if api_key_env is not None:
        api_key = os.environ.get(api_key_env)
        if not api_key:
            fail(f"--api-key-env: environment variable {api_key_env} is unset or empty")
    from proctor.serving.guards import exposure_warning

    if warning := exposure_warning(host, api_key):
        typer.echo(warning, err=True)
    env_kwargs = parse_key_values(env_arg, "--env-arg")
    with user_errors("serve-env"):
        from proctor.integrations.openenv import ServeEnvConfig, create_app, uvicorn_options

        cfg = ServeEnvConfig(env=env, env_kwargs=env_kwargs, split=split, prm=prm, max_sessions=max_sessions,
                             run_seed=seed, prm_device=device, prm_dtype=dtype)
        server = create_app(cfg, api_key)
        if server.state.service.prm is not None:
            _ = server.state.service.prm.scorer  # load it now: a bad folder is an error before serving
    import uvicorn

    auth = f"API key from ${api_key_env}" if api_key else "no API key"
    reward = f"PRM {prm}" if prm else "the env's rewards"
    typer.echo(f"serving {env} as an OpenEnv server on ws://{host}:{port}/ws ({reward}; {auth})", err=True)
    uvicorn.run(server, host=host, port=port, log_level="info", **uvicorn_options(cfg))

"""`create_app`: the OpenEnv FastAPI app serving a proctor env, every refusal one line (docs/integrations.md,
"Errors, bounds and security defaults"), behind the servers' guards (`proctor.serving.guards`)."""

from __future__ import annotations

import functools
import logging
from typing import Any

from openenv.core.env_server.http_server import create_fastapi_app
from openenv.core.env_server.types import ConcurrencyConfig

from proctor.integrations.openenv.config import ServeEnvConfig
from proctor.integrations.openenv.environment import EnvService, ProctorEnvironment
from proctor.integrations.openenv.schema import ProctorAction, ProctorObservation
from proctor.serving.guards import BodyLimit, GuardError, RequestGuard, internal_error

log = logging.getLogger(__name__)

#: routes that answer without an API key
OPEN_PATHS = ("/health",)


def _http_error(status: int, message: str, code: str) -> dict[str, Any]:
    """A refusal over HTTP: `{"detail": <one line>, "code": <code>}`."""
    return {"detail": message, "code": code}


def _ws_error(message: str, code: str) -> dict[str, Any]:
    """A refusal over the WebSocket, as OpenEnv's server sends its own errors (its client raises it)."""
    return {"type": "error", "data": {"message": message, "code": code}}


def _one_line(errors: Any) -> str:
    """A pydantic / FastAPI error list as one line: the first error's place and message, and how many more."""
    if isinstance(errors, str):
        return errors
    if not isinstance(errors, list) or not errors:
        return str(errors)
    first = errors[0]
    loc = ".".join(str(x) for x in first.get("loc", ()) if x != "body") if isinstance(first, dict) else ""
    msg = first.get("msg", str(first)) if isinstance(first, dict) else str(first)
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{loc}: {msg}{more}" if loc else f"{msg}{more}"


def create_app(cfg: ServeEnvConfig | dict[str, Any], api_key: str | None = None) -> Any:
    """The OpenEnv FastAPI app serving `cfg.env` (docs/integrations.md); a ValueError (one line) for an unknown env,
    bad env arguments or an unknown split."""
    from fastapi import Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from starlette.exceptions import HTTPException

    cfg = cfg if isinstance(cfg, ServeEnvConfig) else ServeEnvConfig.model_validate(cfg)
    service = EnvService(cfg)
    app = create_fastapi_app(functools.partial(ProctorEnvironment, service), ProctorAction, ProctorObservation,
                             concurrency_config=ConcurrencyConfig(max_concurrent_envs=cfg.max_sessions,
                                                                  session_timeout=cfg.session_timeout_s))
    app.title = f"proctor {cfg.env} (OpenEnv)"
    app.state.service = service

    @app.exception_handler(GuardError)
    async def _guard(_: Request, exc: GuardError) -> JSONResponse:
        return JSONResponse(_http_error(exc.status, exc.message, exc.code), status_code=exc.status)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse(_http_error(422, _one_line(exc.errors()), "invalid_request"), status_code=422)

    @app.exception_handler(HTTPException)
    async def _http(_: Request, exc: HTTPException) -> JSONResponse:
        return JSONResponse(_http_error(exc.status_code, _one_line(exc.detail), "http_error"),
                            status_code=exc.status_code, headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _crash(request: Request, exc: Exception) -> JSONResponse:
        rid, message = internal_error(log, request.url.path, exc)
        return JSONResponse(_http_error(500, message, "internal_error"), status_code=500,
                            headers={"x-request-id": rid})

    app.add_middleware(BodyLimit, max_bytes=cfg.max_body_bytes, error=_http_error)
    app.add_middleware(RequestGuard, api_key=api_key, max_bytes=cfg.max_body_bytes, error=_http_error,
                       ws_error=_ws_error, open_paths=OPEN_PATHS)
    return app

"""The OpenAI-compatible FastAPI app of `proctor serve`: /v1/models, /v1/chat/completions, /v1/completions.

Requests are served one at a time; all n samples of a request, and all prompts of a list prompt, go
through one batched `generate` call. With an API key configured every /v1 route needs
`Authorization: Bearer <key>`. Bounds (`ServerLimits`, see `proctor.serving.guards`): body size (413 while
it streams in), prompts x n and token positions per request (400), requests admitted at once (429); a client
that disconnects stops its generation at the next token. Errors use OpenAI's shape
`{"error": {"message", "type", "param", "code"}}`: 400 bad request, 401 bad key, 404 unknown model or route,
413, 429, and 500 with only a request id (the exception is logged with it).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from typing import Any

import anyio
from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from proctor.serving.generation import (
    Completion,
    GenerationCancelled,
    GenerationRequestError,
    GenerationResult,
    Generator,
)
from proctor.serving.guards import (
    Admission,
    BodyLimit,
    GuardError,
    ServerLimits,
    bearer_ok,
    internal_error,
    too_many_rows,
    too_many_tokens,
)
from proctor.serving.protocol import ChatCompletionRequest, CompletionRequest

log = logging.getLogger("proctor.serve")


class OpenAIError(Exception):
    def __init__(self, status: int, message: str, type_: str = "invalid_request_error", code: str | None = None):
        super().__init__(message)
        self.status, self.message, self.type, self.code = status, message, type_, code


def error_body(message: str, type_: str, code: str | None = None, param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def _validation_message(exc: RequestValidationError) -> tuple[str, str | None]:
    parts, param = [], None
    for err in exc.errors():
        loc = [str(x) for x in err.get("loc", ()) if x != "body"]
        param = param or (loc[0] if loc else None)
        parts.append(f"{'.'.join(loc) or 'body'}: {err.get('msg')}")
    return "; ".join(parts) or "invalid request", param


def usage(result: GenerationResult) -> dict[str, int]:
    """OpenAI usage: each prompt counted once (not n times), every generated token of every choice."""
    prompt = sum(result.prompt_tokens)
    completion = sum(c.completion_tokens for group in result.completions for c in group)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def chat_logprobs(c: Completion) -> dict[str, Any] | None:
    """OpenAI chat format: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}, ...]}."""
    if c.logprobs is None:
        return None

    def entry(token: str, logprob: float) -> dict[str, Any]:
        return {"token": token, "logprob": logprob, "bytes": list(token.encode("utf-8"))}

    content = [entry(t.token, t.logprob) | {"top_logprobs": [entry(s, lp) for s, lp in t.top]} for t in c.logprobs]
    return {"content": content, "refusal": None}


def completion_logprobs(c: Completion) -> dict[str, Any] | None:
    """OpenAI completions format: tokens, token_logprobs, top_logprobs (dicts), text_offset (in the text)."""
    if c.logprobs is None:
        return None
    offsets, offset = [], 0
    for t in c.logprobs:
        offsets.append(offset)
        offset += len(t.token)
    return {
        "tokens": [t.token for t in c.logprobs],
        "token_logprobs": [t.logprob for t in c.logprobs],
        "top_logprobs": [dict(t.top) for t in c.logprobs],
        "text_offset": offsets,
    }


def _error_type(status: int) -> str:
    return "invalid_request_error" if status < 500 else "server_error"


def create_app(generator: Generator, served_name: str, api_key: str | None = None,
               limits: ServerLimits | None = None) -> FastAPI:
    """The app serving `generator` under the model name `served_name` (see module docstring)."""
    limits = limits or ServerLimits()
    app = FastAPI(title="proctor serve", docs_url=None, redoc_url=None)
    app.add_middleware(BodyLimit, max_bytes=limits.max_body_bytes,
                       error=lambda status, message, code: error_body(message, _error_type(status), code))
    admission = app.state.admission = Admission(limits)
    created = int(time.time())

    def check_key(request: Request) -> None:
        if api_key is not None and not bearer_ok(request.headers.get("authorization"), api_key):
            raise OpenAIError(401, "invalid or missing API key (send `Authorization: Bearer <key>`)",
                              code="invalid_api_key")

    def check_model(name: str) -> None:
        if name != served_name:
            raise OpenAIError(404, f"the model {name!r} does not exist; this server serves {served_name!r}",
                              code="model_not_found")

    async def run(request: Request, prompts: list[str], req: ChatCompletionRequest | CompletionRequest
                  ) -> GenerationResult:
        """Bound the request (rows, token positions), then generate once admitted; 400/429/499 otherwise."""
        params = req.sampling()
        error = too_many_rows(len(prompts) * params.n, limits, "rows (prompts x n)")
        if error is not None:
            raise error
        try:  # tokenizing a large body takes a while: not on the event loop
            prep = await anyio.to_thread.run_sync(
                lambda: generator.prepare(prompts, params, add_special_tokens=req.add_special_tokens))
        except GenerationRequestError as e:
            raise OpenAIError(400, str(e)) from e
        error = too_many_tokens(prep.positions, limits,
                                f"{prep.rows} rows x ({prep.width} prompt + {prep.max_new} new tokens)")
        if error is not None:
            raise error

        def work(cancel: threading.Event) -> GenerationResult:
            try:
                return generator.run(prep, params, cancel)
            except GenerationCancelled:
                raise GuardError(499, "the client closed the connection", "client_gone") from None

        return await admission.run(request, work)

    @app.exception_handler(GuardError)
    async def _guard(_: Request, exc: GuardError) -> JSONResponse:
        return JSONResponse(error_body(exc.message, _error_type(exc.status), exc.code), status_code=exc.status)

    @app.exception_handler(OpenAIError)
    async def _openai_error(_: Request, exc: OpenAIError) -> JSONResponse:
        return JSONResponse(error_body(exc.message, exc.type, exc.code), status_code=exc.status)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        message, param = _validation_message(exc)
        return JSONResponse(error_body(message, "invalid_request_error", param=param), status_code=400)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        type_ = "invalid_request_error" if exc.status_code < 500 else "server_error"
        return JSONResponse(error_body(str(exc.detail), type_), status_code=exc.status_code)

    @app.exception_handler(Exception)
    async def _crash(request: Request, exc: Exception) -> JSONResponse:
        rid, message = internal_error(log, request.url.path, exc)
        return JSONResponse(error_body(message, "server_error", "internal_error"), status_code=500,
                            headers={"x-request-id": rid})

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/v1/models", dependencies=[Depends(check_key)])
    def models() -> dict[str, Any]:
        card = {"id": served_name, "object": "model", "created": created, "owned_by": "proctor",
                "max_model_len": generator.context_length}
        return {"object": "list", "data": [card]}

    @app.post("/v1/chat/completions", dependencies=[Depends(check_key)])
    async def chat_completions(req: ChatCompletionRequest, request: Request) -> dict[str, Any]:
        check_model(req.model)
        try:
            prompt = await anyio.to_thread.run_sync(generator.chat_prompt, req.chat_messages())
        except GenerationRequestError as e:
            raise OpenAIError(400, str(e)) from e
        result = await run(request, [prompt], req)
        choices = [
            {"index": j, "message": {"role": "assistant", "content": c.text}, "logprobs": chat_logprobs(c),
             "finish_reason": c.finish_reason} | ({"token_ids": c.token_ids} if req.return_token_ids else {})
            for j, c in enumerate(result.completions[0])
        ]
        ids = {"prompt_token_ids": result.prompt_ids[0]} if req.return_token_ids else {}
        return {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
                "model": served_name, "choices": choices, "usage": usage(result)} | ids

    @app.post("/v1/completions", dependencies=[Depends(check_key)])
    async def completions(req: CompletionRequest, request: Request) -> dict[str, Any]:
        check_model(req.model)
        result = await run(request, req.prompts(), req)
        choices = [
            {"index": i * req.n + j, "text": c.text, "logprobs": completion_logprobs(c),
             "finish_reason": c.finish_reason}
            | ({"token_ids": c.token_ids, "prompt_token_ids": result.prompt_ids[i]} if req.return_token_ids else {})
            for i, group in enumerate(result.completions)
            for j, c in enumerate(group)
        ]
        return {"id": f"cmpl-{uuid.uuid4().hex}", "object": "text_completion", "created": int(time.time()),
                "model": served_name, "choices": choices, "usage": usage(result)}

    return app

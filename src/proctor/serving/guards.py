"""Bounds and protections shared by the servers (`proctor serve`, `proctor prm serve`, `proctor serve-env`).

- `ServerLimits`: the configurable bounds, with safe defaults (`--limit key=value` on both commands).
- `BodyLimit`: ASGI middleware that reads a request body in its chunks and answers 413 as soon as it
  passes `max_body_bytes` (or at once when `Content-Length` says so), before anything parses it.
- `RequestGuard`: ASGI middleware for a server with WebSocket sessions (`proctor serve-env`): the API key on every
  route but the open ones, at the WebSocket handshake too, and WebSocket messages bounded in size.
- `Admission`: at most `max_queue` requests admitted (running or waiting for the model), the rest 429 at
  once; admitted requests run one at a time in arrival order, in a worker thread, while a watcher polls the
  connection: when the client goes, the request's cancel event is set (generation stops at the next token,
  scoring at the next batch) and a request still waiting leaves the queue.
- `bearer_ok`: constant-time API-key check (`hmac.compare_digest`); the key comes from an environment
  variable and is never logged.
- `exposure_warning`: the line every serving command prints when it binds beyond this machine's loopback
  without a key (`proctor serve`, `proctor prm serve`, `proctor serve-env`).
- `internal_error`: a 500 says only "internal error" and a request id; the exception is logged with it.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import logging
import threading
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
from pydantic import BaseModel, ConfigDict, Field, ValidationError

T = TypeVar("T")


class ServerLimits(BaseModel):
    """Per-request and per-server bounds; a request over one is refused at once (413, 400 or 429)."""

    model_config = ConfigDict(extra="forbid")

    max_body_bytes: int = Field(4 * 1024 * 1024, ge=1024, description="request body size (413 above)")
    max_rows: int = Field(256, ge=1, description="prompts x n (serve), or trajectories / examples / "
                          "candidate actions (prm serve) per request (400 above)")
    max_request_tokens: int = Field(65_536, ge=16, description="token positions one request may make the "
                                    "model process: rows x (longest prompt + max_tokens) for serve, the "
                                    "tokens scored for prm serve (400 above)")
    max_queue: int = Field(16, ge=1, description="requests admitted at once, running or waiting (429 above)")
    disconnect_poll_s: float = Field(0.05, gt=0, le=5, description="how often a running request checks "
                                     "that its client is still connected")

    @classmethod
    def from_pairs(cls, pairs: list[str]) -> ServerLimits:
        """`["max_queue=32", ...]` (the CLI's `--limit`); a clear ValueError naming the key otherwise."""
        values: dict[str, str] = {}
        for pair in pairs:
            key, sep, value = pair.partition("=")
            if not sep or not key.strip():
                raise ValueError(f"--limit {pair!r}: expected key=value with a key among {list(cls.model_fields)}")
            values[key.strip()] = value.strip()
        try:
            return cls.model_validate(values)
        except ValidationError as e:
            err = e.errors()[0]
            raise ValueError(f"--limit {'.'.join(map(str, err['loc']))}: {err['msg']}") from None


class GuardError(Exception):
    """A request refused by a guard: HTTP `status`, a message for the client, a short `code`."""

    def __init__(self, status: int, message: str, code: str):
        super().__init__(message)
        self.status, self.message, self.code = status, message, code


def too_many_rows(rows: int, limits: ServerLimits, what: str) -> GuardError | None:
    if rows > limits.max_rows:
        return GuardError(400, f"this request has {rows} {what}; the server's limit is {limits.max_rows} "
                               f"(split the request)", "too_many_rows")
    return None


def too_many_tokens(tokens: int, limits: ServerLimits, what: str) -> GuardError | None:
    if tokens > limits.max_request_tokens:
        return GuardError(400, f"this request needs {tokens} token positions ({what}); the server's limit is "
                               f"{limits.max_request_tokens} (split the request or shorten it)", "too_many_tokens")
    return None


def bearer_ok(authorization: str | None, api_key: str) -> bool:
    """`Authorization: Bearer <api_key>`, compared in constant time."""
    scheme, _, given = (authorization or "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), api_key.encode())


def is_loopback(host: str) -> bool:
    """Whether a server bound to `host` is reachable from this machine only: `localhost`, 127.0.0.0/8 or ::1."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False  # a name or an address of a network interface


def exposure_warning(host: str, api_key: str | None, key_option: str = "--api-key-env") -> str | None:
    """One line for a server bound to `host` beyond this machine without an API key, else None."""
    if api_key or is_loopback(host):
        return None
    return (f"warning: serving on {host} without an API key: anyone who can reach this port can use the server; "
            f"give {key_option} VAR, or bind 127.0.0.1 (the default)")


class BodyLimit:
    """ASGI middleware: a body over `max_bytes` gets 413 (`error(413, message, code)` as JSON) while it streams
    in, so it is never held whole, let alone parsed; an accepted body is handed on unchanged.

    Before answering, the rest of an oversized body is read and dropped (at most `drain_bytes` more, for at
    most `drain_s` seconds), so that an HTTP/1.1 client still sending it can read the 413."""

    def __init__(self, app: Any, max_bytes: int, error: Callable[[int, str, str], dict[str, Any]],
                 drain_bytes: int = 256 * 1024 * 1024, drain_s: float = 10.0):
        self.app, self.max_bytes, self.error = app, max_bytes, error
        self.drain_bytes, self.drain_s = drain_bytes, drain_s

    async def __call__(self, scope: dict[str, Any], receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._reject(receive, send, more=True)
            return
        chunks, total = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # the client left before sending its whole body
            chunk = message.get("body", b"")
            total += len(chunk)
            more = message.get("more_body", False)
            if total > self.max_bytes:
                chunks.clear()
                await self._reject(receive, send, more)
                return
            chunks.append(chunk)
            if not more:
                break
        body, replayed = b"".join(chunks), False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # then the connection's own events (http.disconnect)

        await self.app(scope, replay, send)

    async def _reject(self, receive: Callable, send: Callable, more: bool) -> None:
        dropped = 0
        with anyio.move_on_after(self.drain_s):
            while more and dropped < self.drain_bytes:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return
                dropped += len(message.get("body", b""))
                more = message.get("more_body", False)
        message = f"the request body is larger than the server's limit of {self.max_bytes} bytes"
        payload = json.dumps(self.error(413, message, "body_too_large")).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"connection", b"close"),
                                (b"content-length", str(len(payload)).encode())]})
        await send({"type": "http.response.body", "body": payload})


class RequestGuard:
    """ASGI middleware: the API key on every route but `open_paths`, HTTP and the WebSocket handshake (401 with
    `error(401, message, code)` as JSON, or close 1008 where the server cannot answer a handshake in HTTP), and
    WebSocket messages bounded by `max_bytes` (a larger one gets `ws_error(message, code)` as JSON, then the socket
    is closed with 1009). HTTP bodies are bounded by `BodyLimit`."""

    def __init__(self, app: Any, api_key: str | None, max_bytes: int,
                 error: Callable[[int, str, str], dict[str, Any]], ws_error: Callable[[str, str], dict[str, Any]],
                 open_paths: tuple[str, ...] = ("/health",)):
        self.app, self.api_key, self.max_bytes, self.open_paths = app, api_key, max_bytes, open_paths
        self.error, self.ws_error = error, ws_error

    async def __call__(self, scope: dict[str, Any], receive: Callable, send: Callable) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        if self.api_key is not None and scope.get("path") not in self.open_paths:
            headers = dict(scope.get("headers") or [])
            given = headers.get(b"authorization", b"").decode("latin-1")
            if not bearer_ok(given, self.api_key):
                await self._unauthorized(scope, send)
                return
        if scope["type"] == "http":
            await self.app(scope, receive, send)
            return
        from starlette.websockets import WebSocketDisconnect

        try:
            await self.app(scope, self._bounded(receive, send), send)
        except WebSocketDisconnect:
            pass  # the app closed a socket whose client had gone already

    def _bounded(self, receive: Callable, send: Callable) -> Callable:
        async def bounded() -> dict[str, Any]:
            message = await receive()
            if message["type"] == "websocket.receive":
                size = len(message["bytes"]) if message.get("bytes") is not None else \
                    len((message.get("text") or "").encode())
                if size > self.max_bytes:
                    error = self.ws_error(f"the message is larger than the server's limit of {self.max_bytes} "
                                          "bytes", "MESSAGE_TOO_LARGE")
                    await send({"type": "websocket.send", "text": json.dumps(error)})
                    await send({"type": "websocket.close", "code": 1009})
                    return {"type": "websocket.disconnect", "code": 1009}
            return message

        return bounded

    async def _unauthorized(self, scope: dict[str, Any], send: Callable) -> None:
        body = json.dumps(self.error(401, "invalid or missing API key (send `Authorization: Bearer <key>`)",
                                     "invalid_api_key")).encode()
        start = {"status": 401, "headers": [(b"content-type", b"application/json"),
                                            (b"content-length", str(len(body)).encode())]}
        if scope["type"] == "http":
            await send({"type": "http.response.start", **start})
            await send({"type": "http.response.body", "body": body})
        elif "websocket.http.response" in (scope.get("extensions") or {}):
            await send({"type": "websocket.http.response.start", **start})
            await send({"type": "websocket.http.response.body", "body": body})
        else:
            await send({"type": "websocket.close", "code": 1008})


class Admission:
    """Admit at most `max_queue` requests; run them one at a time in a thread, cancelled if the client goes."""

    def __init__(self, limits: ServerLimits):
        self.limits = limits
        self.admitted = 0
        self.cancelled = 0  # requests whose client left (tests and the load bench read it)
        self._lock = asyncio.Lock()

    async def run(self, request: Any, work: Callable[[threading.Event], T], exclusive: bool = True) -> T:
        """`work(cancel)` in a worker thread once the model is free (`exclusive`; else at once: work that
        batches its own model calls across requests); GuardError 429 when the queue is full, 499 when the
        client left (it never sees the answer)."""
        if self.admitted >= self.limits.max_queue:
            raise GuardError(429, f"the server is busy ({self.admitted} requests admitted, the limit is "
                                  f"{self.limits.max_queue}); retry later", "queue_full")
        self.admitted += 1
        cancel = threading.Event()
        watcher = asyncio.create_task(self._watch(request, cancel))
        try:
            if exclusive:
                await self._acquire(cancel)
            try:
                result = await anyio.to_thread.run_sync(work, cancel)
            finally:
                if exclusive:
                    self._lock.release()
            if cancel.is_set():
                raise GuardError(499, "the client closed the connection", "client_gone")
            return result
        except GuardError as e:
            if e.status == 499:
                self.cancelled += 1
            raise
        finally:
            watcher.cancel()
            self.admitted -= 1

    async def _acquire(self, cancel: threading.Event) -> None:
        """Wait for the model in arrival order (the lock's FIFO), but leave the queue if the client goes."""
        acquiring = asyncio.ensure_future(self._lock.acquire())
        while True:
            done, _ = await asyncio.wait({acquiring}, timeout=self.limits.disconnect_poll_s)
            if done:
                acquiring.result()
                if not cancel.is_set():
                    return
                self._lock.release()
                break
            if cancel.is_set():
                if not acquiring.cancel() and not acquiring.cancelled():  # it got the lock meanwhile
                    self._lock.release()
                break
        raise GuardError(499, "the client closed the connection", "client_gone")

    async def _watch(self, request: Any, cancel: threading.Event) -> None:
        while not cancel.is_set():
            if await request.is_disconnected():
                cancel.set()
                return
            await asyncio.sleep(self.limits.disconnect_poll_s)


def internal_error(log: logging.Logger, path: str, exc: BaseException) -> tuple[str, str]:
    """Log `exc` with a new request id; (request id, the message for the client, which names only the id)."""
    rid = uuid.uuid4().hex[:16]
    log.error("request %s to %s failed", rid, path, exc_info=exc)
    return rid, f"internal server error (request id {rid}; the server log has the details)"


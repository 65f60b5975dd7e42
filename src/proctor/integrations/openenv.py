"""Any proctor env (built-in or adapter) as an OpenEnv environment server: `proctor serve-env ENV`, or `create_app`.

Written against OpenEnv 0.3 (`openenv-core`, `OPENENV_VERSION`), read from its installed source
(`openenv/core/env_server/{interfaces,types,http_server,serialization}.py`, `openenv/core/env_client.py`):

- An OpenEnv server wraps an `Environment` subclass (`reset(seed, episode_id, **kwargs)`, `step(action)`, the
  `state` property, `close`) whose `Action`, `Observation` and `State` are pydantic models; `create_fastapi_app(
  factory, action_cls, observation_cls, concurrency_config=...)` builds the FastAPI app.
- Episodes run over the WebSocket `/ws`: each connection is a session with its own environment (the factory is
  called once per session), messages `{"type": "reset" | "step" | "state" | "close", "data": ...}`. That is what
  OpenEnv's clients (`EnvClient`, `GenericEnvClient`, and their `.sync()` wrappers) use. The HTTP `POST /reset` and
  `POST /step` are stateless in OpenEnv: each request gets a fresh environment, closed after it, so `/reset` is a
  one-off and `/step` cannot continue an episode (here it answers 409).
- The reply to reset and step is `{"observation": <the Observation's fields but reward, done and metadata>,
  "reward", "done"}`; an exception in `reset` or `step` reaches a WebSocket client as `{"type": "error", "data":
  {"message": str(exc), "code": "EXECUTION_ERROR"}}`, which `EnvClient` raises as `RuntimeError("Server error:
  <message> (code: EXECUTION_ERROR)")`.

**The mapping.** The action is `{"command": "<text>"}` (`ProctorAction`). The observation (`ProctorObservation`)
carries the env's text (`text`), the task, the admissible actions (None when the env does not list them), the step
count, `won` / `score` / `truncated` / `termination`, and `expert_action` only when the served env was built with
`expert_hints=true` (privileged: it is the env's expert's next action). `done` is the env's; `reward` is the env's
step reward, or, with a PRM (`--prm`), the PRM's score q_t of the step just taken (`env_reward` keeps the env's own
reward r_t, `prm_score` repeats q_t). q_t is the score `score_trajectories` gives that step of the episode so far,
rendered as proctor's rollout engine records it (the same `Trajectory` as `proctor.integrations.trl` builds, by the
shared `proctor.integrations.common`); a PRM scores a step from the steps up to it, so it is also that step's
score in the finished episode.

**Task selection.** `reset` takes `task_id` (any task of the env's splits), `split` (default: the server's
`split`) and `seed` (the env seed; default `proctor.episode.episode_seed(run_seed, task_id, 0)`, as the rollout
engine seeds a task's first sample), and `episode_id`; with no `task_id`, the split's tasks are handed out in order,
round and round, across all sessions of the server.

**Errors and bounds.** Every refusal is one line: over HTTP `{"detail": "<message>", "code": "<code>"}` with a 4xx
status, over the WebSocket the message above. Codes: `unknown_split` and `bad_reset` (400), `unknown_task` (404),
`bad_action` (422: not an object with a `command` string, empty, or longer than `max_action_chars`),
`no_episode` and `episode_over` (409), `body_too_large` (413), `invalid_api_key` (401). An unknown env is refused
when the server is built (`create_app` raises a one-line ValueError; the CLI prints it and exits 2). The server
binds 127.0.0.1 unless told otherwise, HTTP bodies and WebSocket messages are bounded by `max_body_bytes` (a
message over it, up to uvicorn's own bound `ws_max_size`, gets `MESSAGE_TOO_LARGE` and the socket is closed with
1009; uvicorn closes one over `ws_max_size` with 1009 and no message), at most `max_sessions` sessions run at once
(OpenEnv answers `CAPACITY_REACHED` above), and with an API key every route but `/health` needs `Authorization:
Bearer <key>` (a WebSocket handshake without it is refused); the key comes from an environment variable and is never
logged. `ProctorEnvClient(base_url, api_key=...)` is OpenEnv's `EnvClient` with proctor's types and the key sent at
the handshake; `with_api_key(GenericEnvClient)` is OpenEnv's generic client that sends it (`BearerKey`).

Importing this module imports OpenEnv (and its web stack, a few seconds); a PRM loads when the first step is
scored (`proctor serve-env` loads it before serving).
"""

from __future__ import annotations

import functools
import json
import logging
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from pydantic import ConfigDict, Field, model_validator

from proctor.envs.base import TextEnv
from proctor.envs.registry import EnvSpec
from proctor.episode import Episode, termination_of
from proctor.integrations.common import (
    AdapterPRM,
    TaskOrder,
    end_reason,
    finish_episode,
    start_episode,
    step_episode,
)
from proctor.serving.guards import BodyLimit, GuardError, bearer_ok, internal_error

try:
    from openenv.core.client_types import StepResult
    from openenv.core.env_client import EnvClient
    from openenv.core.env_server.http_server import create_fastapi_app
    from openenv.core.env_server.interfaces import Environment
    from openenv.core.env_server.types import (
        Action,
        ConcurrencyConfig,
        EnvironmentMetadata,
        Observation,
        State,
    )
except ImportError as e:  # pragma: no cover - the extra is installed by `dev`
    raise ImportError("proctor.integrations.openenv needs OpenEnv: pip install 'proctor[openenv]'") from e

log = logging.getLogger(__name__)

#: the OpenEnv release this adapter is written and tested against
OPENENV_VERSION = "0.3.0"
#: routes that answer without an API key
OPEN_PATHS = ("/health",)


class ServeEnvConfig(AdapterPRM):
    """What `create_app` serves, and its bounds; the PRM's fields are `AdapterPRM`'s."""

    model_config = ConfigDict(extra="forbid")

    env: str = Field(description="a registered proctor env (`proctor envs`)")
    env_kwargs: dict[str, Any] = Field(default_factory=dict, description="the env's constructor arguments")
    split: str = Field("train", description="the split `reset` draws from when the client names no task or split")
    run_seed: int = Field(0, description="default env seeds: episode_seed(run_seed, task_id, 0)")
    max_sessions: int = Field(4, ge=1, description="concurrent WebSocket sessions (each holds one env)")
    session_timeout_s: float | None = Field(None, gt=0, description="OpenEnv's reaper drops sessions idle this "
                                            "long (None: never)")
    max_action_chars: int = Field(1000, ge=1, description="longest command accepted (422 above)")
    max_body_bytes: int = Field(64 * 1024, ge=1024, description="largest HTTP body or WebSocket message (413 / "
                                "MESSAGE_TOO_LARGE above)")
    ws_max_size: int = Field(16 * 1024 * 1024, ge=2048, description="largest WebSocket message the server reads "
                             "at all (uvicorn's ws_max_size, above max_body_bytes): uvicorn closes the socket on a "
                             "larger one with code 1009 and no error message")

    @model_validator(mode="after")
    def _bounds(self) -> ServeEnvConfig:
        if self.ws_max_size <= self.max_body_bytes:
            raise ValueError(f"field 'ws_max_size': {self.ws_max_size} must be above max_body_bytes "
                             f"({self.max_body_bytes}), or no too-large message gets proctor's MESSAGE_TOO_LARGE")
        return self


def uvicorn_options(cfg: ServeEnvConfig) -> dict[str, Any]:
    """What uvicorn is given beside the app (`proctor serve-env`, and `BackgroundServer` in tests): its WebSocket
    bound `ws_max_size`, above `max_body_bytes`, so that proctor's bound is the one that answers a message that
    is too large (MESSAGE_TOO_LARGE, then close 1009), up to `ws_max_size`."""
    return {"ws_max_size": cfg.ws_max_size}


def _bad_action(message: str) -> GuardError:
    return GuardError(422, f"bad action: {message}", "bad_action")


class ProctorAction(Action):
    """One command for the env, e.g. one of the admissible actions the last observation listed."""

    command: str = Field(description="the command, e.g. one of the admissible actions")

    @model_validator(mode="before")
    @classmethod
    def _one_line_errors(cls, data: Any) -> Any:
        # a GuardError (not a ValueError) passes through pydantic unchanged, so that both of OpenEnv's transports
        # report it as one line rather than as a validation error list ("Invalid message" over the WebSocket)
        if not isinstance(data, dict):
            raise _bad_action(f'expected an object {{"command": "..."}}, got {type(data).__name__}')
        unknown = sorted(set(data) - {"command", "metadata"})
        if unknown:
            raise _bad_action(f"unknown field(s) {', '.join(unknown)}; an action is {{\"command\": \"...\"}}")
        command = data.get("command")
        if not isinstance(command, str):
            raise _bad_action(f"'command' must be a string, got {type(command).__name__}")
        if not command.strip():
            raise _bad_action("'command' is empty")
        return data


class ProctorObservation(Observation):
    """The env's reply (module docstring); `reward` is the env's step reward, or the PRM's score with a PRM."""

    text: str = Field("", description="the env's observation text")
    task: str = Field("", description="the task instruction")
    task_id: str = ""
    admissible_actions: list[str] | None = Field(None, description="the valid commands now (None: not listed)")
    step: int = Field(0, description="steps taken in this episode")
    env_reward: float | None = Field(None, description="the env's reward of the last step (None after reset)")
    prm_score: float | None = Field(None, description="the PRM's score of the last step (None without a PRM)")
    valid: bool = Field(True, description="whether the env accepted the last command")
    won: bool = False
    score: float = Field(0.0, description="the env's grade of the episode so far")
    truncated: bool = Field(False, description="the env's step limit ended the episode")
    termination: str | None = Field(None, description="success, failure or max_steps once done")
    expert_action: str | None = Field(None, description="the expert's next action (only with expert_hints=true)")


class ProctorState(State):
    """The session's episode: OpenEnv's `episode_id` and `step_count`, and the env, split, task and seed."""

    env: str = ""
    split: str | None = None
    task_id: str | None = None
    seed: int | None = None
    done: bool = True


class EnvService:
    """What every session of one server shares: the config, the env's splits and tasks, their order, the PRM."""

    def __init__(self, cfg: ServeEnvConfig):
        self.cfg = cfg
        self.spec = EnvSpec(cfg.env, dict(cfg.env_kwargs))
        probe = build_env(self.spec)
        try:
            self.splits = tuple(probe.splits())
            if cfg.split not in self.splits:
                raise ValueError(f"{cfg.env}: unknown split {cfg.split!r}; it has {', '.join(self.splits)}")
            self.tasks = {s: probe.task_ids(s) for s in self.splits}
        finally:
            probe.close()
        self.known = {s: set(ids) for s, ids in self.tasks.items()}
        self.orders = {s: TaskOrder(cfg.env, s, ids) for s, ids in self.tasks.items()}
        self.prm = cfg.prm_handle()


def build_env(spec: EnvSpec) -> TextEnv:
    """`spec.make()`, its failures (unknown env, bad arguments, missing data) as one-line ValueErrors."""
    try:
        return spec.make()
    except KeyError as e:
        raise ValueError(str(e.args[0]) if e.args else repr(e)) from None
    except (TypeError, ValueError, OSError, ImportError) as e:
        raise ValueError(f"cannot build env {spec.name!r} with {spec.kwargs}: {e}") from None


@contextmanager
def internal_errors(what: str) -> Iterator[None]:
    """An env or PRM failure inside the block as a 500 `GuardError` that names only a request id (the server log
    has the exception), so that no traceback text reaches a client."""
    try:
        yield
    except GuardError:
        raise
    except Exception as e:  # noqa: BLE001 - logged with its traceback, answered as one line
        _, message = internal_error(log, what, e)
        raise GuardError(500, message, "internal_error") from None


class ProctorEnvironment(Environment[ProctorAction, ProctorObservation, ProctorState]):
    """One session's env (module docstring); its proctor env is built at the first reset, so the sessions
    OpenEnv opens for `/state`, `/metadata` and `/schema` cost nothing."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, service: EnvService):
        super().__init__()
        self._service = service
        self._env: TextEnv | None = None
        self._episode: Episode | None = None
        self._split = service.cfg.split
        self._state = ProctorState(env=service.cfg.env)

    # -- OpenEnv's interface ------------------------------------------------------------------------------
    def reset(self, seed: int | None = None, episode_id: str | None = None, task_id: str | None = None,
              split: str | None = None, **kwargs: Any) -> ProctorObservation:
        """Start an episode of `task_id` (None: the next task of `split`) with env seed `seed`."""
        svc = self._service
        if kwargs:
            raise GuardError(400, f"unknown reset argument(s) {', '.join(sorted(kwargs))}; reset takes task_id, "
                                  "split, seed and episode_id", "bad_reset")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise GuardError(400, f"seed must be an integer >= 0, got {seed!r}", "bad_reset")
        if split is not None and split not in svc.splits:
            raise GuardError(400, f"{svc.cfg.env}: unknown split {split!r}; it has {', '.join(svc.splits)}",
                             "unknown_split")
        if task_id is None:
            split = split or svc.cfg.split
            try:
                task_id = svc.orders[split].next()
            except ValueError as e:
                raise GuardError(404, str(e), "unknown_task") from None
        else:
            if not isinstance(task_id, str):
                raise GuardError(400, f"task_id must be a string, got {type(task_id).__name__}", "bad_reset")
            searched = [split] if split is not None else [svc.cfg.split, *(s for s in svc.splits
                                                                           if s != svc.cfg.split)]
            split = next((s for s in searched if task_id in svc.known[s]), None)
            if split is None:
                where = f"split {searched[0]!r}" if len(searched) == 1 else "any split"
                raise GuardError(404, f"{svc.cfg.env}: unknown task {task_id!r} in {where}", "unknown_task")
        env = self._proctor_env()
        self._episode = None  # a failed reset leaves no episode to step in
        with internal_errors("reset"):
            self._episode = start_episode(env, task_id, seed, run_seed=svc.cfg.run_seed)
        self._split = split
        self._state = ProctorState(episode_id=episode_id or uuid.uuid4().hex, step_count=0, env=svc.cfg.env,
                                   split=split, task_id=task_id, seed=self._episode.item.seed, done=False)
        return self._observation(None, None)

    def step(self, action: ProctorAction, timeout_s: float | None = None, **kwargs: Any) -> ProctorObservation:
        """Carry out `action.command`; the reward is the env's, or the PRM's score of this step."""
        env, episode, cfg = self._env, self._episode, self._service.cfg
        command = action.command.strip()
        if len(command) > cfg.max_action_chars:
            raise _bad_action(f"'command' has {len(command)} characters; this server's limit is "
                              f"{cfg.max_action_chars}")
        if env is None or episode is None:
            raise GuardError(409, "no episode is running in this session: call reset first (OpenEnv's HTTP /step "
                                  "gets a fresh env per request; play episodes over the WebSocket /ws, as "
                                  "OpenEnv's EnvClient does)", "no_episode")
        if env.done:
            raise GuardError(409, f"the episode is over ({end_reason(episode.info, env.max_steps)} after "
                                  f"{len(episode.steps)} steps): call reset to start another", "episode_over")
        with internal_errors("step"):
            result = step_episode(env, episode, command)
        reward, done = result.reward, result.done
        q = None
        if self._service.prm is not None:
            traj = finish_episode(env, episode, split=self._split, agent="openenv", run_seed=cfg.run_seed)
            with internal_errors("PRM scoring"):
                q = self._service.prm.score_trajectories([traj], cfg.prm_prompt)[0][-1]
            episode.steps[-1].scores["prm"] = q
        self._state.step_count = len(episode.steps)
        self._state.done = done
        return self._observation(reward, q)

    @property
    def state(self) -> ProctorState:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        from proctor import __version__

        cfg = self._service.cfg
        reward = "the PRM's score of each step" if self._service.prm is not None else "the env's step reward"
        return EnvironmentMetadata(name=f"proctor/{cfg.env}", version=__version__, author="proctor",
                                   description=f"proctor's {cfg.env!r} text environment; action "
                                               f"{{\"command\": \"...\"}}; reward: {reward}")

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
        self._env, self._episode = None, None

    # -- proctor's side -----------------------------------------------------------------------------------
    @property
    def episode(self) -> Episode | None:
        """The running (or last) episode, as proctor's rollout engine records it."""
        return self._episode

    def _proctor_env(self) -> TextEnv:
        if self._env is None:
            with internal_errors("building the env"):
                self._env = build_env(self._service.spec)
        return self._env

    def _observation(self, reward: float | None, q: float | None) -> ProctorObservation:
        env, episode = self._env, self._episode
        assert env is not None and episode is not None
        info = episode.info
        termination = termination_of(info) if env.done else None
        return ProctorObservation(
            text=episode.observation, task=episode.task, task_id=episode.item.task_id,
            admissible_actions=info.get("admissible_actions"), step=len(episode.steps), env_reward=reward,
            prm_score=q, valid=bool(info.get("valid", True)), won=bool(info.get("won")),
            score=float(info.get("score", 0.0)), truncated=bool(info.get("truncated")), termination=termination,
            expert_action=info.get("expert_action"), done=env.done, reward=q if q is not None else reward)


class RequestGuard:
    """ASGI middleware: the API key on every route but `OPEN_PATHS` (HTTP and the WebSocket handshake), and
    WebSocket messages bounded by `max_bytes` (a larger one gets an OpenEnv error message, then the socket is
    closed with 1009). HTTP bodies are bounded by `BodyLimit`."""

    def __init__(self, app: Any, api_key: str | None, max_bytes: int):
        self.app, self.api_key, self.max_bytes = app, api_key, max_bytes

    async def __call__(self, scope: dict[str, Any], receive: Callable, send: Callable) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        if self.api_key is not None and scope.get("path") not in OPEN_PATHS:
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
            pass  # OpenEnv 0.3 closes the socket after the client's "close" message, when the client is gone already

    def _bounded(self, receive: Callable, send: Callable) -> Callable:
        async def bounded() -> dict[str, Any]:
            message = await receive()
            if message["type"] == "websocket.receive":
                size = len(message["bytes"]) if message.get("bytes") is not None else \
                    len((message.get("text") or "").encode())
                if size > self.max_bytes:
                    error = {"type": "error", "data": {
                        "message": f"the message is larger than the server's limit of {self.max_bytes} bytes",
                        "code": "MESSAGE_TOO_LARGE"}}
                    await send({"type": "websocket.send", "text": json.dumps(error)})
                    await send({"type": "websocket.close", "code": 1009})
                    return {"type": "websocket.disconnect", "code": 1009}
            return message

        return bounded

    async def _unauthorized(self, scope: dict[str, Any], send: Callable) -> None:
        body = json.dumps({"detail": "invalid or missing API key (send `Authorization: Bearer <key>`)",
                           "code": "invalid_api_key"}).encode()
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
    """The OpenEnv FastAPI app serving `cfg.env` (module docstring); a ValueError (one line) for an unknown env,
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
        return JSONResponse({"detail": exc.message, "code": exc.code}, status_code=exc.status)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse({"detail": _one_line(exc.errors()), "code": "invalid_request"}, status_code=422)

    @app.exception_handler(HTTPException)
    async def _http(_: Request, exc: HTTPException) -> JSONResponse:
        return JSONResponse({"detail": _one_line(exc.detail), "code": "http_error"}, status_code=exc.status_code,
                            headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _crash(request: Request, exc: Exception) -> JSONResponse:
        rid, message = internal_error(log, request.url.path, exc)
        return JSONResponse({"detail": message, "code": "internal_error"}, status_code=500,
                            headers={"x-request-id": rid})

    app.add_middleware(BodyLimit, max_bytes=cfg.max_body_bytes,
                       error=lambda status, message, code: {"detail": message, "code": code})
    app.add_middleware(RequestGuard, api_key=api_key, max_bytes=cfg.max_body_bytes)
    return app


class BearerKey:
    """A mixin for OpenEnv's `EnvClient` classes (module docstring): `api_key` (or None) is sent as `Authorization:
    Bearer <key>` at the WebSocket handshake, which a server started with `--api-key-env` requires; OpenEnv's own
    clients send no headers. `with_api_key(GenericEnvClient)` is OpenEnv's generic client with it."""

    def __init__(self, base_url: str, *args: Any, api_key: str | None = None, **kwargs: Any):
        super().__init__(base_url, *args, **kwargs)
        self._api_key = api_key

    async def connect(self) -> Any:
        if self._api_key is None or self._ws is not None:
            return await super().connect()
        from urllib.parse import urlparse

        from websockets.asyncio.client import connect

        local = urlparse(self._ws_url).hostname in ("localhost", "127.0.0.1", "::1")
        try:  # OpenEnv's connect, with the header (and, as it does, no proxy for this machine)
            self._ws = await connect(self._ws_url, open_timeout=self._connect_timeout, max_size=self._max_message_size,
                                     additional_headers={"Authorization": f"Bearer {self._api_key}"},
                                     proxy=None if local else True)
        except Exception as e:
            raise ConnectionError(f"Failed to connect to {self._ws_url}: {e}") from e
        return self


def with_api_key(client_cls: type) -> type:
    """`client_cls` (any OpenEnv `EnvClient` subclass, e.g. `GenericEnvClient`) taking `api_key=...`, which it
    sends at the handshake (`BearerKey`):

        KeyedClient = with_api_key(GenericEnvClient)
        with KeyedClient(base_url="http://127.0.0.1:8000", api_key=os.environ["ENV_SERVER_KEY"]).sync() as env:
            result = env.reset()
    """
    return type(client_cls.__name__, (BearerKey, client_cls), {"__doc__": f"{client_cls.__name__} that sends an "
                                                                          "API key (proctor's `with_api_key`)."})


class ProctorEnvClient(BearerKey, EnvClient[ProctorAction, ProctorObservation, ProctorState]):
    """OpenEnv's `EnvClient` for a proctor env server: `step` takes a `ProctorAction` or the command text, results
    carry `ProctorObservation`s; `api_key` (or None) is sent as `Authorization: Bearer` at the WebSocket handshake.

        with ProctorEnvClient("http://127.0.0.1:8000").sync() as env:
            result = env.reset(task_id=...)
            result = env.step("go to fridge 1")
    """

    def _step_payload(self, action: ProctorAction | str) -> dict[str, Any]:
        if isinstance(action, str):
            return {"command": action}
        return action.model_dump(exclude_defaults=True)

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[ProctorObservation]:
        obs = ProctorObservation(**payload.get("observation", {}), reward=payload.get("reward"),
                                 done=payload.get("done", False))
        return StepResult(observation=obs, reward=payload.get("reward"), done=payload.get("done", False))

    def _parse_state(self, payload: dict[str, Any]) -> ProctorState:
        return ProctorState(**payload)

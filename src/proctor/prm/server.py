"""`proctor prm serve`: a FastAPI app that scores trajectories, step lists or candidate actions with a PRM.

POST /score          {"trajectories": [<Trajectory JSON>, ...]}            → {"scores": [[s_0, s_1, ...], ...]}
                     {"examples": [{"prompt": str, "steps": [str, ...]}]}  → same
POST /score_actions  {"state": {"task", "observation", "history": [<Step>], ...}, "actions": [a_1, ..., a_N]}
                     → {"scores": [q_1, ..., q_N]}: the PRM's score of each candidate action at that state
                     (per-step best-of-N, docs/methods.md §8), the state's prefix computed once and shared
POST /score_action_groups {"groups": [{"state": {...}, "actions": [...]}, ...]} → {"scores": [[q, ...], ...]}:
                     many states per request; the groups of concurrent requests are scored together in one
                     batched call (`proctor.prm.batching.GroupBatcher`); `RemotePRMScorer` is its client
GET  /health → {"status": "ok", "head": ..., "backbone": ..., "score_at": ...}

127.0.0.1 by default. With an API key every route but /health needs `Authorization: Bearer <key>` (401).
Bounds (`proctor.serving.guards.ServerLimits`): body size (413 while it streams in), items and tokens per
request (400), requests admitted at once (429); a client that disconnects stops its scoring at the next
batch. Errors are `{"detail": message}`: 422 for a malformed body or an unscorable example, 500 with only a
request id (the exception is logged with it).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

import anyio
from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, model_validator

from proctor.prm.batching import GroupBatcher
from proctor.prm.data import StepwiseExample
from proctor.prm.rendering import render_candidates, render_trajectory
from proctor.prm.scoring import PRMScorer, ScoringError
from proctor.prompts.turns import Prefix
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
from proctor.trajectory import Step, Trajectory

log = logging.getLogger("proctor.prm.serve")


class ScoreItem(BaseModel):
    model_config = ConfigDict(extra="forbid")

    prompt: str
    steps: list[str] = Field(min_length=1)


class ScoreRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    trajectories: list[Trajectory] | None = None
    examples: list[ScoreItem] | None = None

    @model_validator(mode="after")
    def _one(self) -> ScoreRequest:
        if (self.trajectories is None) == (self.examples is None):
            raise ValueError("give exactly one of 'trajectories' or 'examples'")
        return self


class State(BaseModel):
    """An agent state (`proctor.prompts.turns.Prefix`): the task, the steps so far, the current observation."""

    model_config = ConfigDict(extra="forbid")

    task: str
    observation: str
    history: list[Step] = Field(default_factory=list)
    env: str = ""
    task_id: str = ""
    info: dict[str, Any] = Field(default_factory=dict)

    def prefix(self) -> Prefix:
        return Prefix(env=self.env, task_id=self.task_id, task=self.task, observation=self.observation,
                      history=list(self.history), info=dict(self.info))


class ScoreActionsRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    state: State
    actions: list[str] = Field(min_length=1)


class StateActions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    state: State
    actions: list[str] = Field(min_length=1)


class ScoreActionGroupsRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    groups: list[StateActions] = Field(min_length=1)


class Unscorable(ValueError):
    """An example the PRM cannot score (e.g. longer than its max_length): 422."""


def tokenize_examples(scorer: PRMScorer, examples: Sequence[StepwiseExample], limits: ServerLimits
                      ) -> list[dict[str, Any]]:
    """The scorer's features of `examples`; GuardError 400 when their tokens add up to more than
    `limits.max_request_tokens` (checked before any forward pass)."""
    features = [scorer.prm.tokenize(ex, is_eval=True) for ex in examples]
    error = too_many_tokens(sum(len(f["input_ids"]) for f in features), limits, "the tokens of every example")
    if error is not None:
        raise error
    return features


def score_in_batches(scorer: PRMScorer, examples: Sequence[StepwiseExample], features: Sequence[dict[str, Any]],
                     cancel: threading.Event | None = None) -> list[list[float]]:
    """`scorer.score_examples` on tokenized features, one batch at a time, stopped between batches once
    `cancel` is set; `Unscorable` for an example whose steps do not all fit in the PRM's max_length."""
    out: list[list[float]] = []
    for i in range(0, len(features), scorer.batch_size):
        if cancel is not None and cancel.is_set():
            raise GuardError(499, "the client closed the connection", "client_gone")
        out += scorer.score_features(features[i : i + scorer.batch_size])
    for ex, s in zip(examples, out, strict=True):
        if len(s) != ex.num_steps:
            raise Unscorable(f"example {ex.id!r}: only {len(s)} of {ex.num_steps} steps fit in max_length "
                             f"{scorer.prm.spec.tokenization.max_length}")
    return out


def candidate_tokens(scorer: PRMScorer, prefix: Prefix, actions: Sequence[str]) -> int:
    """The tokens of the state's prefix and of every candidate's suffix."""
    tok = scorer.tokenizer
    shared, suffixes = render_candidates(tok, prefix, actions, None, scorer.marker)
    return len(tok(shared, add_special_tokens=False)["input_ids"]) + sum(
        len(ids) for ids in tok(suffixes, add_special_tokens=False)["input_ids"])


def check_candidate_tokens(scorer: PRMScorer, groups: Sequence[tuple[Prefix, Sequence[str]]],
                           limits: ServerLimits) -> None:
    """GuardError 400 when the states' prefixes and every candidate's suffix add up to more tokens than
    `limits.max_request_tokens`."""
    n_tokens = sum(candidate_tokens(scorer, prefix, actions) for prefix, actions in groups)
    error = too_many_tokens(n_tokens, limits, "the state's prefix and every candidate")
    if error is not None:
        raise error


def score_actions_in_chunks(scorer: PRMScorer, prefix: Prefix, actions: Sequence[str],
                            cancel: threading.Event | None = None) -> list[float]:
    """`scorer.score_actions` (the prefix's KV cache shared by the candidates) in chunks of
    `scorer.batch_size` candidates, with a cancel check between chunks."""
    out: list[float] = []
    for i in range(0, len(actions), scorer.batch_size):
        if cancel is not None and cancel.is_set():
            raise GuardError(499, "the client closed the connection", "client_gone")
        out += scorer.score_actions(prefix, actions[i : i + scorer.batch_size])
    return out


def make_app(scorer: PRMScorer, api_key: str | None = None, limits: ServerLimits | None = None) -> FastAPI:
    """The scoring app around a loaded scorer (see module docstring)."""
    limits = limits or ServerLimits()
    app = FastAPI(title="proctor PRM", docs_url=None, redoc_url=None)
    app.add_middleware(BodyLimit, max_bytes=limits.max_body_bytes,
                       error=lambda status, message, code: {"detail": message, "code": code})
    admission = app.state.admission = Admission(limits)
    batcher = app.state.batcher = GroupBatcher(scorer, max_groups=max(1, scorer.batch_size) * 4)

    def check_key(request: Request) -> None:
        if api_key is not None and not bearer_ok(request.headers.get("authorization"), api_key):
            raise GuardError(401, "invalid or missing API key (send `Authorization: Bearer <key>`)",
                             "invalid_api_key")

    async def admitted(request: Request, work: Callable[[threading.Event], Any], exclusive: bool = True) -> Any:
        try:
            return await admission.run(request, work, exclusive)
        except (Unscorable, ScoringError) as e:
            raise GuardError(422, str(e), "unscorable") from None

    @app.exception_handler(GuardError)
    async def _guard(_: Request, exc: GuardError) -> JSONResponse:
        return JSONResponse({"detail": exc.message, "code": exc.code}, status_code=exc.status)

    @app.exception_handler(Exception)
    async def _crash(request: Request, exc: Exception) -> JSONResponse:
        rid, message = internal_error(log, request.url.path, exc)
        return JSONResponse({"detail": message, "code": "internal_error"}, status_code=500,
                            headers={"x-request-id": rid})

    @app.get("/health")
    def health() -> dict[str, Any]:
        spec = scorer.prm.spec
        return {"status": "ok", "head": spec.head, "backbone": spec.backbone, "score_at": spec.score_at}

    @app.post("/score", dependencies=[Depends(check_key)])
    async def score(req: ScoreRequest, request: Request) -> dict[str, Any]:
        items = req.trajectories if req.trajectories is not None else req.examples
        error = too_many_rows(len(items), limits, "trajectories" if req.trajectories is not None else "examples")
        if error is not None:
            raise error

        def prepare() -> tuple[list[StepwiseExample], list[dict[str, Any]]]:
            if req.trajectories is not None:
                examples = [render_trajectory(scorer.tokenizer, t, [None] * len(t.steps), None, scorer.marker)
                            for t in req.trajectories]
            else:
                examples = [StepwiseExample(prompt=e.prompt, completions=e.steps, labels=[None] * len(e.steps))
                            for e in req.examples]
            return examples, tokenize_examples(scorer, examples, limits)

        try:  # rendering and tokenizing, bounded before the request waits for the model (not on the event loop)
            examples, features = await anyio.to_thread.run_sync(prepare)
        except ValueError as e:
            raise GuardError(422, str(e), "unscorable") from None
        return await admitted(request, lambda cancel: {
            "scores": score_in_batches(scorer, examples, features, cancel)})

    @app.post("/score_actions", dependencies=[Depends(check_key)])
    async def score_actions(req: ScoreActionsRequest, request: Request) -> dict[str, Any]:
        error = too_many_rows(len(req.actions), limits, "candidate actions")
        if error is not None:
            raise error
        prefix = req.state.prefix()
        try:
            await anyio.to_thread.run_sync(check_candidate_tokens, scorer, [(prefix, req.actions)], limits)
        except ValueError as e:
            raise GuardError(422, str(e), "unscorable") from None
        return await admitted(request, lambda cancel: {
            "scores": score_actions_in_chunks(scorer, prefix, req.actions, cancel)})

    @app.post("/score_action_groups", dependencies=[Depends(check_key)])
    async def score_action_groups(req: ScoreActionGroupsRequest, request: Request) -> dict[str, Any]:
        error = too_many_rows(sum(len(g.actions) for g in req.groups), limits, "candidate actions")
        if error is not None:
            raise error
        prefixes = [g.state.prefix() for g in req.groups]
        groups = [(p, g.actions) for p, g in zip(prefixes, req.groups, strict=True)]
        try:
            await anyio.to_thread.run_sync(check_candidate_tokens, scorer, groups, limits)
        except ValueError as e:
            raise GuardError(422, str(e), "unscorable") from None
        return await admitted(request, lambda cancel: {  # the batcher runs the model: no exclusive turn
            "scores": batcher.score(prefixes, [g.actions for g in req.groups])}, exclusive=False)

    return app

"""`RemotePRMScorer`: a PRM head served by `proctor prm serve`, with the scorer interface of `PRMScorer`.

Search, evaluation and the trainers score through it as through a local scorer:
`score_action_groups` posts states with their candidate actions to `/score_action_groups` (the server scores
the groups of concurrent requests in one batch), `score_trajectories` posts trajectories and `score_examples`
stepwise-text examples to `/score`. The
server renders states with the prompt the PRM was trained with, so a caller's `cfg` must be None.

Connection errors, timeouts, 408/409/429 and 5xx answers are retried with exponential back-off; then, or at
once for another status, a `ScoringError` names the URL and the server's message. The API key comes from the
environment variable `api_key_env` and is never logged.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

import httpx

from proctor.agents.openai_agent import backoff_delay, is_retryable
from proctor.prm.scoring import ScoringError
from proctor.prompts.render import PromptConfig
from proctor.prompts.turns import Prefix


def state_json(prefix: Prefix) -> dict[str, Any]:
    """A state as `prm serve`'s `State` reads it."""
    return {"task": prefix.task, "observation": prefix.observation, "env": prefix.env, "task_id": prefix.task_id,
            "history": [s.model_dump(mode="json") for s in prefix.history], "info": prefix.info}


class RemotePRMScorer:
    """A `prm serve` endpoint as a scorer (see module docstring)."""

    def __init__(self, base_url: str, api_key_env: str = "PROCTOR_PRM_API_KEY", batch_size: int = 16,
                 timeout: float = 300.0, max_retries: int = 3, backoff: float = 0.5, max_backoff: float = 30.0):
        self.base_url = base_url.rstrip("/")
        key = os.environ.get(api_key_env)
        self._client = httpx.Client(base_url=self.base_url, timeout=timeout,
                                    headers={"Authorization": f"Bearer {key}"} if key else {})
        self.batch_size, self.max_retries, self.backoff, self.max_backoff = batch_size, max_retries, backoff, max_backoff
        health = self._call("GET", "/health")
        if "head" not in health:
            raise ScoringError(f"{self.base_url}/health does not answer as `proctor prm serve` does: {health}")
        self.head, self.backbone = health["head"], health.get("backbone")
        self.score_at = health.get("score_at", "action")

    def describe(self) -> str:
        return f"prm serve {self.base_url} ({self.head} head on {self.backbone})"

    def score_action_groups(self, prefixes: Sequence[Prefix], actions: Sequence[Sequence[str]],
                            cfg: PromptConfig | None = None, states_per_pass: int | None = None) -> list[list[float]]:
        """The score of every candidate action at every state, `states_per_pass` states per request."""
        self._check(cfg)
        if len(prefixes) != len(actions):
            raise ValueError(f"{len(prefixes)} states but {len(actions)} action lists")
        size = states_per_pass or self.batch_size
        out: list[list[float]] = []
        for i in range(0, len(prefixes), size):
            groups = [{"state": state_json(p), "actions": list(a)}
                      for p, a in zip(prefixes[i:i + size], actions[i:i + size], strict=True)]
            out += self._call("POST", "/score_action_groups", {"groups": groups})["scores"]
        return out

    def score_actions(self, prefix: Prefix, actions: Sequence[str], cfg: PromptConfig | None = None,
                      chunk_size: int | None = None) -> list[float]:
        return self.score_action_groups([prefix], [actions], cfg)[0]

    def score_trajectories(self, trajs: Sequence[Any], cfg: PromptConfig | None = None) -> list[list[float]]:
        """Per-step scores of stored trajectories, `batch_size` trajectories per request."""
        self._check(cfg)
        out: list[list[float]] = []
        for i in range(0, len(trajs), self.batch_size):
            body = {"trajectories": [t.model_dump(mode="json") for t in trajs[i:i + self.batch_size]]}
            out += self._call("POST", "/score", body)["scores"]
        return out

    def score_examples(self, examples: Sequence[Any]) -> list[list[float]]:
        """Per-step scores of stepwise-text examples (`StepwiseExample`: prompt and steps; labels are not sent),
        `batch_size` examples per request, as `PRMScorer.score_examples` gives them locally."""
        out: list[list[float]] = []
        for i in range(0, len(examples), self.batch_size):
            body = {"examples": [{"prompt": e.prompt, "steps": list(e.completions)}
                                 for e in examples[i:i + self.batch_size]]}
            out += self._call("POST", "/score", body)["scores"]
        return out

    def close(self) -> None:
        self._client.close()

    def _check(self, cfg: PromptConfig | None) -> None:
        if cfg is not None:
            raise ValueError("a served PRM renders states with the prompt it was trained with; pass cfg=None")

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        return call_with_retries(self._client, method, path, body, self.max_retries, self.backoff, self.max_backoff)


def call_with_retries(client: httpx.Client, method: str, path: str, body: dict[str, Any] | None = None,
                      max_retries: int = 3, backoff: float = 0.5, max_backoff: float = 30.0) -> Any:
    """The JSON answer of `client` to one request, retried as the module docstring says (a `ScoringError` naming
    the URL and the server's message otherwise)."""
    url = f"{client.base_url}".rstrip("/") + path
    for attempt in range(max_retries + 1):
        last = attempt == max_retries
        try:
            resp = client.request(method, path, json=body)
        except httpx.TransportError as e:
            if last:
                raise ScoringError(f"could not reach {url} after {attempt + 1} attempt(s): {e}") from e
        else:
            if resp.status_code == 200:
                return resp.json()
            if last or not is_retryable(resp.status_code):
                raise ScoringError(f"{url} answered HTTP {resp.status_code}: {resp.text[:500]}")
        time.sleep(backoff_delay(attempt, backoff, max_backoff))
    raise AssertionError("unreachable")

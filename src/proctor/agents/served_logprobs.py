"""`ServedLogprobs`: log π(reply | prompt) of given token ids, from a vLLM server's `prompt_logprobs`.

The `choice` agent and the likelihood PRM score a state's admissible actions by the log-likelihood of each
action's reply after the rendered prompt. With a served model the ids are built here, with the model's own
tokenizer and the shared renderer, exactly as the local model scores them, and the server is asked for the
log-probabilities of those ids: one `/v1/completions` request per chunk of rows, each row's prompt given as
token ids (prompt + reply), `max_tokens: 1`, and vLLM's `prompt_logprobs: 0` (the log-probability of every
prompt token under the model; the first token has none). The reply's entries are the row's last ones. vLLM's
prefix caching runs a state's shared prompt once for all its actions.

vLLM 0.32's CPU build crashes on batched `prompt_logprobs` requests when the server has LoRA enabled (an einsum
shape error in its LoRA logits processor): against such a server use `rows_per_request=1, concurrency=1`.

Request failures are retried as the `openai` agent's are (`with_retries`), then raise `AgentError`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import openai

from proctor.agents.base import AgentError
from proctor.agents.openai_agent import with_retries


def served_model_name(base_url: str, api_key: str | None = None, timeout: float = 30.0) -> str:
    """The base model a server serves: the only entry of `/v1/models` that is not a LoRA adapter."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        resp = httpx.get(f"{base_url.rstrip('/')}/models", headers=headers, timeout=timeout)
        resp.raise_for_status()
    except httpx.HTTPError as e:
        raise AgentError(f"could not list the models of {base_url}: {type(e).__name__}: {e}") from e
    bases = [m["id"] for m in resp.json().get("data", []) if not m.get("parent")]
    if len(bases) != 1:
        raise AgentError(f"{base_url} serves {len(bases)} base models ({', '.join(bases)}); name one (model=)")
    return bases[0]


def reply_entries(prompt_logprobs: Sequence[dict[str, Any] | None], ids: Sequence[int], n_reply: int) -> list[float]:
    """The log-probabilities of the last `n_reply` tokens of `ids` from vLLM's `prompt_logprobs` for `ids`
    (one dict per position, keyed by token id as a string, the first position None)."""
    if len(prompt_logprobs) != len(ids):
        raise AgentError(f"the server returned {len(prompt_logprobs)} prompt logprobs for {len(ids)} tokens")
    out = []
    for pos in range(len(ids) - n_reply, len(ids)):
        entry = (prompt_logprobs[pos] or {}).get(str(ids[pos]))
        if entry is None:
            raise AgentError(f"the server returned no logprob for token {ids[pos]} at position {pos}")
        out.append(float(entry["logprob"] if isinstance(entry, dict) else entry))
    return out


class ServedLogprobs:
    """Reply log-probabilities from an OpenAI-compatible server with vLLM's `prompt_logprobs` (module doc)."""

    def __init__(self, base_url: str, model: str | None = None, *, api_key_env: str = "OPENAI_API_KEY",
                 timeout: float = 300.0, max_retries: int = 3, rows_per_request: int = 8, concurrency: int = 2,
                 backoff: float = 0.5, max_backoff: float = 30.0):
        if rows_per_request < 1 or concurrency < 1:
            raise ValueError(f"need rows_per_request >= 1 and concurrency >= 1 (got {rows_per_request}, {concurrency})")
        self.base_url = base_url.rstrip("/")
        key = os.environ.get(api_key_env) or None
        self.model = model or served_model_name(self.base_url, key)
        self.url = f"{self.base_url}/completions"
        self.rows_per_request, self.concurrency = rows_per_request, concurrency
        self.max_retries, self.backoff, self.max_backoff = max_retries, backoff, max_backoff
        self._client = openai.OpenAI(base_url=self.base_url, api_key=key or "EMPTY", timeout=timeout, max_retries=0)

    def describe(self) -> str:
        return f"{self.model}@{self.base_url}"

    def reply_logprobs(self, prompts: Sequence[Sequence[int]],
                       replies: Sequence[tuple[int, Sequence[int]]]) -> list[list[float]]:
        """log π of every reply token given its prompt; `replies` are (index into `prompts`, reply ids)."""
        rows = [list(prompts[i]) + list(reply) for i, reply in replies]
        lengths = [len(reply) for _, reply in replies]
        if any(n == 0 for n in lengths) or any(len(prompts[i]) == 0 for i, _ in replies):
            raise ValueError("an empty prompt or reply")
        chunks = [range(s, min(s + self.rows_per_request, len(rows))) for s in range(0, len(rows), self.rows_per_request)]
        with ThreadPoolExecutor(max_workers=min(self.concurrency, max(1, len(chunks)))) as pool:
            answers = list(pool.map(lambda c: self._request([rows[k] for k in c]), chunks))
        out: list[list[float]] = []
        for chunk, answer in zip(chunks, answers, strict=True):
            for k, entries in zip(chunk, answer, strict=True):
                out.append(reply_entries(entries, rows[k], lengths[k]))
        return out

    def _request(self, rows: list[list[int]]) -> list[list[dict[str, Any] | None]]:
        resp = with_retries(lambda: self._client.completions.create(
            model=self.model, prompt=rows, max_tokens=1, temperature=0.0,
            extra_body={"prompt_logprobs": 0}), self.url, self.max_retries, self.backoff, self.max_backoff)
        choices = sorted(resp.choices, key=lambda c: c.index)
        if len(choices) != len(rows):
            raise AgentError(f"{self.url} returned {len(choices)} choices for {len(rows)} prompts")
        out = []
        for c in choices:
            entries = getattr(c, "prompt_logprobs", None)
            if entries is None:
                raise AgentError(f"{self.url} returned no prompt_logprobs (model {self.model!r}): the server must be "
                                 "vLLM (or another that supports prompt_logprobs)")
            out.append(entries)
        return out

    def close(self) -> None:
        self._client.close()

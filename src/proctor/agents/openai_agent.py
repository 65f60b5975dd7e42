"""`OpenAIAgent`: a policy served by any OpenAI-compatible server (`proctor serve`, vLLM, SGLang, OpenAI).

For a batch of prefixes it sends one request per prefix, `concurrency` at a time (threads sharing one
`openai.OpenAI` client), and asks for the `n` candidates of a prefix with the request's `n`.
- endpoint "chat": sends the messages of the shared renderer (`render_messages`); the server applies the
  model's chat template.
- endpoint "completions": renders the prompt text client-side with `render_prompt` and the model's
  tokenizer (`tokenizer=` a path or a loaded tokenizer) and sends it with `add_special_tokens: false`
  (vLLM's extra parameter; the template already holds the special tokens).
Outputs are parsed with `parse_output`; the sampled tokens' logprobs go to `Candidate.logprobs`,
`finish_reason` to `Candidate.meta` (and `finished` is True only for "stop").

Token ids for RL (`return_token_ids`, vLLM's extra parameter, on by default; set it false for servers that
refuse unknown parameters, e.g. OpenAI's): `Candidate.token_ids` are the ids the server generated, its
end-of-turn token included when generation stopped on it (as the local agents store them; a stop string's
tokens are not included, as vLLM drops them), and `meta["prompt_tokens"]` the prompt's length. The trainers
rebuild the prompt's ids with the shared renderer and the model's tokenizer: on the completions endpoint that
is the text sent; on the chat endpoint the server applies its own chat template to the same messages, which
gives the same ids when the server's template is the tokenizer's (`tests/vllm/` checks it on SmolLM2).
Greedy decoding (`temperature=0`) asks for one completion and repeats it `n` times (vLLM refuses n > 1 there).

Retries: connection errors, timeouts and HTTP 408/409/429/5xx are retried `max_retries` times with
exponential back-off (`backoff_delay`, or the server's Retry-After when it sends one); then, or at once
for any other HTTP error, an `AgentError` names the URL, the status and the number of attempts. The API
key comes from the environment variable `api_key_env` ("EMPTY" when unset, as local servers expect) and
is never logged.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal, TypeVar

import openai

from proctor.agents.base import Agent, AgentError, Candidate, Prefix
from proctor.prompts.formats import stop_strings
from proctor.prompts.render import PromptConfig, parse_output, render_messages, render_prompt
from proctor.seeding import stable_seed

RETRY_STATUS = frozenset({408, 409, 429})
T = TypeVar("T")


def is_retryable(status: int) -> bool:
    """HTTP statuses worth another try: 408, 409, 429 and every 5xx (as the openai client itself does)."""
    return status in RETRY_STATUS or status >= 500


def backoff_delay(attempt: int, base: float, cap: float) -> float:
    """Seconds to wait after failed attempt `attempt` (0-based): min(cap, base * 2**attempt)."""
    return min(cap, base * 2.0**attempt)


def request_seed(base: int, prefix: Prefix) -> int:
    """The seed sent for `prefix`: `stable_seed` of the agent's base seed and the prefix's env, task id,
    episode seed, sample index and step index, mod 2**31 (servers that keep seeds in 32 bits accept it),
    so samples and steps get different seeds and a re-run gets the same ones."""
    return stable_seed(base, prefix.env, prefix.task_id, prefix.seed, prefix.sample, prefix.step_index) % 2**31


def _retry_after(error: openai.APIStatusError) -> float | None:
    value = error.response.headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def with_retries(call: Callable[[], T], url: str, max_retries: int, backoff: float, max_backoff: float) -> T:
    """`call()`, retried `max_retries` times on connection errors, timeouts and retryable statuses, with
    exponential back-off (or the server's Retry-After); then an `AgentError` naming `url`, the status and the
    number of attempts (at once for any other HTTP error)."""
    attempts, attempt = max_retries + 1, 0
    while True:
        attempt += 1
        try:
            return call()
        except openai.APIStatusError as e:
            if not is_retryable(e.status_code) or attempt == attempts:
                raise AgentError(
                    f"{url} answered HTTP {e.status_code} (attempt {attempt} of {attempts}): {e.message[:500]}"
                ) from e
            retry_after = _retry_after(e)
        except openai.APIConnectionError as e:
            if attempt == attempts:
                raise AgentError(
                    f"could not reach {url} after {attempts} attempt(s): {type(e).__name__}: {e} "
                    f"({e.__cause__ or 'no detail'})"
                ) from e
            retry_after = None
        except openai.APIError as e:
            raise AgentError(f"bad response from {url}: {type(e).__name__}: {e}") from e
        wait = backoff_delay(attempt - 1, backoff, max_backoff)
        time.sleep(wait if retry_after is None else min(max_backoff, retry_after))


class OpenAIAgent(Agent):
    """A policy behind an OpenAI-compatible HTTP server (see module docstring)."""

    served = True

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key_env: str = "OPENAI_API_KEY",
        endpoint: Literal["chat", "completions"] = "chat",
        prompt: PromptConfig | None = None,
        temperature: float = 1.0,
        top_p: float = 1.0,
        max_tokens: int = 256,
        stop: Sequence[str] | None = None,
        concurrency: int = 8,
        timeout: float = 60.0,
        max_retries: int = 5,
        seed: int | None = None,
        logprobs: bool = True,
        tokenizer: Any = None,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        return_token_ids: bool = True,
    ):
        if endpoint not in ("chat", "completions"):
            raise ValueError(f"endpoint must be 'chat' or 'completions', got {endpoint!r}")
        if concurrency < 1 or max_retries < 0:
            raise ValueError(f"need concurrency >= 1 and max_retries >= 0 (got {concurrency}, {max_retries})")
        if endpoint == "completions" and tokenizer is None:
            raise ValueError(
                "endpoint='completions' renders the chat template client-side: pass tokenizer= (the model's "
                "tokenizer folder or hub name, or a loaded tokenizer)"
            )
        if isinstance(tokenizer, (str, os.PathLike)):
            from proctor.models import load_tokenizer

            tokenizer = load_tokenizer(tokenizer)
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.endpoint = endpoint
        self.prompt = prompt or PromptConfig()
        self.tokenizer = tokenizer
        self.temperature, self.top_p, self.max_tokens = temperature, top_p, max_tokens
        self.stop = stop_strings(self.prompt.format, stop) or None
        self.concurrency, self.max_retries, self.seed, self.logprobs = concurrency, max_retries, seed, logprobs
        self.backoff, self.max_backoff = backoff, max_backoff
        self.return_token_ids = return_token_ids
        self.url = f"{self.base_url}/{'chat/completions' if endpoint == 'chat' else 'completions'}"
        self.name = f"openai:{model}"
        self._client = openai.OpenAI(
            base_url=self.base_url,
            api_key=os.environ.get(api_key_env) or "EMPTY",
            timeout=timeout,
            max_retries=0,
        )
        self._pool = ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="openai-agent")

    def describe(self) -> str:
        return f"openai:{self.model}@{self.base_url} ({self.endpoint}, T={self.temperature}, top_p={self.top_p})"

    def act(self, prefixes: Sequence[Prefix], n: int = 1) -> list[list[Candidate]]:
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        return list(self._pool.map(lambda p: self._candidates(p, n), prefixes))

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        self._client.close()

    def _common(self, prefix: Prefix, n: int) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "n": n,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_tokens": self.max_tokens,
        }
        if self.stop:
            kwargs["stop"] = self.stop
        if self.seed is not None:
            kwargs["seed"] = request_seed(self.seed, prefix)
        return kwargs

    def _candidates(self, prefix: Prefix, n: int) -> list[Candidate]:
        asked = 1 if self.temperature == 0 else n
        kwargs = self._common(prefix, asked)
        extra: dict[str, Any] = {"return_token_ids": True} if self.return_token_ids else {}
        if self.endpoint == "chat":
            messages = render_messages(prefix, self.prompt)
            if self.logprobs:
                kwargs["logprobs"] = True
            resp = self._with_retries(lambda: self._client.chat.completions.create(
                messages=messages, extra_body=extra or None, **kwargs))
            prompt_ids = getattr(resp, "prompt_token_ids", None)
            outputs = [
                (c.index, c.message.content or "", c.finish_reason,
                 [t.logprob for t in c.logprobs.content] if c.logprobs and c.logprobs.content is not None else None,
                 getattr(c, "token_ids", None), prompt_ids)
                for c in resp.choices
            ]
        else:
            text = render_prompt(self.tokenizer, prefix, self.prompt)
            if self.logprobs:
                kwargs["logprobs"] = 1
            resp = self._with_retries(lambda: self._client.completions.create(
                prompt=text, extra_body={"add_special_tokens": False, **extra}, **kwargs
            ))
            outputs = [
                (c.index, c.text, c.finish_reason, list(c.logprobs.token_logprobs) if c.logprobs else None,
                 getattr(c, "token_ids", None), getattr(c, "prompt_token_ids", None))
                for c in resp.choices
            ]
        if len(outputs) != asked:
            raise AgentError(f"{self.url} returned {len(outputs)} choices for n={asked} (model {self.model!r})")
        if self.return_token_ids and any(o[4] is None for o in outputs):
            raise AgentError(f"{self.url} returned no token_ids (model {self.model!r}): the server does not "
                             "support return_token_ids (vLLM >= 0.10.2 does); set return_token_ids=false")
        cands = [self._candidate(*o[1:]) for o in sorted(outputs, key=lambda o: o[0])]
        return cands if asked == n else [cands[0]] + [dataclasses.replace(cands[0], meta=dict(cands[0].meta))
                                                      for _ in range(n - 1)]

    def _candidate(self, text: str, finish_reason: str | None, logprobs: list[float] | None,
                   token_ids: list[int] | None, prompt_ids: list[int] | None) -> Candidate:
        cand = parse_output(text, self.prompt)
        cand.raw_output = text
        cand.logprobs = logprobs
        cand.token_ids = list(token_ids) if token_ids is not None else None
        cand.finished = finish_reason == "stop"
        cand.meta["finish_reason"] = finish_reason
        if prompt_ids is not None:
            cand.meta["prompt_tokens"] = len(prompt_ids)
        return cand

    def _with_retries(self, call: Callable[[], T]) -> T:
        return with_retries(call, self.url, self.max_retries, self.backoff, self.max_backoff)

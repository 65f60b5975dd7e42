"""Model-side generation for `proctor serve`: n samples for a list of prompts in one batched `generate` call.

OpenAI semantics on top of `transformers.generate`:
- `temperature == 0` is greedy decoding; otherwise sampling with `temperature` and nucleus `top_p` and no
  top-k cut-off (the model's own generation defaults such as top_k=50 are overridden).
- `stop` strings end a sample (through `transformers`' `StopStringCriteria`) and are cut from the text,
  together with everything after them; the EOS token ends a sample and is not part of the text.
- `finish_reason` is "stop" (EOS or stop string) or "length" (`max_tokens` reached).
- logprobs are the model's raw log-probabilities (log-softmax of the unprocessed logits, i.e. at
  temperature 1, before top-p) of every token generated for a sample: the text's tokens, then the
  tokens of the stop string that ended it, or the EOS token (whose text piece is ""). They sum to the
  log-probability of the whole continuation, and there are `completion_tokens` of them.
- a `seed` seeds torch's generator right before the call; calls are serialised by a lock, so the same
  request with the same seed gives the same samples.
- `prepare` tokenizes and checks a request without the model (the server bounds it before it waits for the
  model); `run` generates, and stops at the next token once its `cancel` event is set (a client gone).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from proctor.agents.generation_utils import eos_token_ids, find_stop, first_eos, sampled_logprobs

FINISH_STOP = "stop"
FINISH_LENGTH = "length"


class GenerationRequestError(ValueError):
    """The request cannot be served as asked (prompt too long, bad parameter); the server answers 400."""


class GenerationCancelled(RuntimeError):
    """`run` stopped early because its cancel event was set."""


@dataclass
class Prepared:
    """A tokenized request: `rows` = prompts x n sequences of `width` prompt + `max_new` new tokens."""

    enc: Any
    prompt_tokens: list[int]
    n: int
    max_new: int
    add_special_tokens: bool

    @property
    def width(self) -> int:
        return int(self.enc["input_ids"].shape[1])

    @property
    def rows(self) -> int:
        return len(self.prompt_tokens) * self.n

    @property
    def positions(self) -> int:
        """Token positions the batch holds: rows x (longest prompt + max_new)."""
        return self.rows * (self.width + self.max_new)


def cancel_criteria(cancel: threading.Event) -> Any:
    """A `transformers` stopping criterion that ends every row once `cancel` is set."""
    from transformers import StoppingCriteria

    class _Cancel(StoppingCriteria):
        def __call__(self, input_ids: torch.Tensor, scores: Any, **kwargs: Any) -> torch.Tensor:
            return torch.full((input_ids.shape[0],), cancel.is_set(), dtype=torch.bool, device=input_ids.device)

    return _Cancel()


@dataclass(frozen=True)
class SamplingParams:
    """What to generate for every prompt (OpenAI request fields)."""

    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int | None = None  # None: the rest of the context window
    stop: tuple[str, ...] = ()
    seed: int | None = None
    logprobs: bool = False
    top_logprobs: int = 0


@dataclass
class TokenLogprob:
    """One sampled token: its text piece, its log-probability and the `top` most likely alternatives."""

    token: str
    logprob: float
    top: list[tuple[str, float]] = field(default_factory=list)


@dataclass
class Completion:
    text: str
    finish_reason: str
    completion_tokens: int
    logprobs: list[TokenLogprob] | None = None
    token_ids: list[int] | None = None


@dataclass
class GenerationResult:
    """`completions[i]` holds the n samples for prompt i; `prompt_tokens[i]` its length in tokens and
    `prompt_ids[i]` its token ids."""

    completions: list[list[Completion]]
    prompt_tokens: list[int]
    prompt_ids: list[list[int]]


def token_pieces(tokenizer: Any, ids: Sequence[int]) -> list[str]:
    """The text each token adds to the decoded output (special tokens add ""); the pieces join to the text.

    Uses the `tokenizers` incremental decoder, so multi-byte characters split over several tokens are
    attributed to the token that completes them.
    """
    from tokenizers.decoders import DecodeStream

    stream = DecodeStream(skip_special_tokens=True)
    backend = tokenizer.backend_tokenizer
    return [stream.step(backend, int(i)) or "" for i in ids]


def finish_sample(pieces: list[str], hit_eos: bool, stops: Sequence[str]) -> tuple[str, str, int]:
    """Cut one sample at its first stop string: (text, finish_reason, generated).

    `pieces` are the text pieces of the sampled tokens, the EOS token's ("") last when `hit_eos`.
    `generated` counts the tokens the model produced for this sample: up to the one that completed the
    stop string, else all of them (the EOS token included).
    """
    text = "".join(pieces)
    hit = find_stop(text, stops)
    if hit is not None:
        start, end = hit
        offset = 0
        for i, piece in enumerate(pieces):
            offset += len(piece)
            if offset >= end:
                return text[:start], FINISH_STOP, i + 1
    return text, FINISH_STOP if hit_eos else FINISH_LENGTH, len(pieces)


class Generator:
    """Batched OpenAI-style sampling from a causal LM and its (left-padded) tokenizer; thread-safe."""

    def __init__(self, model: Any, tokenizer: Any):
        if not hasattr(tokenizer, "backend_tokenizer"):
            raise ValueError(f"tokenizer {tokenizer.name_or_path!r} is not a fast (`tokenizers`) tokenizer")
        self.model = model
        self.tokenizer = tokenizer
        self.tokenizer.padding_side = "left"
        self._lock = threading.Lock()
        self.eos_ids = eos_token_ids(model, tokenizer)
        if not self.eos_ids:
            raise ValueError("the model has no EOS token id (generation_config.eos_token_id, tokenizer.eos_token)")
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos_ids[0]

    @classmethod
    def load(cls, name_or_path: str, *, dtype: Any = None, device: Any = "auto") -> Generator:
        from proctor.models import load

        model, tokenizer = load(name_or_path, dtype=dtype, device=device)
        return cls(model, tokenizer)

    @property
    def context_length(self) -> int:
        return int(getattr(self.model.config, "max_position_embeddings", None) or self.tokenizer.model_max_length)

    def chat_prompt(self, messages: list[dict[str, Any]]) -> str:
        """The prompt text for chat `messages` (the tokenizer's chat template, with the generation prompt)."""
        if not self.tokenizer.chat_template:
            raise GenerationRequestError(
                f"the model's tokenizer {self.tokenizer.name_or_path!r} has no chat template; "
                f"use /v1/completions with a rendered prompt"
            )
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    def prepare(
        self, prompts: Sequence[str], params: SamplingParams, *, add_special_tokens: bool = True
    ) -> Prepared:
        """Tokenize `prompts` and check them against the context window (no model call, no lock)."""
        if not prompts:
            raise GenerationRequestError("no prompt given")
        enc = self.tokenizer(
            list(prompts), return_tensors="pt", padding=True, add_special_tokens=add_special_tokens
        )
        prompt_tokens = [int(m.sum()) for m in enc["attention_mask"]]
        if min(prompt_tokens) == 0:
            raise GenerationRequestError(f"prompt {prompt_tokens.index(0)} is empty (no tokens)")
        room = self.context_length - enc["input_ids"].shape[1]
        max_new = params.max_tokens if params.max_tokens is not None else room
        if max_new > room or room < 1:
            raise GenerationRequestError(
                f"the prompt has {max(prompt_tokens)} tokens and max_tokens is {max_new}, but the model's "
                f"context length is {self.context_length}; shorten the prompt or lower max_tokens"
            )
        return Prepared(enc, prompt_tokens, params.n, max_new, add_special_tokens)

    def generate(
        self, prompts: Sequence[str], params: SamplingParams, *, add_special_tokens: bool = True,
        cancel: threading.Event | None = None,
    ) -> GenerationResult:
        """`params.n` samples for each prompt, all in one `generate` call (see module docstring)."""
        return self.run(self.prepare(prompts, params, add_special_tokens=add_special_tokens), params, cancel)

    def run(self, prep: Prepared, params: SamplingParams, cancel: threading.Event | None = None) -> GenerationResult:
        """Generate for a prepared request; `GenerationCancelled` when `cancel` was set before or during it."""
        width = prep.width
        device = self.model.device
        input_ids = prep.enc["input_ids"].repeat_interleave(params.n, dim=0).to(device)
        attention = prep.enc["attention_mask"].repeat_interleave(params.n, dim=0).to(device)
        sampling: dict[str, Any] = (
            {"do_sample": True, "temperature": params.temperature, "top_p": params.top_p, "top_k": 0}
            if params.temperature > 0
            else {"do_sample": False}
        )
        extra: dict[str, Any] = {}
        if cancel is not None:
            from transformers import StoppingCriteriaList

            extra["stopping_criteria"] = StoppingCriteriaList([cancel_criteria(cancel)])
        with self._lock, torch.inference_mode():
            if cancel is not None and cancel.is_set():
                raise GenerationCancelled("cancelled before it started")
            if params.seed is not None:
                torch.manual_seed(params.seed)
            out = self.model.generate(
                input_ids=input_ids,
                attention_mask=attention,
                max_new_tokens=prep.max_new,
                eos_token_id=self.eos_ids,
                pad_token_id=self.pad_id,
                stop_strings=list(params.stop) or None,
                tokenizer=self.tokenizer if params.stop else None,
                repetition_penalty=1.0,
                return_dict_in_generate=True,
                output_logits=params.logprobs,
                **sampling,
                **extra,
            )
        if cancel is not None and cancel.is_set():
            raise GenerationCancelled("cancelled while generating")
        new_tokens = out.sequences[:, width:].tolist()
        chosen, top = (
            sampled_logprobs(out.logits, out.sequences[:, width:], params.top_logprobs) if params.logprobs else ([], [])
        )
        samples = [self._sample(b, new_tokens[b], chosen, top, params) for b in range(len(new_tokens))]
        n_prompts = len(prep.prompt_tokens)
        grouped = [samples[i * params.n : (i + 1) * params.n] for i in range(n_prompts)]
        ids = prep.enc["input_ids"].tolist()
        prompt_ids = [row[width - n:] for row, n in zip(ids, prep.prompt_tokens, strict=True)]  # left-padded
        return GenerationResult(completions=grouped, prompt_tokens=prep.prompt_tokens, prompt_ids=prompt_ids)

    def _sample(
        self,
        b: int,
        tokens: list[int],
        chosen: list[list[float]],
        top: list[list[list[tuple[int, float]]]],
        params: SamplingParams,
    ) -> Completion:
        eos_at = first_eos(tokens, self.eos_ids)
        ids = tokens if eos_at is None else tokens[: eos_at + 1]
        pieces = token_pieces(self.tokenizer, ids)
        text, reason, generated = finish_sample(pieces, eos_at is not None, params.stop)
        logprobs = None
        if params.logprobs:
            logprobs = [
                TokenLogprob(
                    token=pieces[i],
                    logprob=chosen[b][i],
                    top=[(self.tokenizer.decode([tok]), lp) for tok, lp in top[b][i]],
                )
                for i in range(generated)
            ]
        return Completion(text=text, finish_reason=reason, completion_tokens=generated, logprobs=logprobs,
                          token_ids=ids[:generated])

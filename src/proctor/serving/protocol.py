"""OpenAI request bodies for `/v1/chat/completions` and `/v1/completions` (validated with pydantic).

Fields the server does not implement are rejected with a clear 400 when set to anything but their neutral
value; unknown extra fields are ignored (as vLLM does). `add_special_tokens` is vLLM's extra parameter:
whether the tokenizer adds its special tokens (BOS) to the prompt; clients that render a chat template
themselves send `false`. `return_token_ids`, also vLLM's: each choice carries the generated `token_ids` (the
end-of-turn token included) and the response the prompt's `prompt_token_ids` (per choice on /v1/completions).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from proctor.serving.generation import SamplingParams

MAX_N = 128
MAX_TOP_LOGPROBS = 20


class _Request(BaseModel):
    model_config = ConfigDict(extra="ignore")

    model: str
    n: int = Field(1, ge=1, le=MAX_N)
    temperature: float = Field(1.0, ge=0.0, le=2.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    max_tokens: int | None = Field(None, ge=1)
    stop: str | list[str] | None = None
    seed: int | None = Field(None, ge=-(2**63), le=2**63 - 1, description="a 64-bit signed integer")
    stream: bool = False
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    logit_bias: dict[str, float] | None = None
    return_token_ids: bool = False

    @field_validator("stop")
    @classmethod
    def _stops_not_empty(cls, v: str | list[str] | None) -> str | list[str] | None:
        if v is not None and any(s == "" for s in ([v] if isinstance(v, str) else v)):
            raise ValueError("stop strings must not be empty")
        return v

    @model_validator(mode="after")
    def _unsupported(self) -> _Request:
        for name, neutral in self._neutral_values().items():
            if getattr(self, name) not in neutral:
                raise ValueError(f"`{name}` is not supported by proctor serve (leave it unset)")
        return self

    def _neutral_values(self) -> dict[str, tuple[Any, ...]]:
        return {
            "stream": (False,),
            "presence_penalty": (0.0,),
            "frequency_penalty": (0.0,),
            "logit_bias": (None, {}),
        }

    def stops(self) -> tuple[str, ...]:
        if self.stop is None:
            return ()
        return (self.stop,) if isinstance(self.stop, str) else tuple(self.stop)


class ContentPart(BaseModel):
    type: Literal["text"]
    text: str


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[ContentPart] | None = None

    def text(self) -> str:
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content)


class ChatCompletionRequest(_Request):
    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    logprobs: bool = False
    top_logprobs: int | None = Field(None, ge=0, le=MAX_TOP_LOGPROBS)
    add_special_tokens: bool = False
    tools: list[Any] | None = None
    response_format: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _top_needs_logprobs(self) -> ChatCompletionRequest:
        if self.top_logprobs and not self.logprobs:
            raise ValueError("`top_logprobs` requires `logprobs: true`")
        return self

    def _neutral_values(self) -> dict[str, tuple[Any, ...]]:
        return super()._neutral_values() | {"tools": (None, []), "response_format": (None, {"type": "text"})}

    def chat_messages(self) -> list[dict[str, str]]:
        return [{"role": m.role, "content": m.text()} for m in self.messages]

    def sampling(self) -> SamplingParams:
        return SamplingParams(
            n=self.n,
            temperature=self.temperature,
            top_p=self.top_p,
            max_tokens=self.max_completion_tokens or self.max_tokens,
            stop=self.stops(),
            seed=self.seed,
            logprobs=self.logprobs,
            top_logprobs=self.top_logprobs or 0,
        )


class CompletionRequest(_Request):
    prompt: str | list[str]
    max_tokens: int | None = Field(16, ge=1)
    logprobs: int | None = Field(None, ge=0, le=MAX_TOP_LOGPROBS)
    echo: bool = False
    suffix: str | None = None
    best_of: int | None = None
    add_special_tokens: bool = True

    @field_validator("prompt")
    @classmethod
    def _prompts_not_empty(cls, v: str | list[str]) -> str | list[str]:
        if isinstance(v, list) and not v:
            raise ValueError("the prompt list is empty")
        return v

    def _neutral_values(self) -> dict[str, tuple[Any, ...]]:
        return super()._neutral_values() | {"echo": (False,), "suffix": (None,), "best_of": (None, self.n)}

    def prompts(self) -> list[str]:
        return [self.prompt] if isinstance(self.prompt, str) else list(self.prompt)

    def sampling(self) -> SamplingParams:
        return SamplingParams(
            n=self.n,
            temperature=self.temperature,
            top_p=self.top_p,
            max_tokens=self.max_tokens,
            stop=self.stops(),
            seed=self.seed,
            logprobs=self.logprobs is not None,
            top_logprobs=self.logprobs or 0,
        )

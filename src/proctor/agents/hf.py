"""`HFAgent`: a local Hugging Face causal LM as a policy, generating for every prefix of a step in one
left-padded batch (`model.generate`, KV cache), `n` samples per prefix.

- Prompts come from the one renderer (`proctor.agents.prompting.render_prompt`), tokenized with
  `add_special_tokens=False`; outputs are parsed with the configured format's parser.
- Sampling is reproducible: each generate call runs under a torch seed derived from the agent's `seed` and
  the rows' (task_id, sample, step, env seed), so the same prefixes give the same samples in any run.
  `temperature=0` is greedy decoding.
- `Candidate.logprobs` are the log-probabilities, under the model (temperature 1, no top-p/top-k), of every
  generated token, the end-of-turn token included, and `meta["token_ids"]` those tokens (exact, for RL:
  no re-tokenization); `meta["prompt_tokens"]` is the prompt length. `finished` is False when
  `max_new_tokens` ran out before an end-of-turn token or a stop string. Stop strings are cut from the text.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from proctor.agents.base import Agent, AgentError, Candidate, Prefix
from proctor.agents.prompting import PromptConfig, parse_output, render_prompt
from proctor.agents.seeding import stable_seed


def generation_end(tokens: Sequence[int], eos_ids: set[int], pad_id: int | None,
                   max_new_tokens: int) -> tuple[int, bool]:
    """`(n_tokens, finished)` for one row of `generate`'s new tokens.

    The row ends after its first end-of-turn token (finished). Otherwise trailing pad tokens (put after a
    row that stopped on a stop string) are not part of it, and it is finished iff it is shorter than
    `max_new_tokens` (generation stopped before the budget ran out)."""
    for i, tok in enumerate(tokens):
        if tok in eos_ids:
            return i + 1, True
    end = len(tokens)
    if pad_id is not None and pad_id not in eos_ids:
        while end > 0 and tokens[end - 1] == pad_id:
            end -= 1
    return end, end < max_new_tokens


def cut_at_stop(text: str, stop: Sequence[str]) -> tuple[str, bool]:
    """`text` up to (without) the earliest stop string, and whether one was found."""
    hits = [i for i in (text.find(s) for s in stop) if i >= 0]
    return (text[: min(hits)], True) if hits else (text, False)


def _eos_ids(model: Any, tokenizer: Any) -> set[int]:
    """End-of-turn ids: the generation config's and tokenizer's EOS, and <|im_end|> when it is one token."""
    ids: set[int] = set()
    gen_eos = model.generation_config.eos_token_id
    ids.update(gen_eos if isinstance(gen_eos, (list, tuple)) else [gen_eos] if gen_eos is not None else [])
    if tokenizer.eos_token_id is not None:
        ids.add(tokenizer.eos_token_id)
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    if isinstance(im_end, int) and im_end != tokenizer.unk_token_id:
        ids.add(im_end)
    return ids


class HFAgent(Agent):
    """A Hugging Face causal LM policy (see module docstring)."""

    def __init__(
        self,
        model_or_path: Any,
        tokenizer: Any = None,
        prompt: PromptConfig | dict | None = None,
        temperature: float = 1.0,
        top_p: float = 1.0,
        top_k: int = 0,
        max_new_tokens: int = 48,
        stop: Sequence[str] | None = None,
        seed: int | None = None,
        batch_size: int | None = None,
        device: Any = None,
        dtype: Any = None,
        logprobs: bool = True,
    ):
        from proctor.models.loading import load, prepare_tokenizer, resolve_device

        if temperature < 0 or not 0 < top_p <= 1 or max_new_tokens < 1 or (batch_size is not None
                                                                           and batch_size < 1):
            raise ValueError(f"bad sampling settings: temperature={temperature} (>= 0), top_p={top_p} (0, 1], "
                             f"max_new_tokens={max_new_tokens} (>= 1), batch_size={batch_size} (>= 1)")
        if isinstance(model_or_path, (str, os.PathLike)):
            self.model_name = str(model_or_path)
            self.model, self.tokenizer = load(model_or_path, dtype=dtype, device=device)
        else:
            if tokenizer is None:
                raise ValueError("HFAgent got a model object but no tokenizer")
            self.model, self.tokenizer = model_or_path, prepare_tokenizer(tokenizer)
            self.model_name = str(getattr(self.model.config, "_name_or_path", "") or type(self.model).__name__)
            target = resolve_device(device)
            if target is not None:
                self.model.to(target)
            self.model.eval()
        self.prompt = prompt if isinstance(prompt, PromptConfig) else PromptConfig.model_validate(prompt or {})
        self.temperature, self.top_p, self.top_k = float(temperature), float(top_p), int(top_k)
        self.max_new_tokens = max_new_tokens
        self.stop = list(stop or [])
        self.seed = seed
        self.batch_size = batch_size
        self.logprobs = logprobs
        self.eos_ids = _eos_ids(self.model, self.tokenizer)
        self.name = f"hf:{os.path.basename(self.model_name.rstrip('/')) or self.model_name}"

    def describe(self) -> str:
        sampling = "greedy" if self.temperature == 0 else f"T={self.temperature:g},top_p={self.top_p:g}"
        if self.top_k and self.temperature:
            sampling += f",top_k={self.top_k}"
        history = "full" if self.prompt.history is None else self.prompt.history
        return (f"{self.name} ({self.model_name}; format={self.prompt.format}, history={history}, {sampling}, "
                f"max_new_tokens={self.max_new_tokens}, seed={self.seed})")

    def generation_config(self):
        from transformers import GenerationConfig

        sample = self.temperature > 0
        return GenerationConfig(
            max_new_tokens=self.max_new_tokens,
            do_sample=sample,
            temperature=self.temperature if sample else None,
            top_p=self.top_p if sample else None,
            top_k=self.top_k if sample else None,
            eos_token_id=sorted(self.eos_ids),
            pad_token_id=self.tokenizer.pad_token_id,
            stop_strings=self.stop or None,
            return_dict_in_generate=True,
            output_logits=self.logprobs,
        )

    def act(self, prefixes: Sequence[Prefix], n: int = 1) -> list[list[Candidate]]:
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        prompts = [render_prompt(self.tokenizer, p, self.prompt) for p in prefixes]
        rows = [(i, j) for i in range(len(prefixes)) for j in range(n)]
        size = self.batch_size or max(len(rows), 1)
        out: list[list[Candidate]] = [[] for _ in prefixes]
        for start in range(0, len(rows), size):
            chunk = rows[start:start + size]
            keys = [(prefixes[i].env, prefixes[i].task_id, prefixes[i].sample, prefixes[i].step_index,
                     prefixes[i].seed, j) for i, j in chunk]
            for (i, _), cand in zip(chunk, self._generate([prompts[i] for i, _ in chunk], keys), strict=True):
                out[i].append(cand)
        return out

    def _generate(self, prompts: list[str], keys: list[tuple]) -> list[Candidate]:
        import torch

        device = self.model.device
        enc = self.tokenizer(prompts, return_tensors="pt", padding=True, padding_side="left",
                             add_special_tokens=False).to(device)
        prompt_len = enc["input_ids"].shape[1]
        devices = [device.index or 0] if device.type == "cuda" else []
        batch_seed = stable_seed(self.seed, keys) if self.seed is not None else int(torch.randint(0, 2**62, (1,)))
        try:
            with torch.random.fork_rng(devices=devices), torch.inference_mode():
                torch.manual_seed(batch_seed)
                out = self.model.generate(**enc, generation_config=self.generation_config(),
                                          tokenizer=self.tokenizer)
        except torch.OutOfMemoryError as e:
            raise AgentError(f"{self.name}: out of memory generating for {len(prompts)} rows of up to "
                             f"{prompt_len} prompt tokens; set batch_size lower") from e
        new = out.sequences[:, prompt_len:]
        logprobs = None
        if self.logprobs:
            # one generated position at a time, so the peak memory is rows x vocab, not rows x tokens x vocab
            logprobs = torch.stack([
                torch.log_softmax(step_logits.float(), dim=-1).gather(-1, new[:, i:i + 1]).squeeze(-1)
                for i, step_logits in enumerate(out.logits)
            ], dim=1).cpu()
        new = new.cpu().tolist()
        cands = []
        for r, tokens in enumerate(new):
            end, finished = generation_end(tokens, self.eos_ids, self.tokenizer.pad_token_id,
                                           self.max_new_tokens)
            text = self.tokenizer.decode(tokens[:end], skip_special_tokens=True)
            text, stopped = cut_at_stop(text, self.stop)
            cand = parse_output(text, self.prompt)
            cand.finished = finished or stopped
            cand.logprobs = logprobs[r, :end].tolist() if logprobs is not None else None
            cand.meta.update(token_ids=tokens[:end], prompt_tokens=int(enc["attention_mask"][r].sum()))
            cands.append(cand)
        return cands

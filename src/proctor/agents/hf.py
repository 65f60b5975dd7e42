"""`HFAgent`: a local Hugging Face causal LM as a policy, generating for every prefix of a step in one
left-padded batch (`model.generate`, KV cache), `n` samples per prefix.

- Prompts come from the one renderer (`proctor.prompts.render.render_prompt`), tokenized with
  `add_special_tokens=False`; outputs are parsed with the configured format's parser.
- Sampling is reproducible: each generate call runs under a torch seed derived from the agent's `seed` and
  the rows' (task_id, sample, step, env seed), so the same prefixes give the same samples in any run.
  `temperature=0` is greedy decoding.
- `Candidate.logprobs` are the log-probabilities, under the model (temperature 1, no top-p/top-k), of every
  generated token, the end-of-turn token included, and `token_ids` those tokens (exact, for RL:
  no re-tokenization); `meta["prompt_tokens"]` is the prompt length. `finished` is False when
  `max_new_tokens` ran out before an end-of-turn token or a stop string. Stop strings are cut from the text.
- Prefix caching (`prefix_cache=N`, the N most recent episodes; 0: off): each episode's KV cache is kept
  between calls and the next step's prompt runs only its tokens after the longest common token prefix
  (`proctor.agents.prefix_cache`); `meta["reused_prompt_tokens"]` says how many were reused. `reset` (a new
  episode) drops the episode's entry. Models whose cache is not plain full attention turn it off (logged).
- `device` / `dtype` place a model loaded from a path (`proctor.models.loading.load`: auto = CUDA when there is
  one, bf16 there, else CPU float32); a model object given stays where it is unless `device` names one.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any

from proctor.agents.base import Agent, AgentError, Candidate, Prefix
from proctor.agents.generation_utils import cut_at_stop, eos_token_ids, generation_end, sampled_logprobs
from proctor.agents.prefix_cache import PrefixCache, reusable_cache
from proctor.models.kv_cache import cache_kwargs, output_cache
from proctor.prompts.formats import stop_strings
from proctor.prompts.render import PromptConfig, parse_output, render_prompt
from proctor.seeding import stable_seed

log = logging.getLogger(__name__)


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
        device: Any = "auto",
        dtype: Any = "auto",
        logprobs: bool = True,
        prefix_cache: int = 64,
    ):
        from proctor.models.loading import load, move_model, prepare_tokenizer

        if (temperature < 0 or not 0 < top_p <= 1 or max_new_tokens < 1 or prefix_cache < 0
                or (batch_size is not None and batch_size < 1)):
            raise ValueError(f"bad sampling settings: temperature={temperature} (>= 0), top_p={top_p} (0, 1], "
                             f"max_new_tokens={max_new_tokens} (>= 1), batch_size={batch_size} (>= 1), "
                             f"prefix_cache={prefix_cache} (>= 0)")
        if isinstance(model_or_path, (str, os.PathLike)):
            self.model_name = str(model_or_path)
            self.model, self.tokenizer = load(model_or_path, dtype=dtype, device=device)
        else:
            if tokenizer is None:
                raise ValueError("HFAgent got a model object but no tokenizer")
            self.model, self.tokenizer = model_or_path, prepare_tokenizer(tokenizer)
            self.model_name = str(getattr(self.model.config, "_name_or_path", "") or type(self.model).__name__)
            move_model(self.model, device)
            self.model.eval()
        self.prompt = prompt if isinstance(prompt, PromptConfig) else PromptConfig.model_validate(prompt or {})
        self.temperature, self.top_p, self.top_k = float(temperature), float(top_p), int(top_k)
        self.max_new_tokens = max_new_tokens
        self.stop = stop_strings(self.prompt.format, stop)
        self.seed = seed
        self.batch_size = batch_size
        self.logprobs = logprobs
        self.eos_ids = set(eos_token_ids(self.model, self.tokenizer))
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else min(self.eos_ids)
        self.prefix_cache = PrefixCache(prefix_cache) if prefix_cache else None
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
            pad_token_id=self.pad_id,
            stop_strings=self.stop or None,
            return_dict_in_generate=True,
            output_logits=self.logprobs,
        )

    def reset(self, prefix: Prefix) -> None:
        """A new episode starts: forget any cached state under its key (a rerun of the same episode)."""
        if self.prefix_cache is not None:
            self.prefix_cache.drop(_episode_key(prefix))

    def act(self, prefixes: Sequence[Prefix], n: int = 1) -> list[list[Candidate]]:
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        prompts = [render_prompt(self.tokenizer, p, self.prompt) for p in prefixes]
        token_ids = self.tokenizer(prompts, add_special_tokens=False)["input_ids"]
        rows = [(i, j) for i in range(len(prefixes)) for j in range(n)]
        size = self.batch_size or max(len(rows), 1)
        out: list[list[Candidate]] = [[] for _ in prefixes]
        for start in range(0, len(rows), size):
            chunk = rows[start:start + size]
            keys = [(prefixes[i].env, prefixes[i].task_id, prefixes[i].sample, prefixes[i].step_index,
                     prefixes[i].seed, j) for i, j in chunk]
            episodes = [_episode_key(prefixes[i]) for i, _ in chunk]
            cands = self._generate([token_ids[i] for i, _ in chunk], keys, episodes)
            for (i, _), cand in zip(chunk, cands, strict=True):
                out[i].append(cand)
        return out

    def _generate(self, rows: list[list[int]], keys: list[tuple], episodes: list[tuple]) -> list[Candidate]:
        """Candidates for the prompts `rows` (token ids) in one left-padded `generate` call. `keys` (task,
        sample, step, seed, sample index) seed the call; `episodes` are the rows' prefix-cache keys."""
        import torch

        if min(len(ids) for ids in rows) == 0:
            raise AgentError(f"{self.name}: a prompt rendered to no tokens")
        device = self.model.device
        width = max(len(ids) for ids in rows)
        input_ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        attention = torch.zeros((len(rows), width), dtype=torch.long)
        for b, ids in enumerate(rows):
            input_ids[b, width - len(ids):] = torch.tensor(ids, dtype=torch.long)
            attention[b, width - len(ids):] = 1
        past, reused = self.prefix_cache.past(episodes, rows) if self.prefix_cache is not None else (None, 0)
        devices = [device.index or 0] if device.type == "cuda" else []
        batch_seed = stable_seed(self.seed, keys) if self.seed is not None else int(torch.randint(0, 2**62, (1,)))
        try:
            with torch.random.fork_rng(devices=devices), torch.inference_mode():
                torch.manual_seed(batch_seed)
                out = self.model.generate(input_ids=input_ids.to(device), attention_mask=attention.to(device),
                                          generation_config=self.generation_config(), **cache_kwargs(past),
                                          tokenizer=self.tokenizer)
        except torch.OutOfMemoryError as e:
            raise AgentError(f"{self.name}: out of memory generating for {len(rows)} rows of up to "
                             f"{width} prompt tokens; set batch_size lower") from e
        new = out.sequences[:, width:]
        logprobs = sampled_logprobs(out.logits, new)[0] if self.logprobs else None
        self._keep_prefixes(out, rows, episodes)
        cands = []
        for r, tokens in enumerate(new.cpu().tolist()):
            end, finished = generation_end(tokens, self.eos_ids, self.pad_id, self.max_new_tokens)
            text = self.tokenizer.decode(tokens[:end], skip_special_tokens=True)
            text, stopped = cut_at_stop(text, self.stop)
            cand = parse_output(text, self.prompt)
            cand.finished = finished or stopped
            cand.logprobs = logprobs[r][:end] if logprobs is not None else None
            cand.token_ids = tokens[:end]
            cand.meta.update(prompt_tokens=len(rows[r]), reused_prompt_tokens=max(
                0, reused - (width - len(rows[r]))))
            cands.append(cand)
        return cands

    def _keep_prefixes(self, out: Any, rows: list[list[int]], episodes: list[tuple]) -> None:
        """Put each episode's processed tokens (prompt, then generated) and their KV states in the prefix cache;
        of several samples of one prefix, the first one's."""
        if self.prefix_cache is None:
            return
        if not reusable_cache(output_cache(out)):
            log.warning("%s: the model's KV cache (%s) cannot be reused across calls; prefix caching is off",
                        self.name, type(output_cache(out)).__name__)
            self.prefix_cache = None
            return
        width = max(len(ids) for ids in rows)
        sequences = out.sequences.cpu().tolist()
        kept = set()
        for b, (ids, episode) in enumerate(zip(rows, episodes, strict=True)):
            if episode not in kept:
                kept.add(episode)
                pad = width - len(ids)
                self.prefix_cache.store(episode, sequences[b][pad:], output_cache(out), b, pad)


def _episode_key(prefix: Prefix) -> tuple:
    return prefix.env, prefix.task_id, prefix.sample, prefix.seed

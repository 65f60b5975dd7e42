"""`ChoiceAgent`: a causal LM that chooses among the env's admissible actions by their likelihood.

For a prefix with admissible actions a_1..a_m, each action is scored as the assistant reply to the rendered
prompt x: ℓ_i = log π(y_i | x) = Σ_j log π(y_{i,j} | x, y_{i,<j}), where y_i is the reply the one renderer
writes for a_i (the formatted action and the end-of-turn token: what the model would generate). Candidates
are drawn from p_i ∝ exp(ℓ_i / T) (T = `temperature`; T = 1 is the model's own distribution restricted to
the admissible set; T = 0 takes the argmax, the first on ties), n per prefix, with replacement, reproducibly
(a seed from the agent's `seed` and the prefix's task, sample, step and env seed), by the Gumbel-max trick
with each action's noise keyed by its text (`gumbel_draws`): two policies at the same step share the noise of
every action both can take, so raising an action's likelihood never takes a draw away from it. Comparing two
policies on the same episode seeds (common random numbers) then leaves fewer episodes that differ by chance
alone than inverse-CDF sampling in the env's list order, where any change of an earlier action's probability
shifts every later interval.

Each `Candidate` keeps what RL needs: `token_ids` (the reply's ids, end-of-turn included, never re-tokenized),
`logprobs` (their per-token log π), `meta["prompt_tokens"]`, `meta["choice_logprob"]` (ℓ_i) and
`meta["choice_prob"]` (p_i at the agent's temperature; at T = 0 the T = 1 probability). Prefixes without an
admissible list fall back to free generation (`HFAgent` on the same model).

Served (`server=`, a `ServedLogprobs`): the model runs in a vLLM server; the ids are built here with the model
folder's tokenizer, as for the local model, and the server returns their log-probabilities (`prompt_logprobs`);
free generation goes to the same server (`OpenAIAgent`, completions endpoint).

Cost: one forward pass per call. Each prompt runs once, with all its replies after it in the same row and a 4D
attention mask that lets each reply see the prompt and itself only (`proctor.models.shared_prefix`; 1.57× the
speed of the prompt pass + reply pass it replaced at 50 household states, `bench/choice_scoring.py`). The first call, and models whose
attention takes no custom mask (flash attention), run the prompts and then the replies on their copied KV cache;
models whose KV cache is not plain full attention run prompt + reply rows.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from proctor.agents.base import Agent, Candidate, Prefix
from proctor.agents.generation_utils import config_eos_token_ids
from proctor.agents.prefix_cache import reusable_cache
from proctor.models.kv_cache import cache_kwargs, output_cache
from proctor.models.shared_prefix import shared_prefix_logprobs, takes_tree_mask
from proctor.prompts.render import PromptConfig, format_action, render_messages, render_prompt
from proctor.seeding import stable_seed

if TYPE_CHECKING:
    from proctor.agents.served_logprobs import ServedLogprobs

_SENTINEL = "\u0000REPLY\u0000"


def choice_probabilities(logliks: Sequence[float], temperature: float) -> list[float]:
    """p_i = exp(ℓ_i/T) / Σ_k exp(ℓ_k/T), computed stably (max subtracted); T = 0: one-hot on the first argmax."""
    if not logliks:
        raise ValueError("no actions to choose from")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if temperature == 0:
        best = max(range(len(logliks)), key=lambda i: (logliks[i], -i))
        return [1.0 if i == best else 0.0 for i in range(len(logliks))]
    top = max(logliks)
    w = [math.exp((x - top) / temperature) for x in logliks]
    total = sum(w)
    return [x / total for x in w]


def gumbel_draws(logliks: Sequence[float], actions: Sequence[str], temperature: float, seed: int,
                 n: int) -> list[int]:
    """n independent draws (indices) from p_i ∝ exp(ℓ_i / T), T > 0, by the Gumbel-max trick: draw k is
    argmax_i ℓ_i / T + g_{k,i}, with g = −log(−log u) and u ~ U(0, 1) a hash of (`seed`, k, the action's
    text). An action's noise depends on nothing else: not on the list's order nor on the other actions listed,
    so two policies at the same step of the same episode seed share the noise of every action both can take,
    even in different states. Monotone in the likelihoods: raising ℓ_i keeps every draw that i won (Gumbel
    1954; the coupling of e.g. Oberst & Sontag 2019, arXiv 1905.05824)."""
    if temperature <= 0:
        raise ValueError(f"gumbel_draws needs a temperature > 0, got {temperature}")
    if len(logliks) != len(actions) or not actions:
        raise ValueError(f"{len(logliks)} likelihoods for {len(actions)} actions")
    picks = []
    for k in range(n):
        scores = [ll / temperature - math.log(-math.log((stable_seed(seed, k, a) + 0.5) / 2**63))
                  for ll, a in zip(logliks, actions, strict=True)]
        picks.append(max(range(len(actions)), key=scores.__getitem__))
    return picks


class ChoiceAgent(Agent):
    """Constrained choice among admissible actions by model likelihood (see module docstring)."""

    def __init__(
        self,
        model_or_path: Any,
        tokenizer: Any = None,
        prompt: PromptConfig | dict | None = None,
        temperature: float = 1.0,
        seed: int | None = 0,
        batch_size: int | None = None,
        device: Any = "auto",
        dtype: Any = "auto",
        max_new_tokens: int = 48,
        server: ServedLogprobs | None = None,
    ):
        """`batch_size`: most (prefix, action) rows per forward pass (None: all of a call's rows at once).
        `server`: score on that server instead (`model_or_path` then gives the tokenizer only).
        `max_new_tokens` applies to the free-generation fallback. `device` / `dtype` place a model loaded from
        a path (`proctor.models.loading.load`: auto = CUDA when there is one, bf16 there, else CPU float32); a
        model object given stays where it is unless `device` names one."""
        from proctor.models.loading import load, load_tokenizer, move_model, prepare_tokenizer

        if temperature < 0 or (batch_size is not None and batch_size < 1):
            raise ValueError(f"bad settings: temperature={temperature} (>= 0), batch_size={batch_size} (>= 1)")
        self.server = server
        if server is not None:
            if not isinstance(model_or_path, (str, os.PathLike)):
                raise ValueError("a served ChoiceAgent takes the model's folder or hub name (for its tokenizer)")
            from transformers import GenerationConfig

            self.model_name, self.model = str(model_or_path), None
            self.tokenizer = prepare_tokenizer(load_tokenizer(model_or_path))
            try:
                generation_config = GenerationConfig.from_pretrained(model_or_path)
            except OSError:
                generation_config = None
        elif isinstance(model_or_path, (str, os.PathLike)):
            self.model_name = str(model_or_path)
            self.model, self.tokenizer = load(model_or_path, dtype=dtype, device=device)
        else:
            if tokenizer is None:
                raise ValueError("ChoiceAgent got a model object but no tokenizer")
            self.model, self.tokenizer = model_or_path, prepare_tokenizer(tokenizer)
            self.model_name = str(getattr(self.model.config, "_name_or_path", "") or type(self.model).__name__)
            move_model(self.model, device)
            self.model.eval()
        if self.model is not None:
            generation_config = self.model.generation_config
        self.prompt = prompt if isinstance(prompt, PromptConfig) else PromptConfig.model_validate(prompt or {})
        self.temperature = float(temperature)
        self.seed = seed
        self.batch_size = batch_size
        self.max_new_tokens = max_new_tokens
        self.eos_ids = set(config_eos_token_ids(generation_config, self.tokenizer))
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else min(self.eos_ids)
        self._fallback: Agent | None = None
        self._reuse_kv: bool | None = None  # whether the model's cache can be shared by replies (known after a call)
        self.name = f"choice:{os.path.basename(self.model_name.rstrip('/')) or self.model_name}"
        if server is not None:
            self.name += f"@{server.base_url}"

    def describe(self) -> str:
        history = "full" if self.prompt.history is None else self.prompt.history
        sampling = "greedy" if self.temperature == 0 else f"T={self.temperature:g}"
        served = f"; served as {self.server.describe()}" if self.server is not None else ""
        return (f"{self.name} ({self.model_name}{served}; admissible actions ranked by log-likelihood, {sampling}, "
                f"format={self.prompt.format}, history={history}, seed={self.seed})")

    # -- acting ---------------------------------------------------------------------------------------
    def act(self, prefixes: Sequence[Prefix], n: int = 1) -> list[list[Candidate]]:
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        out: list[list[Candidate]] = [[] for _ in prefixes]
        ranked = [i for i, p in enumerate(prefixes) if p.admissible_actions]
        free = [i for i, p in enumerate(prefixes) if not p.admissible_actions]
        if ranked:
            scored = self.score([prefixes[i] for i in ranked])
            for i, options in zip(ranked, scored, strict=True):
                out[i] = self._draw(prefixes[i], options, n)
        if free:
            for i, cands in zip(free, self._generator().act([prefixes[i] for i in free], n), strict=True):
                out[i] = cands
        return out

    def _draw(self, prefix: Prefix, options: list[Candidate], n: int) -> list[Candidate]:
        logliks = [c.meta["choice_logprob"] for c in options]
        probs = choice_probabilities(logliks, self.temperature or 1.0)
        for c, p in zip(options, probs, strict=True):
            c.meta["choice_prob"] = p
        if self.temperature == 0:
            picks = [choice_probabilities(logliks, 0).index(1.0)] * n
        else:
            seed = stable_seed(self.seed, prefix.env, prefix.task_id, prefix.sample, prefix.step_index, prefix.seed)
            picks = gumbel_draws(logliks, [c.action for c in options], self.temperature, seed, n)
        return [_copy(options[k]) for k in picks]

    def _generator(self) -> Agent:
        if self._fallback is None and self.server is not None:
            from proctor.agents.openai_agent import OpenAIAgent

            self._fallback = OpenAIAgent(self.server.base_url, self.server.model, endpoint="completions",
                                         tokenizer=self.tokenizer, prompt=self.prompt, temperature=self.temperature,
                                         max_tokens=self.max_new_tokens, seed=self.seed)
        if self._fallback is None:
            from proctor.agents.hf import HFAgent

            self._fallback = HFAgent(self.model, self.tokenizer, prompt=self.prompt,
                                     temperature=self.temperature, max_new_tokens=self.max_new_tokens,
                                     seed=self.seed, batch_size=self.batch_size)
        return self._fallback

    # -- scoring --------------------------------------------------------------------------------------
    def reply_ids(self, prefix: Prefix, actions: Sequence[str]) -> list[list[int]]:
        """The token ids of the assistant reply for each action: the chat template's text after the prompt,
        up to and including its first end-of-turn token."""
        if not actions:
            return []
        messages = render_messages(prefix, self.prompt)
        full = self.tokenizer.apply_chat_template(messages + [{"role": "assistant", "content": _SENTINEL}],
                                                  add_generation_prompt=False, tokenize=False)
        prompt = render_prompt(self.tokenizer, prefix, self.prompt)
        if not full.startswith(prompt) or _SENTINEL not in full[len(prompt):]:
            raise ValueError(f"the chat template of {self.model_name!r} does not write a reply after the prompt")
        before, _, after = full[len(prompt):].partition(_SENTINEL)
        texts = [before + format_action(a, None, self.prompt) + after for a in actions]
        out = []
        for ids in self.tokenizer(texts, add_special_tokens=False)["input_ids"]:
            end = next((j + 1 for j, tok in enumerate(ids) if tok in self.eos_ids), len(ids))
            out.append(ids[:end])
        return out

    def prompt_ids(self, prefixes: Sequence[Prefix]) -> list[list[int]]:
        """The token ids of each prefix's rendered prompt, as the replies are scored after them."""
        prompts = [render_prompt(self.tokenizer, p, self.prompt) for p in prefixes]
        return self.tokenizer(prompts, add_special_tokens=False)["input_ids"]

    def score(self, prefixes: Sequence[Prefix]) -> list[list[Candidate]]:
        """Every admissible action of every prefix as a `Candidate` with its reply's `token_ids`, per-token
        `logprobs` and `meta["choice_logprob"]` (their sum), in the admissible list's order."""
        prompt_ids = self.prompt_ids(prefixes)
        actions = [list(p.admissible_actions or []) for p in prefixes]
        rows = [(i, a, ids) for i, p in enumerate(prefixes)
                for a, ids in zip(actions[i], self.reply_ids(p, actions[i]), strict=True)]
        pairs = [(i, ids) for i, _, ids in rows]
        if not rows:
            logprobs: list[list[float]] = []
        elif self.server is not None:
            logprobs = self.server.reply_logprobs(prompt_ids, pairs)
        else:
            logprobs = self._local_logprobs(prompt_ids, pairs)
        out: list[list[Candidate]] = [[] for _ in prefixes]
        for (i, action, ids), lp in zip(rows, logprobs, strict=True):
            out[i].append(Candidate(
                action=action, raw_output=format_action(action, None, self.prompt), token_ids=list(ids),
                logprobs=lp, meta={"prompt_tokens": len(prompt_ids[i]), "choice_logprob": float(sum(lp))}))
        return out

    def _local_logprobs(self, prompt_ids: list[list[int]], pairs: list[tuple[int, list[int]]]) -> list[list[float]]:
        """`_reply_logprobs` over chunks of `batch_size` rows, each chunk with the prompts it uses."""
        out: list[list[float]] = []
        size = self.batch_size or len(pairs)
        with torch.inference_mode():
            for start in range(0, len(pairs), size):
                chunk = pairs[start:start + size]
                used = sorted({i for i, _ in chunk})
                out += self._reply_logprobs([prompt_ids[i] for i in used], [(used.index(i), ids) for i, ids in chunk])
        return out

    def _reply_logprobs(self, prompts: list[list[int]], replies: list[tuple[int, list[int]]]) -> list[list[float]]:
        """log π of every reply token given its prompt; `replies` are (index into `prompts`, reply ids)."""
        if min(len(p) for p in prompts) == 0 or min(len(r) for _, r in replies) == 0:
            raise ValueError(f"{self.name}: an empty prompt or reply")
        if self._reuse_kv is False:
            return self._full_rows(prompts, replies)
        if self._reuse_kv and takes_tree_mask(self.model):
            return shared_prefix_logprobs(self.model, prompts, replies, self.pad_id)
        device = self.model.device
        width = max(len(p) for p in prompts)
        p_ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        p_mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for b, ids in enumerate(prompts):
            p_ids[b, width - len(ids):] = torch.tensor(ids)
            p_mask[b, width - len(ids):] = 1
        p_pos = (p_mask.cumsum(1) - 1).clamp(min=0)
        out = self.model(input_ids=p_ids.to(device), attention_mask=p_mask.to(device), position_ids=p_pos.to(device),
                         use_cache=True, logits_to_keep=1)
        first = torch.log_softmax(out.logits[:, -1].float(), dim=-1)  # [P, V]: the reply's first token
        self._reuse_kv = reusable_cache(output_cache(out))
        if not self._reuse_kv:
            return self._full_rows(prompts, replies)
        index = torch.tensor([i for i, _ in replies], device=device)
        cache = output_cache(out)
        cache.reorder_cache(index)
        k = max(len(r) for _, r in replies)
        r_ids = torch.full((len(replies), k), self.pad_id, dtype=torch.long)
        r_mask = torch.zeros((len(replies), k), dtype=torch.long)
        for b, (_, ids) in enumerate(replies):
            r_ids[b, :len(ids)] = torch.tensor(ids)
            r_mask[b, :len(ids)] = 1
        lengths = torch.tensor([len(prompts[i]) for i, _ in replies])
        r_pos = lengths[:, None] + torch.arange(k)[None, :]
        attn = torch.cat([p_mask[index.cpu()], r_mask], dim=1)
        logits = self.model(input_ids=r_ids.to(device), attention_mask=attn.to(device), position_ids=r_pos.to(device),
                            use_cache=False, **cache_kwargs(cache)).logits.float()
        logp = torch.log_softmax(logits[:, :-1], dim=-1)  # position j predicts reply token j+1
        rest = logp.gather(-1, r_ids[:, 1:].unsqueeze(-1).to(device)).squeeze(-1).cpu() if k > 1 else None
        heads = first[index].gather(-1, r_ids[:, :1].to(device)).squeeze(-1).cpu()
        out_lp = []
        for b, (_, ids) in enumerate(replies):
            row = [float(heads[b])] + ([] if rest is None else rest[b, :len(ids) - 1].tolist())
            out_lp.append(row)
        return out_lp

    def _full_rows(self, prompts: list[list[int]], replies: list[tuple[int, list[int]]]) -> list[list[float]]:
        """Without a reusable cache: prompt + reply rows, left-padded so replies end at the last column."""
        device = self.model.device
        seqs = [prompts[i] + ids for i, ids in replies]
        width, k = max(len(s) for s in seqs), max(len(ids) for _, ids in replies)
        ids_t = torch.full((len(seqs), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for b, s in enumerate(seqs):
            ids_t[b, width - len(s):] = torch.tensor(s)
            mask[b, width - len(s):] = 1
        pos = (mask.cumsum(1) - 1).clamp(min=0)
        logits = self.model(input_ids=ids_t.to(device), attention_mask=mask.to(device), position_ids=pos.to(device),
                            logits_to_keep=k + 1).logits.float()
        logp = torch.log_softmax(logits[:, :-1], dim=-1).cpu()  # [R, k, V]: column c predicts token width-k+c
        out_lp = []
        for b, (_, ids) in enumerate(replies):
            targets = torch.tensor(ids)
            cols = torch.arange(k - len(ids), k)
            out_lp.append(logp[b, cols, targets].tolist())
        return out_lp


def _copy(c: Candidate) -> Candidate:
    return Candidate(action=c.action, reason=c.reason, raw_output=c.raw_output, logprobs=list(c.logprobs or []),
                     token_ids=list(c.token_ids or []), parsed=c.parsed, finished=c.finished, meta=dict(c.meta))

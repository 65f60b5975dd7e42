"""Scoring with a PRM: one forward pass per trajectory for all its steps, and shared-prefix best-of-N.

`PRMScorer.score_examples` / `score_trajectories` tokenize each trajectory once and read every step's score
at its marker position (batches of trajectories, never one pass per prefix).

`PRMScorer.score_candidates` scores N candidate continuations of one shared prefix (the N actions proposed
at one agent state): the prefix runs once with `use_cache=True`, its KV cache is repeated N times, and only
the N short suffixes run on top of it (right-padded, positions continuing after the prefix). The result
equals scoring each `prefix + suffix` on its own.

`PRMScorer.score_candidate_groups` / `score_action_groups` do the same for the candidates of MANY states at
once (per-step best-of-N over a batch of envs, beam search), in one forward pass per group of states of similar
prefix lengths. With sdpa or eager attention each state is one packed row, `prefix + suffix_1 + ... + suffix_n`,
with a 4D mask under which suffix j sees the prefix and its own earlier tokens only, and position ids that
restart after the prefix for every suffix (tree attention: the prefix is computed once, no KV cache is copied).
With other attention kernels (flash attention takes no custom mask) the prefixes run in one right-padded pass,
each state's cache rows are selected once per candidate, and all suffixes run in one more pass.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import torch

from proctor.models.loading import move_model
from proctor.prm.data import StepwiseExample
from proctor.prm.model import ProcessRewardModel
from proctor.prm.rendering import render_candidates, render_trajectory
from proctor.prm.tokenize import collate
from proctor.prompts.render import PromptConfig
from proctor.prompts.turns import Prefix


def length_chunks(lengths: Sequence[int], per_pass: int, slack: float = 0.25) -> list[list[int]]:
    """Indices grouped for batched prefix passes: longest first, at most `per_pass` per group, and a group
    grows only while its padded size (rows × longest) stays within (1 + slack) × its real tokens."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    chunks: list[list[int]] = []
    for i in order:
        last = chunks[-1] if chunks else None
        if (last is not None and len(last) < per_pass
                and (len(last) + 1) * lengths[last[0]] <= (1 + slack) * (sum(lengths[j] for j in last) + lengths[i])):
            last.append(i)
        else:
            chunks.append([i])
    return chunks


class ScoringError(ValueError):
    """A trajectory whose steps cannot all be scored (e.g. truncated by max_length)."""


class PRMScorer:
    """Batched PRM inference (see module docstring)."""

    def __init__(self, prm: ProcessRewardModel, batch_size: int = 8, device: Any = "auto"):
        """`device`: where to move `prm`; auto leaves it where it was loaded (`move_model`)."""
        self.prm = prm.eval()
        move_model(self.prm, device)
        self.batch_size = batch_size
        self.tokenizer = prm.tokenizer
        pad = self.tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else 0

    @property
    def marker(self) -> str:
        return self.prm.spec.tokenization.marker

    @property
    def score_at(self) -> str:
        """'action' (a PRM / Q) or 'state' (a value model V(s))."""
        return self.prm.spec.score_at

    @torch.no_grad()
    def score_features(self, features: Sequence[dict[str, Any]]) -> list[list[float]]:
        """Per-step scores for tokenized features, one forward pass per batch."""
        out: list[list[float]] = []
        for i in range(0, len(features), self.batch_size):
            batch = collate(features[i : i + self.batch_size], self.pad_id)
            dev = self.prm.device
            logits = self.prm(
                batch["input_ids"].to(dev), attention_mask=batch["attention_mask"].to(dev)
            ).logits
            scores = self.prm.scores(logits).float().cpu()
            out += [row[mask].tolist() for row, mask in zip(scores, batch["step_mask"], strict=True)]
        return out

    def score_examples(self, examples: Sequence[StepwiseExample]) -> list[list[float]]:
        """One score per step of every example (labels are ignored)."""
        features = [self.prm.tokenize(ex, is_eval=True) for ex in examples]
        scores = self.score_features(features)
        for ex, s in zip(examples, scores, strict=True):
            if len(s) != ex.num_steps:
                raise ScoringError(
                    f"example {ex.id!r}: only {len(s)} of {ex.num_steps} steps fit in max_length "
                    f"{self.prm.spec.tokenization.max_length}"
                )
        return scores

    def score_trajectories(self, trajs: Sequence[Any], cfg: PromptConfig | None = None) -> list[list[float]]:
        """Per-step scores of agent trajectories rendered with the shared prompt renderer."""
        examples = [
            render_trajectory(self.tokenizer, t, [None] * len(t.steps), cfg, self.marker) for t in trajs
        ]
        return self.score_examples(examples)

    @torch.no_grad()
    def score_candidates(
        self, prefix_ids: Sequence[int], suffix_ids: Sequence[Sequence[int]], chunk_size: int | None = None
    ) -> list[list[float]]:
        """For each suffix, the scores at the step ends (marker / step_mask positions) inside it, with the
        prefix's KV cache computed once and shared. Suffix step ends are the marker token's positions."""
        if not prefix_ids:
            raise ValueError("score_candidates needs a non-empty shared prefix")
        if any(len(s) == 0 for s in suffix_ids):
            raise ValueError("every candidate suffix needs at least one token")
        marker = self.tokenizer.convert_tokens_to_ids(self.marker)
        dev = self.prm.device
        prefix = torch.tensor([list(prefix_ids)], device=dev)
        cache = self.prm(prefix, use_cache=True).past_key_values
        chunk_size = chunk_size or len(suffix_ids)
        out: list[list[float]] = []
        for i in range(0, len(suffix_ids), chunk_size):
            chunk = suffix_ids[i : i + chunk_size]
            n, width, plen = len(chunk), max(len(s) for s in chunk), prefix.shape[1]
            ids = torch.full((n, width), self.pad_id, dtype=torch.long, device=dev)
            mask = torch.zeros((n, plen + width), dtype=torch.long, device=dev)
            mask[:, :plen] = 1
            for j, s in enumerate(chunk):
                ids[j, : len(s)] = torch.tensor(list(s), device=dev)
                mask[j, plen : plen + len(s)] = 1
            positions = torch.arange(plen, plen + width, device=dev).expand(n, width)
            shared = copy.deepcopy(cache)
            shared.batch_repeat_interleave(n)
            logits = self.prm(
                ids, attention_mask=mask, position_ids=positions, past_key_values=shared, use_cache=True
            ).logits
            scores = self.prm.scores(logits).float().cpu()
            for j, s in enumerate(chunk):
                at = torch.tensor([t == marker for t in s] + [False] * (width - len(s)))
                out.append(scores[j][at].tolist())
        return out

    def encode_candidates(
        self, prefix: Prefix, actions: Sequence[str], cfg: PromptConfig | None = None
    ) -> tuple[list[int], list[list[int]]]:
        """Token ids of a state's shared text (BOS first when the tokenizer has one) and of each action's
        suffix (`formatted action + marker`)."""
        shared, suffixes = render_candidates(self.tokenizer, prefix, actions, cfg, self.marker)
        enc = self.tokenizer
        prefix_ids = enc(shared, add_special_tokens=False)["input_ids"]
        if enc.bos_token_id is not None and prefix_ids[:1] != [enc.bos_token_id]:
            prefix_ids = [enc.bos_token_id] + prefix_ids
        return prefix_ids, [enc(s, add_special_tokens=False)["input_ids"] for s in suffixes]

    def score_actions(
        self,
        prefix: Prefix,
        actions: Sequence[str],
        cfg: PromptConfig | None = None,
        chunk_size: int | None = None,
    ) -> list[float]:
        """PRM score of each candidate action at an agent state (per-step best-of-N, docs/methods.md §8.1)."""
        prefix_ids, suffix_ids = self.encode_candidates(prefix, actions, cfg)
        return [s[-1] for s in self.score_candidates(prefix_ids, suffix_ids, chunk_size)]

    @torch.no_grad()
    def score_candidate_groups(
        self,
        prefix_ids: Sequence[Sequence[int]],
        suffix_ids: Sequence[Sequence[Sequence[int]]],
        states_per_pass: int | None = None,
    ) -> list[list[list[float]]]:
        """`score_candidates` for many states: for state i and its candidate j, the scores at the marker
        positions inside suffix j. `states_per_pass` states (default `batch_size`) share one prefix pass and
        one suffix pass (states of similar prefix lengths together, `length_chunks`); a state may have no
        candidates (its entry is then [])."""
        check_candidate_groups(prefix_ids, suffix_ids)
        out: list[list[list[float]]] = [[] for _ in prefix_ids]
        for chunk in length_chunks([len(p) for p in prefix_ids], states_per_pass or self.batch_size):
            score = self._score_groups_packed if self.packable else self._score_groups
            for i, row in zip(chunk, score([prefix_ids[i] for i in chunk], [suffix_ids[i] for i in chunk]),
                              strict=True):
                out[i] = row
        return out

    @property
    def packable(self) -> bool:
        """Whether the model's attention takes a custom 4D mask (sdpa, eager): packed tree rows then."""
        return getattr(self.prm.hf_model.config, "_attn_implementation", None) in ("sdpa", "eager")

    def _score_groups_packed(
        self, prefix_ids: Sequence[Sequence[int]], suffix_ids: Sequence[Sequence[Sequence[int]]]
    ) -> list[list[list[float]]]:
        """One pass for a few states, one packed row each (see the module docstring)."""
        keep = [i for i, group in enumerate(suffix_ids) if group]
        out: list[list[list[float]]] = [[] for _ in prefix_ids]
        if not keep:
            return out
        rows = []
        for i in keep:
            p = len(prefix_ids[i])
            ids, seg, pos = list(prefix_ids[i]), [0] * p, list(range(p))
            for j, s in enumerate(suffix_ids[i], start=1):
                ids += s
                seg += [j] * len(s)
                pos += range(p, p + len(s))
            rows.append((ids, seg, pos))
        dev = self.prm.device
        width = max(len(r[0]) for r in rows)
        ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long, device=dev)
        seg = torch.full((len(rows), width), -1, dtype=torch.long, device=dev)
        pos = torch.zeros((len(rows), width), dtype=torch.long, device=dev)
        for r, (a, b, c) in enumerate(rows):
            ids[r, : len(a)] = torch.tensor(a, device=dev)
            seg[r, : len(b)] = torch.tensor(b, device=dev)
            pos[r, : len(c)] = torch.tensor(c, device=dev)
        q, k = seg[:, :, None], seg[:, None, :]
        causal = torch.ones((width, width), dtype=torch.bool, device=dev).tril()
        allowed = causal & (q >= 0) & ((k == 0) | (k == q))
        allowed |= torch.eye(width, dtype=torch.bool, device=dev)  # a pad sees itself: no row is all masked
        dtype = next(self.prm.parameters()).dtype
        mask = torch.zeros(allowed.shape, dtype=dtype, device=dev).masked_fill(~allowed, torch.finfo(dtype).min)
        logits = self.prm(ids, attention_mask=mask[:, None], position_ids=pos).logits
        scores = self.prm.scores(logits).float().cpu()
        marker = self.tokenizer.convert_tokens_to_ids(self.marker)
        for r, i in enumerate(keep):
            at = len(prefix_ids[i])
            for s in suffix_ids[i]:
                out[i].append([scores[r, at + t].item() for t, tok in enumerate(s) if tok == marker])
                at += len(s)
        return out

    def _score_groups(
        self, prefix_ids: Sequence[Sequence[int]], suffix_ids: Sequence[Sequence[Sequence[int]]]
    ) -> list[list[list[float]]]:
        """One prefix pass and one suffix pass for a few states, through a shared KV cache (attention kernels
        that take no custom mask)."""
        keep = [i for i, group in enumerate(suffix_ids) if group]
        out: list[list[list[float]]] = [[] for _ in prefix_ids]
        if not keep:
            return out
        dev = self.prm.device
        plens = [len(prefix_ids[i]) for i in keep]
        pmax = max(plens)
        prefix = torch.full((len(keep), pmax), self.pad_id, dtype=torch.long, device=dev)
        pmask = torch.zeros((len(keep), pmax), dtype=torch.long, device=dev)
        for r, i in enumerate(keep):
            prefix[r, : plens[r]] = torch.tensor(list(prefix_ids[i]), device=dev)
            pmask[r, : plens[r]] = 1
        # right padding: under causal attention no real token sees a pad, so the prefix pass needs no mask (the
        # fast causal kernel); the pads' cache entries are masked out of the suffix pass below
        cache = self.prm(prefix, use_cache=True).past_key_values
        rows = [r for r, i in enumerate(keep) for _ in suffix_ids[i]]
        flat = [s for i in keep for s in suffix_ids[i]]
        n, width = len(flat), max(len(s) for s in flat)
        cache.batch_select_indices(torch.tensor(rows, device=dev))
        ids = torch.full((n, width), self.pad_id, dtype=torch.long, device=dev)
        smask = torch.zeros((n, width), dtype=torch.long, device=dev)
        for j, s in enumerate(flat):
            ids[j, : len(s)] = torch.tensor(list(s), device=dev)
            smask[j, : len(s)] = 1
        row_index = torch.tensor(rows, device=dev)
        mask = torch.cat([pmask[row_index], smask], dim=1)
        positions = torch.tensor([plens[r] for r in rows], device=dev)[:, None] + torch.arange(width, device=dev)
        logits = self.prm(ids, attention_mask=mask, position_ids=positions, past_key_values=cache,
                          use_cache=True).logits
        scores = self.prm.scores(logits).float().cpu()
        marker = self.tokenizer.convert_tokens_to_ids(self.marker)
        j = 0
        for i in keep:
            for s in suffix_ids[i]:
                at = torch.tensor([t == marker for t in s] + [False] * (width - len(s)))
                out[i].append(scores[j][at].tolist())
                j += 1
        return out

    def score_action_groups(
        self,
        prefixes: Sequence[Prefix],
        actions: Sequence[Sequence[str]],
        cfg: PromptConfig | None = None,
        states_per_pass: int | None = None,
    ) -> list[list[float]]:
        """PRM score of every candidate action at every state, batched across states with each state's
        prefix computed once (per-step best-of-N over a batch of envs, beam search; docs/methods.md §8)."""
        if len(prefixes) != len(actions):
            raise ValueError(f"{len(prefixes)} states but {len(actions)} action lists")
        encoded = [self.encode_candidates(p, a, cfg) for p, a in zip(prefixes, actions, strict=True)]
        groups = self.score_candidate_groups([e[0] for e in encoded], [e[1] for e in encoded], states_per_pass)
        return [[s[-1] for s in group] for group in groups]


def check_candidate_groups(prefix_ids: Sequence[Sequence[int]], suffix_ids: Sequence[Sequence[Sequence[int]]]) -> None:
    """The input of `score_candidate_groups` (in process or served): one candidate list per non-empty prefix, no
    empty candidate."""
    if len(prefix_ids) != len(suffix_ids):
        raise ValueError(f"{len(prefix_ids)} prefixes but {len(suffix_ids)} candidate lists")
    if any(len(p) == 0 for p in prefix_ids):
        raise ValueError("score_candidate_groups needs a non-empty prefix for every state")
    if any(len(s) == 0 for group in suffix_ids for s in group):
        raise ValueError("every candidate suffix needs at least one token")

"""A PRM head served by vLLM's pooling runner: `pooling_server` starts it, `PooledPRMScorer` scores through it.

vLLM serves a `*ForTokenClassification` folder (a proctor PRM of the `classification` or `scalar` head, or a TRL
PRM) with its pooling runner (`--runner pooling --convert classify`): the backbone with the folder's `score` layer,
bias included. Its `/pooling` endpoint with task `token_classify` returns the head's logits at every token of the
token ids it is sent. A `reward_tokens` head (a causal LM) is served the same way with vLLM's `from_2_way_softmax`
conversion (`--hf-overrides`): one logit per token, z₊ − z₋ from the LM head's rows of the two reward tokens, and
σ(z₊ − z₋) = softmax(z₋, z₊)₁ is the head's score.

`PooledPRMScorer` is `PRMScorer` with the forward pass on the server: the PRM folder gives the spec and the
tokenizer (no weights are loaded), examples, trajectories and candidate actions are rendered and tokenized as in
process, their token ids are sent (`batch_size` sequences per request), and the scores are read at the step
markers from the raw logits with the head's own score function (`proctor.prm.heads.scores_from_logits`). A
candidate action is its state's prefix and its suffix, one sequence. `PRMRef.open` returns it for a PRM head
folder with `prm_server: {base_url: ..., pooling: true}`. On vLLM's CPU build in float32 its scores equal the
in-process ones within 1e-4 (`tests/test_vllm_pooling_prm.py`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import torch

from proctor.models import load_tokenizer
from proctor.prm.data import StepwiseExample
from proctor.prm.heads import scores_from_logits
from proctor.prm.model import PRMSpec, read_spec
from proctor.prm.remote import call_with_retries
from proctor.prm.scoring import PRMScorer, check_candidate_groups
from proctor.serving.vllm_server import VLLMServer, VLLMServerConfig


@dataclass
class ServedHead:
    """What scoring with a served head needs in process: the PRM's spec and tokenizer (`PRMScorer.prm`'s
    `spec` and `tokenize`, without weights)."""

    spec: PRMSpec
    tokenizer: Any

    def tokenize(self, ex: StepwiseExample, is_eval: bool = False) -> dict[str, list]:
        return self.spec.tokenization(ex, self.tokenizer, is_eval=is_eval)


def pooling_args(folder: str | os.PathLike) -> list[str]:
    """The vLLM api_server flags that serve the PRM head saved in `folder` on the pooling runner (module
    docstring)."""
    folder = Path(folder)
    spec = read_spec(folder)
    args = ["--runner", "pooling", "--convert", "classify"]
    if spec.head != "reward_tokens":
        return args
    arch = json.loads((folder / "config.json").read_text())["architectures"][0]
    if not arch.endswith("ForCausalLM"):
        raise ValueError(f"{folder}: a reward_tokens head on {arch}, not a *ForCausalLM model")
    tokenizer = load_tokenizer(folder)
    tokens = [tokenizer.convert_ids_to_tokens(_one_token(tokenizer, t)) for t in spec.reward_tokens]
    overrides = {"architectures": [arch.removesuffix("ForCausalLM") + "ForTokenClassification"],
                 "classifier_from_token": tokens, "method": "from_2_way_softmax"}
    return args + ["--hf-overrides", json.dumps(overrides)]


def _one_token(tokenizer: Any, text: str) -> int:
    ids = tokenizer.encode(text, add_special_tokens=False)
    if len(ids) != 1:
        raise ValueError(f"reward token {text!r} is {len(ids)} tokens in this tokenizer; it must be one")
    return ids[0]


def pooling_server(folder: str | os.PathLike, served_name: str = "prm", config: VLLMServerConfig | None = None,
                   log_file: str | os.PathLike | None = None) -> VLLMServer:
    """A `VLLMServer` (not started) serving the PRM head in `folder` as `served_name` on the pooling runner
    (`config.extra_args` follow the pooling flags)."""
    config = config or VLLMServerConfig()
    config = config.model_copy(update={"extra_args": [*pooling_args(folder), *config.extra_args]})
    return VLLMServer(folder, served_name, config, log_file=log_file)


def head_scores(head: str, sigmoid: bool, logits: torch.Tensor) -> torch.Tensor:
    """Per-token scores from the served logits [n, labels]: softmax(z)₁ for `classification`, σ(z) (or z) for
    `scalar`, σ(z₊ − z₋) for `reward_tokens` (`heads.scores_from_logits`)."""
    if head == "classification":
        return scores_from_logits(head, logits, sigmoid)
    return scores_from_logits("scalar", logits[..., 0], sigmoid or head == "reward_tokens")


class PooledPRMScorer(PRMScorer):
    """A PRM head on vLLM's pooling runner, with `PRMScorer`'s interface (see module docstring)."""

    def __init__(self, folder: str | os.PathLike, base_url: str, model: str | None = None,
                 api_key_env: str | None = "OPENAI_API_KEY", batch_size: int = 16, timeout: float = 300.0,
                 max_retries: int = 3, backoff: float = 0.5, max_backoff: float = 30.0):
        """`base_url`: the vLLM server's (`.../v1` or its root); `model`: the served name (None: its only
        model)."""
        self.prm = ServedHead(read_spec(folder), load_tokenizer(folder))
        self.tokenizer, self.batch_size, self.model = self.prm.tokenizer, batch_size, model
        self.base_url = base_url.rstrip("/").removesuffix("/v1")
        key = os.environ.get(api_key_env) if api_key_env else None
        self._client = httpx.Client(base_url=self.base_url, timeout=timeout,
                                    headers={"Authorization": f"Bearer {key}"} if key else {})
        self._retries = (max_retries, backoff, max_backoff)

    def describe(self) -> str:
        return f"vLLM pooling {self.base_url} ({self.prm.spec.head} head on {self.prm.spec.backbone})"

    def close(self) -> None:
        self._client.close()

    def token_scores(self, sequences: Sequence[Sequence[int]]) -> list[list[float]]:
        """The head's score at every token of each token-id sequence, `batch_size` sequences per request."""
        spec, out = self.prm.spec, []
        for i in range(0, len(sequences), self.batch_size):
            body: dict[str, Any] = {"input": [list(s) for s in sequences[i:i + self.batch_size]],
                                    "task": "token_classify", "use_activation": False}
            if self.model is not None:
                body["model"] = self.model
            answer = call_with_retries(self._client, "POST", "/pooling", body, *self._retries)
            for item in sorted(answer["data"], key=lambda d: d["index"]):
                logits = torch.tensor(item["data"], dtype=torch.float32)
                out.append(head_scores(spec.head, spec.sigmoid, logits.reshape(logits.shape[0], -1)).tolist())
        return out

    def score_features(self, features: Sequence[dict[str, Any]]) -> list[list[float]]:
        """Per-step scores for tokenized features: the token scores at their `step_mask` positions."""
        scores = self.token_scores([f["input_ids"] for f in features])
        return [[s for s, m in zip(row, f["step_mask"], strict=True) if m] for row, f in zip(scores, features,
                                                                                             strict=True)]

    def score_candidates(self, prefix_ids: Sequence[int], suffix_ids: Sequence[Sequence[int]],
                         chunk_size: int | None = None) -> list[list[float]]:
        """For each suffix, the scores at the marker positions inside it, each `prefix + suffix` one sequence."""
        return self.score_candidate_groups([prefix_ids], [suffix_ids])[0]

    def score_candidate_groups(self, prefix_ids: Sequence[Sequence[int]],
                               suffix_ids: Sequence[Sequence[Sequence[int]]],
                               states_per_pass: int | None = None) -> list[list[list[float]]]:
        """`PRMScorer.score_candidate_groups` on the server: every `prefix + suffix` one sequence, the scores read
        at the marker positions inside the suffix."""
        check_candidate_groups(prefix_ids, suffix_ids)
        rows = [(i, list(p) + list(s)) for i, (p, group) in enumerate(zip(prefix_ids, suffix_ids, strict=True))
                for s in group]
        scores = self.token_scores([r for _, r in rows])
        marker = self.tokenizer.convert_tokens_to_ids(self.marker)
        out: list[list[list[float]]] = [[] for _ in prefix_ids]
        for (i, row), score in zip(rows, scores, strict=True):
            start = len(prefix_ids[i])
            out[i].append([score[t] for t in range(start, len(row)) if row[t] == marker])
        return out

"""`ProcessRewardModel`: any HF backbone plus a head, reading one score per step in one forward pass.

A PRM folder is an ordinary HF model folder (config.json, model.safetensors, tokenizer) plus
`prm_config.json` (`PRMSpec`: head, marker, tokenization, reward tokens). A folder without
`prm_config.json` whose model is a token classifier with 2 labels, as TRL's PRMTrainer writes, loads as a
`classification` PRM with TRL's tokenization (separator "\\n").
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field
from torch import nn
from transformers.utils import logging as hf_logging

from proctor.models import add_step_marker, load_tokenizer
from proctor.models.kv_cache import cache_kwargs, output_cache
from proctor.models.loading import resolve_dtype
from proctor.prm.data import StepwiseExample
from proctor.prm.heads import (
    HeadKind,
    auto_class,
    check_head,
    head_module,
    num_labels,
    scores_from_logits,
    token_logits,
)
from proctor.prm.tokenize import TokenizeConfig
from proctor.training.precision import inference_dtype, resolve_device

log = logging.getLogger(__name__)

PRM_CONFIG = "prm_config.json"
CHECKPOINT_STATE = "prm_state.safetensors"


class PRMSpec(BaseModel):
    """What makes a backbone a PRM; saved as `prm_config.json`."""

    model_config = ConfigDict(extra="forbid")

    head: HeadKind = "scalar"
    backbone: str = Field(description="the name or path the backbone was loaded from")
    sigmoid: bool = Field(default=True, description="scalar head: score = σ(logit) (False: the raw value)")
    reward_tokens: tuple[str, str] = Field(
        default=("-", "+"), description="reward_tokens head: (wrong, correct)"
    )
    tokenization: TokenizeConfig = Field(default_factory=TokenizeConfig)
    score_at: Literal["action", "state"] = Field(
        default="action", description="where it was trained to score: after each action (PRM, Q) or at the "
        "end of each state (a value model V(s)); `data.score_at` of the training config")
    trained_on: Literal["trajectories", "text"] = Field(
        default="trajectories", description="its training text: agent states rendered by the prompt renderer "
        "(trajectory stores, targets, pairs) or plain stepwise text, a problem and its steps (stepwise, "
        "math_shepherd, prm800k, processbench files); search reads env states the same way (`proctor.prm.text_scorer`)")


@dataclass
class PRMOutput:
    logits: torch.Tensor
    past_key_values: Any = None


def _device(device: Any) -> str:
    """Where a PRM is placed: None → the CPU (where it loads), `auto` → CUDA when present, else as given."""
    return "cpu" if device is None else resolve_device(str(device))


def auto_dtype(device: Any = None) -> torch.dtype:
    """The dtype `auto` means for a PRM on `device` (None: the CPU it loads on): bfloat16 on a CUDA device
    with bf16, float32 elsewhere (`proctor.training.precision.inference_dtype`); never bf16 on a CPU."""
    return resolve_dtype(inference_dtype("auto", _device(device)))


def _dtype(dtype: Any, device: Any = None) -> torch.dtype | None:
    return auto_dtype(device) if dtype == "auto" else resolve_dtype(dtype)


class CheckpointingWrapper:
    """Activation checkpointing of a module that wraps an HF model as `self.model` (what `Trainer` calls for
    `activation_checkpointing` / `gradient_checkpointing`), delegated to that model."""

    def activation_checkpointing_enable(self, activation_checkpointing_kwargs: dict | None = None,
                                        **kwargs: Any) -> None:
        self.model.activation_checkpointing_enable(activation_checkpointing_kwargs=activation_checkpointing_kwargs,
                                                   **kwargs)

    def gradient_checkpointing_enable(self, gradient_checkpointing_kwargs: dict | None = None, **kwargs: Any) -> None:
        self.activation_checkpointing_enable(gradient_checkpointing_kwargs, **kwargs)


class ProcessRewardModel(CheckpointingWrapper, nn.Module):
    """Backbone + head (see module docstring). `forward` returns per-token head logits."""

    def __init__(self, model: nn.Module, tokenizer: Any, spec: PRMSpec):
        super().__init__()
        check_head(spec.head)
        self.model = model
        self.tokenizer = tokenizer
        self.spec = spec
        self.reward_token_ids = self._reward_token_ids() if spec.head == "reward_tokens" else None

    # -- construction -------------------------------------------------------------------------------
    @classmethod
    def build(
        cls,
        backbone: str | os.PathLike,
        head: HeadKind = "scalar",
        *,
        sigmoid: bool = True,
        tokenization: TokenizeConfig | None = None,
        reward_tokens: tuple[str, str] = ("-", "+"),
        dtype: Any = "auto",
        lora: dict[str, Any] | None = None,
        gradient_checkpointing: bool = False,
        trust_remote_code: bool = False,
    ) -> ProcessRewardModel:
        """A new PRM on a pretrained backbone (a hub name or a local folder), on the CPU (`auto` dtype: float32,
        the trainable weights of the precision policy). With `lora` (LoraConfig keyword arguments) only LoRA
        adapters and the head train."""
        check_head(head)
        tokenization = tokenization or TokenizeConfig()
        tokenizer = load_tokenizer(backbone, trust_remote_code=trust_remote_code)
        kwargs: dict[str, Any] = {
            "dtype": _dtype(dtype),
            "trust_remote_code": trust_remote_code,
            "use_safetensors": True,
        }
        if num_labels(head):
            kwargs["num_labels"] = num_labels(head)
        model = _load_backbone_with_new_head(auto_class(head), str(backbone), kwargs)
        if tokenization.mode == "marked":
            add_step_marker(tokenizer, model, tokenization.marker)
        if model.config.pad_token_id is None:
            model.config.pad_token_id = tokenizer.pad_token_id
        if gradient_checkpointing:
            model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
        if lora is not None:
            model = _with_lora(model, head, lora, gradient_checkpointing)
        spec = PRMSpec(
            head=head,
            backbone=str(backbone),
            sigmoid=sigmoid,
            reward_tokens=reward_tokens,
            tokenization=tokenization,
        )
        return cls(model, tokenizer, spec)

    @classmethod
    def from_pretrained(
        cls,
        path: str | os.PathLike,
        *,
        dtype: Any = "auto",
        device: Any = None,
        trust_remote_code: bool = False,
    ) -> ProcessRewardModel:
        """Load a PRM folder saved by `save_pretrained`, or a TRL PRMTrainer output folder, on `device` (None:
        the CPU; `auto`: CUDA when present) in `dtype` (`auto`: `auto_dtype(device)`)."""
        path = Path(path)
        spec = read_spec(path)
        model = auto_class(spec.head).from_pretrained(
            str(path), dtype=_dtype(dtype, device), use_safetensors=True, trust_remote_code=trust_remote_code
        )
        prm = cls(model, load_tokenizer(path, trust_remote_code=trust_remote_code), spec)
        if device is not None:
            prm.to(_device(device))
        return prm.eval()

    def save_pretrained(self, path: str | os.PathLike, state_dict: dict[str, torch.Tensor] | None = None) -> Path:
        """Write the HF model (safetensors; LoRA adapters merged in), the tokenizer and `prm_config.json`.
        `state_dict`: this module's full state dict when a Trainer gathered it (FSDP / ZeRO-3,
        `proctor.training.policy.saving_state_dict`); None: the module's own."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        if _is_peft(self.model):
            if state_dict is not None:
                raise ValueError("a LoRA PRM trained sharded (FSDP / ZeRO-3) cannot be merged from a gathered "
                                 "state dict; save its checkpoint (prm_state.safetensors) instead")
            self.model = self.model.merge_and_unload()
        inner = None if state_dict is None else {k.removeprefix("model."): v for k, v in state_dict.items()}
        self.model.save_pretrained(path, safe_serialization=True, state_dict=inner)
        self.tokenizer.save_pretrained(path)
        (path / PRM_CONFIG).write_text(self.spec.model_dump_json(indent=2))
        return path

    def save_checkpoint(self, path: str | os.PathLike, state_dict: dict[str, torch.Tensor] | None = None) -> None:
        """The full training state of the weights (LoRA adapters included, unmerged) for resuming; `state_dict`:
        the full one a Trainer gathered (FSDP / ZeRO-3), None: the module's own. A tied weight is written once."""
        from safetensors.torch import save_file, save_model

        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        if state_dict is None:
            save_model(self, str(path / CHECKPOINT_STATE))
        else:
            seen: set[int] = set()
            tied = {n for n, p in self.named_parameters(remove_duplicate=False) if id(p) in seen or seen.add(id(p))}
            save_file({k: v.contiguous() for k, v in state_dict.items() if k not in tied},
                      str(path / CHECKPOINT_STATE), metadata={"format": "pt"})
        (path / PRM_CONFIG).write_text(self.spec.model_dump_json(indent=2))

    def load_checkpoint(self, path: str | os.PathLike) -> None:
        from safetensors.torch import load_model

        file = Path(path) / CHECKPOINT_STATE
        if not file.is_file():
            raise FileNotFoundError(f"{path} is not a PRM training checkpoint (no {CHECKPOINT_STATE})")
        load_model(self, str(file))

    # -- forward ------------------------------------------------------------------------------------
    @property
    def hf_model(self) -> nn.Module:
        """The transformers model (LoRA layers, if any, injected in place)."""
        return self.model.get_base_model() if _is_peft(self.model) else self.model

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        past_key_values: Any = None,
        use_cache: bool = False,
        score_mask: torch.Tensor | None = None,
    ) -> PRMOutput:
        """Per-token head logits ([B, L] scalar, [B, L, 2] two-class) and, with `use_cache`, the KV cache.
        `score_mask` (bool [B, L], e.g. the batch's `step_mask`): only those positions are projected by the
        head, the others' logits are 0; None: every position."""
        hf = self.hf_model
        body = getattr(hf, hf.base_model_prefix)
        out = body(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            use_cache=use_cache,
            **cache_kwargs(past_key_values),
        )
        head, hidden = head_module(hf, self.spec.head), out.last_hidden_state
        if score_mask is None:
            logits = token_logits(self.spec.head, head, hidden, self.reward_token_ids)
        else:
            scored = token_logits(self.spec.head, head, hidden[score_mask], self.reward_token_ids)
            logits = scored.new_zeros((*score_mask.shape, *scored.shape[1:]))
            logits[score_mask] = scored
        return PRMOutput(logits=logits, past_key_values=output_cache(out) if use_cache else None)

    def scores(self, logits: torch.Tensor) -> torch.Tensor:
        """Per-token step scores from `forward`'s logits (heads.scores_from_logits)."""
        return scores_from_logits(self.spec.head, logits, self.spec.sigmoid)

    def tokenize(self, ex: StepwiseExample, is_eval: bool = False) -> dict[str, list]:
        return self.spec.tokenization(ex, self.tokenizer, is_eval=is_eval)

    def _reward_token_ids(self) -> tuple[int, int]:
        ids = []
        for tok in self.spec.reward_tokens:
            enc = self.tokenizer.encode(tok, add_special_tokens=False)
            if len(enc) != 1:
                raise ValueError(
                    f"reward token {tok!r} is {len(enc)} tokens in this tokenizer; it must be one"
                )
            ids.append(enc[0])
        return ids[0], ids[1]


class _DropLoadReport(logging.Filter):
    """Drops transformers' per-load weight report (proctor checks the loading info itself)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "LOAD REPORT" not in record.getMessage()


def _load_backbone_with_new_head(cls: Any, backbone: str, kwargs: dict[str, Any]) -> nn.Module:
    """`cls.from_pretrained` without transformers' load report for the head it initialises (expected when a
    PRM is built on an LM); any other missing, unexpected or mismatched weight is logged as a warning."""
    modeling_logger = hf_logging.get_logger("transformers.modeling_utils")
    report_filter = _DropLoadReport()
    modeling_logger.addFilter(report_filter)
    try:
        model, info = cls.from_pretrained(backbone, output_loading_info=True, **kwargs)
    finally:
        modeling_logger.removeFilter(report_filter)
    head_params = {name for name, _ in model.named_parameters()
                   if not name.startswith(f"{model.base_model_prefix}.")}
    surprises = {
        "missing": [k for k in info.get("missing_keys", []) if k not in head_params],
        "unexpected": list(info.get("unexpected_keys", [])),
        "mismatched": [str(k) for k in info.get("mismatched_keys", [])],
    }
    for kind, keys in surprises.items():
        if keys:
            log.warning("backbone %s: %d %s weights: %s", backbone, len(keys), kind, ", ".join(sorted(keys)[:8]))
    return model


def _is_peft(model: nn.Module) -> bool:
    try:
        from peft import PeftModel
    except ImportError:
        return False
    return isinstance(model, PeftModel)


def _with_lora(model: nn.Module, head: str, lora: dict[str, Any], gradient_checkpointing: bool) -> nn.Module:
    from peft import LoraConfig, TaskType, get_peft_model

    task = TaskType.CAUSAL_LM if head == "reward_tokens" else TaskType.TOKEN_CLS
    cfg = {"r": 16, "lora_alpha": 32, "lora_dropout": 0.0, "target_modules": "all-linear", **lora}
    if task == TaskType.TOKEN_CLS:  # the head trains fully (modules_to_save); no adapter on it
        cfg.setdefault("exclude_modules", ["score", "classifier"])
    if gradient_checkpointing:
        model.enable_input_require_grads()
    return get_peft_model(model, LoraConfig(task_type=task, **cfg))


def read_spec(path: str | os.PathLike) -> PRMSpec:
    """The `PRMSpec` of a PRM folder, without its weights: its `prm_config.json`, or, for a TRL PRMTrainer output,
    a `classification` head with TRL's tokenization."""
    path = Path(path)
    if (path / PRM_CONFIG).is_file():
        return PRMSpec.model_validate_json((path / PRM_CONFIG).read_text())
    return _trl_spec(path)


def _trl_spec(path: Path) -> PRMSpec:
    from transformers import AutoConfig

    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"{path} is not a model folder (no config.json, no {PRM_CONFIG})")
    cfg = AutoConfig.from_pretrained(path)
    archs = cfg.architectures or []
    if not any(a.endswith("ForTokenClassification") for a in archs) or cfg.num_labels != 2:
        raise ValueError(
            f"{path}: no {PRM_CONFIG}, and config.json is not a 2-label token classifier "
            f"(architectures {archs}, {cfg.num_labels} labels), so it is neither a proctor nor a TRL PRM"
        )
    return PRMSpec(head="classification", backbone=str(path), tokenization=TokenizeConfig(mode="trl"))


__all__ = ["CheckpointingWrapper", "PRMOutput", "PRMSpec", "ProcessRewardModel", "auto_dtype", "read_spec"]

"""Build a tiny causal LM and its tokenizer from scratch, offline, saved exactly like a real HF model.

The tokenizer is a byte-level BPE trained locally with `tokenizers` (on the built-in environments' text by
default, see `proctor.models.corpus`), wrapped as a `PreTrainedTokenizerFast` with a ChatML chat template
and proctor's special tokens; the model is a randomly initialised Llama (or Qwen2) of a few million
parameters (or far fewer, for tests). The folder holds `config.json`, `model.safetensors`,
`generation_config.json`, `tokenizer.json`, `tokenizer_config.json`, the chat template and
`proctor_tiny.json` (the build arguments, written last: a folder with it is complete). Building again
with the same arguments into that folder reuses it; with other arguments it is refused in one line naming the
first that differs, or replaced with `overwrite` (the rule of `proctor.outputs`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from proctor.outputs import claim_output

UNK, PAD, BOS = "<unk>", "<pad>", "<s>"
IM_START, IM_END = "<|im_start|>", "<|im_end|>"
#: the PRM step marker: a PRM reads one score per step at this token
STEP_MARKER = "<|step|>"
SPECIAL_TOKENS: tuple[str, ...] = (UNK, PAD, BOS, IM_START, IM_END, STEP_MARKER)

#: ChatML; no BOS is emitted (like Qwen), and the end of an assistant turn is the EOS token <|im_end|>
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{%- endif %}"
)

MARKER_FILE = "proctor_tiny.json"
ARCHS = ("llama", "qwen2")
#: bump when the build procedure changes, so cached folders are not reused across incompatible builds
BUILD_VERSION = 1


def train_tokenizer(texts: Iterable[str], vocab_size: int):
    """A byte-level BPE `PreTrainedTokenizerFast` trained on `texts`, with `SPECIAL_TOKENS` and `CHAT_TEMPLATE`.

    The vocabulary is at most `vocab_size` (smaller when the corpus has fewer merges to learn)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    if vocab_size < 256 + len(SPECIAL_TOKENS):
        raise ValueError(f"vocab_size must be >= {256 + len(SPECIAL_TOKENS)} (the byte alphabet + specials)")
    bpe = Tokenizer(models.BPE(unk_token=UNK))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(texts, trainer)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        unk_token=UNK,
        pad_token=PAD,
        bos_token=BOS,
        eos_token=IM_END,
        additional_special_tokens=[IM_START, STEP_MARKER],
        padding_side="left",
    )
    tok.chat_template = CHAT_TEMPLATE
    return tok


def tiny_config(arch: str, tokenizer: Any, hidden_size: int, layers: int, heads: int,
                intermediate_size: int | None, max_position_embeddings: int):
    """A Llama/Qwen2 config sized as asked, its special token ids taken from `tokenizer`."""
    from transformers import LlamaConfig, Qwen2Config

    if arch not in ARCHS:
        raise ValueError(f"unknown arch {arch!r}; choose one of {', '.join(ARCHS)}")
    if hidden_size % heads:
        raise ValueError(f"hidden_size {hidden_size} is not divisible by heads {heads}")
    common = {
        "vocab_size": len(tokenizer),
        "hidden_size": hidden_size,
        "intermediate_size": intermediate_size or 4 * hidden_size,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": heads,
        "max_position_embeddings": max_position_embeddings,
        "tie_word_embeddings": True,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
    }
    return LlamaConfig(**common) if arch == "llama" else Qwen2Config(use_sliding_window=False, **common)


def _corpus_key(corpus: Iterable[str] | None) -> tuple[list[str] | None, str]:
    """The corpus as a list (None: the default corpus, made lazily) and a key naming it for the cache."""
    if corpus is None:
        from proctor.models.corpus import CORPUS_VERSION

        return None, f"default-v{CORPUS_VERSION}"
    texts = list(corpus)
    if not texts or not all(isinstance(t, str) for t in texts):
        raise ValueError("corpus must be a non-empty iterable of strings")
    h = hashlib.sha256()
    for t in texts:
        h.update(t.encode())
        h.update(b"\0")
    return texts, "sha256:" + h.hexdigest()


def _is_complete(folder: Path) -> bool:
    return (folder / MARKER_FILE).is_file()


def build_tiny(
    out_dir: str | os.PathLike,
    *,
    arch: str = "llama",
    hidden_size: int = 256,
    layers: int = 4,
    heads: int = 4,
    vocab_size: int = 3000,
    intermediate_size: int | None = None,
    max_position_embeddings: int = 8192,
    corpus: Iterable[str] | None = None,
    seed: int = 0,
    overwrite: bool = False,
) -> Path:
    """Build (or reuse) a tiny model + tokenizer folder at `out_dir` (see module docstring); returns it.

    Defaults give about 5M parameters; tests use e.g. `hidden_size=64, layers=2`. `corpus`: texts to train
    the tokenizer on (default: expert and random episodes of the built-in envs in every prompt format).
    """
    import torch
    from transformers import AutoModelForCausalLM

    out = Path(out_dir)
    texts, corpus_key = _corpus_key(corpus)
    args = {"arch": arch, "hidden_size": hidden_size, "layers": layers, "heads": heads,
            "vocab_size": vocab_size, "intermediate_size": intermediate_size,
            "max_position_embeddings": max_position_embeddings, "corpus": corpus_key, "seed": seed,
            "build_version": BUILD_VERSION}
    built = json.loads((out / MARKER_FILE).read_text())["args"] if _is_complete(out) else None
    if built is None and out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out} exists and is not an empty folder nor a tiny model folder")
    if claim_output(out, args, recorded=built, present=[out] if built is not None else [], overwrite=overwrite,
                    what="tiny model"):
        return out
    if texts is None:
        from proctor.models.corpus import default_corpus

        texts = default_corpus()

    tokenizer = train_tokenizer(texts, vocab_size)
    config = tiny_config(arch, tokenizer, hidden_size, layers, heads, intermediate_size, max_position_embeddings)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.bos_token_id = tokenizer.bos_token_id

    tmp = out.parent / f".{out.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    n_params = sum(p.numel() for p in model.parameters())
    marker = {"args": args, "vocab_size": len(tokenizer), "parameters": n_params}
    (tmp / MARKER_FILE).write_text(json.dumps(marker, indent=2))
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        if out.exists():
            out.rmdir()
        os.replace(tmp, out)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if not _is_complete(out):  # another process did not finish it either
            raise
    return out

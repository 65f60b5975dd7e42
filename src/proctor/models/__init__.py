"""Models: load any Hugging Face causal LM by name or path (or a GGUF file); build a tiny one from scratch,
offline; convert a GGUF checkpoint to a model folder."""

from proctor.models.gguf import convert_gguf
from proctor.models.loading import add_step_marker, load, load_tokenizer, prepare_tokenizer
from proctor.models.tiny import CHAT_TEMPLATE, IM_END, IM_START, SPECIAL_TOKENS, STEP_MARKER, build_tiny

__all__ = [
    "CHAT_TEMPLATE",
    "IM_END",
    "IM_START",
    "SPECIAL_TOKENS",
    "STEP_MARKER",
    "add_step_marker",
    "build_tiny",
    "convert_gguf",
    "load",
    "load_tokenizer",
    "prepare_tokenizer",
]

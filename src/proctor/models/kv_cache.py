"""The KV cache's name in transformers' model calls and outputs, for every transformers 5.x proctor supports.

transformers renamed `past_key_values` to `cache` (in 5.24 both work, the old name with a deprecation warning;
it is to go in 5.40). `cache_arg()` is the name the installed version uses, read once from its output class.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any


@functools.cache
def cache_arg() -> str:
    """"cache" or "past_key_values": the installed transformers' name for the KV cache."""
    from transformers.modeling_outputs import CausalLMOutputWithPast

    return "cache" if any(f.name == "cache" for f in dataclasses.fields(CausalLMOutputWithPast)) else "past_key_values"


def cache_kwargs(cache: Any) -> dict[str, Any]:
    """`{name: cache}` for a model's forward (or `generate`) call."""
    return {cache_arg(): cache}


def output_cache(output: Any) -> Any:
    """The KV cache a forward (or `generate`) call returned."""
    return getattr(output, cache_arg())

"""`proctor.models.kv_cache`: the installed transformers' name for the KV cache, used without its deprecation
warning, and a cache passed back in continues the sequence exactly."""

from __future__ import annotations

import logging

import torch

from proctor.models import load
from proctor.models.kv_cache import cache_arg, cache_kwargs, output_cache


def test_the_cache_round_trips_under_the_installed_name_without_a_deprecation_warning(tiny_model_dir, caplog):
    model, _ = load(tiny_model_dir)
    ids = torch.tensor([[5, 9, 12, 7, 30, 31]])
    with caplog.at_level(logging.WARNING), torch.no_grad():
        full = model(input_ids=ids).logits
        head = model(input_ids=ids[:, :4], use_cache=True)
        tail = model(input_ids=ids[:, 4:], use_cache=True, **cache_kwargs(output_cache(head))).logits
    assert cache_arg() in ("cache", "past_key_values")
    assert torch.allclose(full[:, 4:], tail, atol=1e-5)
    assert not [r for r in caplog.records if "deprecated" in r.getMessage()]

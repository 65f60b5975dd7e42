"""`proctor.models.kv_cache`: the installed transformers' name for the KV cache, used without its deprecation
warnings, and a cache passed back in continues the sequence exactly."""

from __future__ import annotations

import logging
import warnings

import torch

from proctor.models import load
from proctor.models.kv_cache import cache_arg, cache_kwargs, output_cache


def test_the_cache_round_trips_under_the_installed_name_without_a_deprecation_warning(tiny_model_dir, caplog):
    from transformers.utils import logging as hf_logging

    model, _ = load(tiny_model_dir)
    ids = torch.tensor([[5, 9, 12, 7, 30, 31]])
    hf_logging.enable_propagation()  # the output attribute's warning goes to transformers' logger, once per process
    logging.Logger.warning_once.cache_clear()
    try:
        with caplog.at_level(logging.WARNING), warnings.catch_warnings(record=True) as caught, torch.no_grad():
            warnings.simplefilter("always")
            full = model(input_ids=ids).logits
            head = model(input_ids=ids[:, :4], use_cache=True)
            tail = model(input_ids=ids[:, 4:], use_cache=True, **cache_kwargs(output_cache(head))).logits
    finally:
        hf_logging.disable_propagation()
    assert cache_arg() in ("cache", "past_key_values")
    assert torch.allclose(full[:, 4:], tail, atol=1e-5)
    messages = [str(w.message) for w in caught] + [r.getMessage() for r in caplog.records]
    assert not [m for m in messages if "deprecated" in m and "past_key_values" in m]

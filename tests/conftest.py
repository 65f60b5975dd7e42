"""Shared test set-up: one torch thread per test process, and the path to ../shared/data."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

try:
    import torch

    torch.set_num_threads(1)
except ImportError:  # pragma: no cover - torch is a hard dependency
    pass

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture
def shared_data() -> Path:
    """../shared/data, or skip with a message naming the missing folder."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"third-party data not found at {SHARED_DATA} (see the README's data section)")
    return SHARED_DATA

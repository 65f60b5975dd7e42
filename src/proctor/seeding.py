"""Stable seeds: the same parts give the same seed in every process and run (unlike Python's `hash`)."""

from __future__ import annotations

import hashlib
import random


def stable_seed(*parts: object) -> int:
    """A 63-bit seed from the `repr` of `parts` (blake2b), e.g. `stable_seed(seed, task_id, sample, step)`."""
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


def stable_rng(*parts: object) -> random.Random:
    return random.Random(stable_seed(*parts))

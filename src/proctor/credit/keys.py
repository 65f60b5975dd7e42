"""Canonical state and (state, action) keys, computed incrementally along a trajectory.

A state s_t is the task plus the whole observation/action history up to step t (docs/methods.md §0),
so its key is a hash of (env, task_id, task text, o_0, a_0, …, o_{t−1}, a_{t−1}, o_t). Each field is fed to
one running BLAKE2b as a length-prefixed UTF-8 string (an unambiguous encoding), and the key of step t is a
snapshot of that running hash, so keying a whole trajectory costs O(T), not O(T²).

The action identity is the action text, plus the free-text reason when `include_reason=True`; the same
identity is used for past actions in the history, so the two stay consistent.
"""

from __future__ import annotations

import struct
from hashlib import blake2b

from proctor.trajectory import Step, Trajectory

DIGEST_SIZE = 16
_PERSON = b"proctor-prefix"
_pack_len = struct.Struct(">Q").pack


def _field(text: str) -> bytes:
    """A length-prefixed UTF-8 string: the length as 8 big-endian bytes, then the bytes."""
    b = text.encode("utf-8")
    return _pack_len(len(b)) + b


def _action_field(step: Step, include_reason: bool) -> bytes:
    if not include_reason:
        return _field(step.action)
    # a missing reason is a lone 0xff byte, which no length prefix can start (it would mean ≥ 2^56 bytes)
    return _field(step.action) + (b"\xff" if step.reason is None else _field(step.reason))


def prefix_keys(traj: Trajectory, include_reason: bool = False) -> tuple[list[bytes], list[bytes]]:
    """(state keys, state-action keys) of every step of `traj`, as 16-byte digests."""
    h = blake2b(_field(traj.env) + _field(traj.task_id) + _field(traj.task), digest_size=DIGEST_SIZE,
                person=_PERSON)
    update, copy = h.update, h.copy
    states, pairs = [], []
    for step in traj.steps:
        update(_field(step.observation))
        states.append(copy().digest())
        update(_action_field(step, include_reason))
        pairs.append(copy().digest())
    return states, pairs


def state_keys(traj: Trajectory, include_reason: bool = False) -> list[bytes]:
    """The state key of every step (see module docstring)."""
    return prefix_keys(traj, include_reason)[0]


def action_identity(step: Step, include_reason: bool) -> tuple[str, str | None]:
    """What makes two actions at the same state the same action."""
    return (step.action, step.reason if include_reason else None)

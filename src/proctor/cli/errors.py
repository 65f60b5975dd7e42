"""User mistakes as one error line (`proctor.cli.options.fail`, exit code 2), or the full traceback with
`proctor --debug ...` (or `PROCTOR_DEBUG=1`, which torchrun's worker processes inherit)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from proctor.cli.options import fail

#: the environment variable `--debug` sets
DEBUG_ENV = "PROCTOR_DEBUG"


def debug_enabled() -> bool:
    """Whether errors should propagate with their traceback."""
    return os.environ.get(DEBUG_ENV, "") not in ("", "0")


@contextmanager
def user_errors(where: str | None = None) -> Iterator[None]:
    """Report a bad config, path, row or model reference raised inside the block as one line (naming
    `where`) and exit 2; re-raise it unchanged under `--debug`."""
    from pydantic import ValidationError

    from proctor.rollout.failures import EnvFailures

    try:
        yield
    except (ValidationError, ValueError, OSError, KeyError, ImportError, EnvFailures) as e:
        if debug_enabled():
            raise
        fail(e, where)

"""Text environments: the protocol (`TextEnv`), the registry (`make`), built-in envs and adapters."""

from proctor.envs import (  # noqa: F401  (registers built-ins)
    adapters,
    arithmetic,
    household,
    twenty_questions,
)
from proctor.envs.base import SPLITS, EnvError, EnvSpec, TextEnv
from proctor.envs.registry import entries, make, register, register_lazy

__all__ = ["SPLITS", "EnvError", "EnvSpec", "TextEnv", "entries", "make", "register", "register_lazy"]

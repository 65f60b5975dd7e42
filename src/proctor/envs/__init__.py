"""Text environments: the protocol (`TextEnv`), the registry (`make`, `EnvSpec`), the expert registry
(`proctor.envs.experts`), built-in envs and adapters (see `proctor.envs.catalog`).

Importing this package imports no model library (no torch): env worker processes and Ray actors stay light.
"""

from proctor.envs import catalog  # noqa: F401  (registers the built-in envs and the lazy adapters)
from proctor.envs.base import SPLITS, EnvError, TextEnv
from proctor.envs.registry import EnvSpec, entries, make, register, register_lazy

__all__ = ["SPLITS", "EnvError", "EnvSpec", "TextEnv", "entries", "make", "register", "register_lazy"]

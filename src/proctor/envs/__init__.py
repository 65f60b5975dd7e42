"""Text environments: the protocol (`TextEnv`: `step` returns a `StepResult`, a subclass's `_step` a `StepOutcome`),
the registry (`make`, `EnvSpec`), the expert registry (`proctor.envs.experts`), built-in envs and adapters (see
`proctor.envs.catalog`), and `check_env`, the conformance suite every env passes (`proctor.envs.conformance`).

Importing this package imports no model library (no torch): env worker processes and Ray actors stay light.
"""

from proctor.envs import catalog  # noqa: F401  (registers the built-in envs and the lazy adapters)
from proctor.envs.base import SPLITS, EnvError, StepOutcome, StepResult, TextEnv
from proctor.envs.conformance import EnvCheckError, check_env
from proctor.envs.registry import EnvSpec, entries, make, register, register_lazy

__all__ = ["SPLITS", "EnvCheckError", "EnvError", "EnvSpec", "StepOutcome", "StepResult", "TextEnv", "check_env",
           "entries", "make", "register", "register_lazy"]

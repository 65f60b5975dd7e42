"""Any proctor env (built in or an adapter) as an OpenEnv environment server: `proctor serve-env ENV`, or
`create_app`; `ProctorEnvClient` and `with_api_key` play it. Written against OpenEnv 0.3 (`OPENENV_VERSION`); the
protocol and how proctor maps onto it, the PRM step reward, the errors and the bounds: docs/integrations.md,
"OpenEnv". One module per job: `config`, `schema` (the action, observation and state), `environment` (a session's
env), `app` (the server and its guards), `client`.

Importing this package imports OpenEnv (and its web stack, a few seconds); a PRM loads when the first step is
scored (`proctor serve-env` loads it before serving).
"""

try:
    import openenv  # noqa: F401
except ImportError as e:  # pragma: no cover - the extra is installed by `dev`
    raise ImportError("proctor.integrations.openenv needs OpenEnv: pip install 'proctor[openenv]'") from e

from proctor.integrations.openenv.app import OPEN_PATHS, create_app
from proctor.integrations.openenv.client import BearerKey, ProctorEnvClient, with_api_key
from proctor.integrations.openenv.config import ServeEnvConfig, uvicorn_options
from proctor.integrations.openenv.environment import EnvService, ProctorEnvironment, build_env
from proctor.integrations.openenv.schema import ProctorAction, ProctorObservation, ProctorState

#: the OpenEnv release this adapter is written and tested against
OPENENV_VERSION = "0.3.0"

__all__ = [
    "OPENENV_VERSION", "OPEN_PATHS", "BearerKey", "EnvService", "ProctorAction", "ProctorEnvClient",
    "ProctorEnvironment", "ProctorObservation", "ProctorState", "ServeEnvConfig", "build_env", "create_app",
    "uvicorn_options", "with_api_key",
]

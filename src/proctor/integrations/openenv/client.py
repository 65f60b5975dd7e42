"""Clients of a proctor env's OpenEnv server: `ProctorEnvClient` (OpenEnv's `EnvClient` with proctor's types), and
`with_api_key`, which makes any OpenEnv client send a server's API key (`BearerKey`)."""

from __future__ import annotations

from typing import Any

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient

from proctor.integrations.openenv.schema import ProctorAction, ProctorObservation, ProctorState


class BearerKey:
    """A mixin for OpenEnv's `EnvClient` classes (docs/integrations.md): `api_key` (or None) is sent as `Authorization:
    Bearer <key>` at the WebSocket handshake, which a server started with `--api-key-env` requires; OpenEnv's own
    clients send no headers. `with_api_key(GenericEnvClient)` is OpenEnv's generic client with it."""

    def __init__(self, base_url: str, *args: Any, api_key: str | None = None, **kwargs: Any):
        super().__init__(base_url, *args, **kwargs)
        self._api_key = api_key

    async def connect(self) -> Any:
        if self._api_key is None or self._ws is not None:
            return await super().connect()
        from urllib.parse import urlparse

        from websockets.asyncio.client import connect

        local = urlparse(self._ws_url).hostname in ("localhost", "127.0.0.1", "::1")
        try:  # OpenEnv's connect, with the header (and, as it does, no proxy for this machine)
            self._ws = await connect(self._ws_url, open_timeout=self._connect_timeout, max_size=self._max_message_size,
                                     additional_headers={"Authorization": f"Bearer {self._api_key}"},
                                     proxy=None if local else True)
        except Exception as e:
            raise ConnectionError(f"Failed to connect to {self._ws_url}: {e}") from e
        return self


def with_api_key(client_cls: type) -> type:
    """`client_cls` (any OpenEnv `EnvClient` subclass, e.g. `GenericEnvClient`) taking `api_key=...`, which it
    sends at the handshake (`BearerKey`):

        KeyedClient = with_api_key(GenericEnvClient)
        with KeyedClient(base_url="http://127.0.0.1:8000", api_key=os.environ["ENV_SERVER_KEY"]).sync() as env:
            result = env.reset()
    """
    return type(client_cls.__name__, (BearerKey, client_cls), {"__doc__": f"{client_cls.__name__} that sends an "
                                                                          "API key (proctor's `with_api_key`)."})


class ProctorEnvClient(BearerKey, EnvClient[ProctorAction, ProctorObservation, ProctorState]):
    """OpenEnv's `EnvClient` for a proctor env server: `step` takes a `ProctorAction` or the command text, results
    carry `ProctorObservation`s; `api_key` (or None) is sent as `Authorization: Bearer` at the WebSocket handshake.

        with ProctorEnvClient("http://127.0.0.1:8000").sync() as env:
            result = env.reset(task_id=...)
            result = env.step("go to fridge 1")
    """

    def _step_payload(self, action: ProctorAction | str) -> dict[str, Any]:
        if isinstance(action, str):
            return {"command": action}
        return action.model_dump(exclude_defaults=True)

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[ProctorObservation]:
        obs = ProctorObservation(**payload.get("observation", {}), reward=payload.get("reward"),
                                 done=payload.get("done", False))
        return StepResult(observation=obs, reward=payload.get("reward"), done=payload.get("done", False))

    def _parse_state(self, payload: dict[str, Any]) -> ProctorState:
        return ProctorState(**payload)

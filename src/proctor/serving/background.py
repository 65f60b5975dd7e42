"""Run an ASGI app with uvicorn on a background thread of this process (tests, notebooks, local pipelines).

    with BackgroundServer(create_app(generator, "tiny")) as server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="EMPTY")

Port 0 (the default) lets the OS pick a free port; `server.port` / `server.url` give the one bound.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Self

import uvicorn


class BackgroundServer:
    """uvicorn serving `app` on `host:port` in a daemon thread; a context manager that starts and stops it."""

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0, start_timeout: float = 30.0,
                 **options: Any):
        """`options`: more of `uvicorn.Config`'s arguments (e.g. `ws_max_size`)."""
        self.host = host
        self.start_timeout = start_timeout
        self._server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", **options))
        self._thread = threading.Thread(target=self._server.run, name="proctor-serve", daemon=True)
        self.port = port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> BackgroundServer:
        self._thread.start()
        deadline = time.monotonic() + self.start_timeout
        while not self._server.started:
            if not self._thread.is_alive():
                raise RuntimeError(f"the server on {self.host}:{self.port} exited during start-up (port in use?)")
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"the server on {self.host} did not start within {self.start_timeout} s")
            time.sleep(0.02)
        self.port = self._server.servers[0].sockets[0].getsockname()[1]
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

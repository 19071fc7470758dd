"""uvicorn in a background thread, so the worker owns its main thread and signals."""

from __future__ import annotations

import socket
import ssl
import threading
import time

import uvicorn
from fastapi import FastAPI

from kctl.errors import ConfigError


class RestServer:
    """Binds its port when built (so a taken port is found before anything else is
    touched); serves `app`, which may be given after the port is known, from `start`."""

    def __init__(self, app: FastAPI | None, host: str = "127.0.0.1", port: int = 8083,
                 ssl_context: ssl.SSLContext | None = None):
        """`ssl_context`: serve https with it (the listener's certificate, and the clients'
        it requires when ssl.client.auth is set)."""
        self.app = app
        self.host = host
        self.ssl_context = ssl_context
        self.scheme = "https" if ssl_context is not None else "http"
        self._sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._sock.bind((host, port))
        except OSError as e:
            self._sock.close()
            raise ConfigError(f"cannot listen on {host}:{port}: {e.strerror}",
                              key="listeners") from e
        self.port = self._sock.getsockname()[1]
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    def start(self, timeout: float = 10.0) -> None:
        assert self.app is not None, "no app to serve"
        config = uvicorn.Config(self.app, log_level="warning", access_log=False,
                                lifespan="off")
        config.load()
        config.ssl = self.ssl_context  # uvicorn builds contexts from files only; this one is ours
        self._server = server = uvicorn.Server(config)
        self._thread = thread = threading.Thread(target=server.run,
                                                 kwargs={"sockets": [self._sock]}, name="rest",
                                                 daemon=True)
        thread.start()
        deadline = time.monotonic() + timeout
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise ConfigError(f"REST server did not start on {self.url}", key="listeners")
            time.sleep(0.01)

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None and self._thread.is_alive():
            self._thread.join(10)
        self._sock.close()

"""The CLI's REST client: one place that turns HTTP failures into one-line errors."""

from __future__ import annotations

import os
import re
from typing import Any

import httpx

DEFAULT_URL = "http://127.0.0.1:8083"


class ClientError(Exception):
    """A failed request; `status` is the HTTP code (0 when the worker is unreachable)."""

    def __init__(self, message: str, status: int = 0, body: Any = None):
        super().__init__(message)
        self.status = status
        self.body = body


class Client:
    def __init__(self, url: str | None = None, timeout: float = 60.0):
        self.url = (url or os.environ.get("KCTL_URL") or DEFAULT_URL).rstrip("/")
        self._http = httpx.Client(base_url=self.url, timeout=timeout)

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            r = self._http.request(method, path, **kwargs)
        except httpx.ConnectError as e:
            reason = re.sub(r"^\[Errno -?\d+\] ", "", str(e)) or type(e).__name__
            raise ClientError(f"cannot reach kctl worker at {self.url}: {reason} "
                              "(is it running? `kctl worker start`, or set --url / KCTL_URL)"
                              ) from e
        except httpx.HTTPError as e:
            raise ClientError(f"request to {self.url}{path} failed: {e}") from e
        if r.status_code >= 400:
            try:
                body = r.json()
                message = body.get("message", r.text)
            except ValueError:
                body, message = None, r.text
            raise ClientError(message, r.status_code, body)
        if r.status_code == 204 or not r.content:
            return None
        return r.json()

    def request_text(self, path: str) -> str:
        """A GET whose answer is text (Prometheus' /metrics), errors as for JSON."""
        try:
            r = self._http.get(path)
        except httpx.ConnectError as e:
            raise ClientError(f"cannot reach kctl worker at {self.url}: {e}") from e
        except httpx.HTTPError as e:
            raise ClientError(f"request to {self.url}{path} failed: {e}") from e
        if r.status_code >= 400:
            raise ClientError(r.text, r.status_code)
        return r.text

    def get(self, path: str, **kw: Any) -> Any:
        return self.request("GET", path, **kw)

    def post(self, path: str, **kw: Any) -> Any:
        return self.request("POST", path, **kw)

    def put(self, path: str, **kw: Any) -> Any:
        return self.request("PUT", path, **kw)

    def patch(self, path: str, **kw: Any) -> Any:
        return self.request("PATCH", path, **kw)

    def delete(self, path: str, **kw: Any) -> Any:
        return self.request("DELETE", path, **kw)

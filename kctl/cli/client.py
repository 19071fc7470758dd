"""The CLI's REST client: one place that turns HTTP failures into one-line errors."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from typing import Any

import httpx

DEFAULT_URL = "http://127.0.0.1:8083"


class ClientError(Exception):
    """A failed request; `status` is the HTTP code (0 when the worker is unreachable)."""

    def __init__(self, message: str, status: int = 0, body: Any = None):
        super().__init__(message)
        self.status = status
        self.body = body


def _rebalancing(error: ClientError) -> bool:
    """A 409 that clears by itself: the group is rebalancing (Kafka's wording, kctl's too)."""
    return error.status == 409 and "rebalanc" in str(error)


class Client:
    """`retry_for`: seconds to keep retrying a request the cluster refuses while it
    rebalances (409); `on_wait` hears the reason once, so the user sees that it waits."""

    def __init__(self, url: str | None = None, timeout: float = 60.0, *,
                 retry_for: float = 0.0, on_wait: Callable[[str], None] | None = None):
        self.url = (url or os.environ.get("KCTL_URL") or DEFAULT_URL).rstrip("/")
        self._http = httpx.Client(base_url=self.url, timeout=timeout)
        self.retry_for = retry_for
        self.on_wait = on_wait

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        deadline = time.monotonic() + self.retry_for
        backoff, told = 0.2, False
        while True:
            try:
                return self._request(method, path, **kwargs)
            except ClientError as e:
                if not _rebalancing(e) or time.monotonic() + backoff > deadline:
                    raise
                if not told and self.on_wait is not None:
                    self.on_wait(str(e))
                    told = True
                time.sleep(backoff)
                backoff = min(backoff * 2, 2.0)

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
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

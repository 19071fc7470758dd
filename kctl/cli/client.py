"""The CLI's REST client: one place that turns HTTP failures into one-line errors."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from typing import Any

import httpx

from kctl.backoff import Backoff

DEFAULT_URL = "http://127.0.0.1:8083"


class ClientError(Exception):
    """A failed request; `status` is the HTTP code (0 when the worker is unreachable)."""

    def __init__(self, message: str, status: int = 0, body: Any = None):
        super().__init__(message)
        self.status = status
        self.body = body


UNAUTHORIZED_HINT = ("the worker asks for credentials: set KCTL_USER and KCTL_PASSWORD, or "
                     "keep them in a context (kctl context set NAME --url URL --user USER)")


def _rebalancing(error: ClientError) -> bool:
    """A 409 that clears by itself: the group is rebalancing (Kafka's wording, kctl's too)."""
    return error.status == 409 and "rebalanc" in str(error)


# A request refused while the group rebalances is tried again 0.2 s later, then 0.4 s, up to 2 s.
REBALANCE_BACKOFF = Backoff(first=0.2, cap=2.0)


class Client:
    """`verify`: True (the system's CAs), a CA file, or False (--insecure); `auth`:
    (user, password) sent as HTTP Basic credentials; `retry_for`: seconds to keep retrying
    a request the cluster refuses while it rebalances (409); `on_wait` hears the reason
    once, so the user sees that it waits; `monotonic` and `sleep` are the clock it waits on."""

    def __init__(self, url: str | None = None, timeout: float = 60.0, *,
                 verify: bool | str = True, auth: tuple[str, str] | None = None,
                 retry_for: float = 0.0, on_wait: Callable[[str], None] | None = None,
                 monotonic: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep):
        self.url = (url or os.environ.get("KCTL_URL") or DEFAULT_URL).rstrip("/")
        if isinstance(verify, str):
            import ssl

            try:
                verify = ssl.create_default_context(cafile=verify)  # type: ignore[assignment]
            except (OSError, ssl.SSLError) as e:
                raise ClientError(f"cannot read the CA certificates in {verify}: {e}") from e
        self._http = httpx.Client(base_url=self.url, timeout=timeout, verify=verify,
                                  auth=auth)
        self.retry_for = retry_for
        self.on_wait = on_wait
        self._monotonic, self._sleep = monotonic, sleep

    def _failed(self, e: httpx.HTTPError, path: str) -> ClientError:
        text = str(e)
        if "CERTIFICATE_VERIFY_FAILED" in text or "certificate verify failed" in text:
            why = text.split("certificate verify failed:")[-1].strip(" ()") or text
            return ClientError(f"cannot verify the certificate of the kctl worker at "
                               f"{self.url}: {why} (give the CA that signed it with --cacert, "
                               "KCTL_CACERT or a context's --cacert; --insecure skips the "
                               "check)")
        if isinstance(e, httpx.ConnectError):
            reason = re.sub(r"^\[Errno -?\d+\] ", "", text) or type(e).__name__
            return ClientError(f"cannot reach kctl worker at {self.url}: {reason} "
                               "(is it running? `kctl worker start`, or set --url / KCTL_URL)")
        # a TLS listener answers plain HTTP with bytes that are no HTTP answer, or closes
        # the connection with a reset: either way the likely cause is the scheme
        if isinstance(e, httpx.RemoteProtocolError | httpx.ReadError | httpx.WriteError) \
                and self.url.startswith("http://"):
            return ClientError(f"request to {self.url}{path} failed: {e} (does the worker "
                               "listen on https? use an https:// URL)")
        return ClientError(f"request to {self.url}{path} failed: {e}")

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        deadline = self._monotonic() + self.retry_for
        attempt, told = 0, False
        while True:
            try:
                return self._request(method, path, **kwargs)
            except ClientError as e:
                attempt += 1
                backoff = REBALANCE_BACKOFF.delay(attempt)
                if not _rebalancing(e) or self._monotonic() + backoff > deadline:
                    raise
                if not told and self.on_wait is not None:
                    self.on_wait(str(e))
                    told = True
                self._sleep(backoff)

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            r = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as e:
            raise self._failed(e, path) from e
        if r.status_code == 401:
            raise ClientError(f"unauthorized: {UNAUTHORIZED_HINT}", 401)
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
        except httpx.HTTPError as e:
            raise self._failed(e, path) from e
        if r.status_code == 401:
            raise ClientError(f"unauthorized: {UNAUTHORIZED_HINT}", 401)
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

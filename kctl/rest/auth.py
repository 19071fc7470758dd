"""HTTP Basic authentication on the REST API, as Kafka's BasicAuthSecurityRestExtension.

Users and passwords come from a properties file (`user=password` lines, the file Kafka's
PropertyFileLoginModule reads), named directly or through a JAAS file's `KafkaConnect`
entry (`...PropertyFileLoginModule required file="/path";`), so a Kafka Connect deployment's
files work unchanged. Every request needs them except the internal, signed requests
between workers of a cluster (Kafka exempts `POST /connectors/{name}/tasks` and
`PUT /connectors/{name}/fence`: their KIP-507 signature is checked instead).
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import re
from collections.abc import Mapping
from typing import Any

from kctl.runtime.worker_config import load_credentials

__all__ = ["BasicAuth", "basic_header", "load_credentials"]

REALM = "kctl"
SIGNATURE_HEADER = b"x-connect-authorization"
_INTERNAL = (("POST", re.compile(r"^/?connectors/[^/]+/tasks/?$")),
             ("PUT", re.compile(r"^/?connectors/[^/]+/fence/?$")))


def basic_header(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


class BasicAuth:
    """ASGI middleware: 401 with `WWW-Authenticate: Basic` unless the request carries a
    known user's password (compared in constant time). `signed_internal`: the internal
    requests that carry a request signature pass without credentials (the herder verifies
    the signature), as Kafka's filter lets them through."""

    def __init__(self, app: Any, users: Mapping[str, str], signed_internal: bool = True):
        self.app = app
        self.users = {u.encode(): p.encode() for u, p in users.items()}
        self.signed_internal = signed_internal

    def _allowed(self, scope: Mapping[str, Any]) -> bool:
        headers = dict(scope.get("headers") or [])
        if self.signed_internal and SIGNATURE_HEADER in headers and any(
                scope["method"] == method and pattern.match(scope["path"])
                for method, pattern in _INTERNAL):
            return True
        value = headers.get(b"authorization", b"")
        scheme, _, token = value.partition(b" ")
        if scheme.lower() != b"basic":
            return False
        try:
            user, _, password = base64.b64decode(token.strip(), validate=True).partition(b":")
        except (binascii.Error, ValueError):
            return False
        expected = self.users.get(user)
        # compare even for an unknown user, so timing does not tell which users exist
        return hmac.compare_digest(password, expected if expected is not None else b"\0" * 32) \
            and expected is not None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or self._allowed(scope):
            await self.app(scope, receive, send)
            return
        body = json.dumps({"error_code": 401, "message": "Unauthorized: this worker asks for "
                           "HTTP Basic credentials (a user of its "
                           "rest.basic.auth.credentials.file)"}).encode()
        await send({"type": "http.response.start", "status": 401, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
            (b"www-authenticate", f'Basic realm="{REALM}"'.encode())]})
        await send({"type": "http.response.body", "body": body})

"""Requests between the workers of a cluster, in one place: forwarding a request to the
worker that can serve it, handing task configs to the leader, signing them (KIP-507), and
the internal path the leader takes them at.

Every request goes to a base URL a member advertised in its group metadata (the leader's
URL from the assignment, another member's from the leader's view of the generation), so
the scheme and port are the ones that worker listens on. `InterWorkerClient` is the seam
for what such a request carries besides (TLS settings, credentials).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Awaitable, Callable, Mapping, MutableMapping, Sequence
from typing import Any
from urllib.parse import quote

import httpx
from fastapi import APIRouter, Request, Response

from kctl.errors import ConflictError, ForbiddenError, RequestTargetError
from kctl.rest.deps import HerderDep
from kctl.rest.errors import answers, error_response
from kctl.rest.models import ConfigMap
from kctl.runtime.herder import SessionKey

__all__ = [
    "FORWARDED_HEADERS",
    "FORWARD_CONFLICT",
    "FORWARD_TIMEOUT_S",
    "SIGNATURE_ALGORITHM",
    "SIGNATURE_ALGORITHM_HEADER",
    "SIGNATURE_HEADER",
    "BufferedBody",
    "InterWorkerClient",
    "forward",
    "router",
    "sign",
    "verify",
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

# KIP-507's headers and algorithm, as Kafka Connect's InternalRequestSignature
SIGNATURE_HEADER = "X-Connect-Authorization"
SIGNATURE_ALGORITHM_HEADER = "X-Connect-Request-Signature-Algorithm"
SIGNATURE_ALGORITHM = "HmacSHA256"
# What a worker answers when a forwarded request reaches a worker that cannot serve it
# either (Kafka Connect's words): the leader changed on the way.
FORWARD_CONFLICT = ("Cannot complete request because of a conflicting operation "
                    "(e.g. worker rebalance)")
FORWARD_TIMEOUT_S = 90.0  # Kafka's REST request timeout
TASK_CONFIGS_TIMEOUT_S = 30.0
# Headers a forwarded request keeps: the body's type, the user's credentials (Kafka forwards
# Authorization too) and the internal request signature
FORWARDED_HEADERS = ("content-type", "authorization", SIGNATURE_HEADER.lower(),
                     SIGNATURE_ALGORITHM_HEADER.lower())


def sign(key: bytes, body: bytes) -> str:
    return base64.b64encode(hmac.new(key, body, hashlib.sha256).digest()).decode()


def verify(key: SessionKey | None, body: bytes, headers: Mapping[str, str]) -> None:
    """ForbiddenError unless `headers` carry a valid signature of `body` under `key`
    (Kafka Connect's answers, word for word)."""
    lowered = {k.lower(): v for k, v in headers.items()}
    given = lowered.get(SIGNATURE_HEADER.lower())
    if given is None:
        raise ForbiddenError("Internal request missing required signature")
    algorithm = lowered.get(SIGNATURE_ALGORITHM_HEADER.lower(), SIGNATURE_ALGORITHM)
    if algorithm != SIGNATURE_ALGORITHM:
        raise ForbiddenError(f"Internal request signature algorithm {algorithm} is not "
                             f"supported (expected {SIGNATURE_ALGORITHM})")
    if key is None or not hmac.compare_digest(sign(key.key, body), given):
        raise ForbiddenError("Internal request contained invalid signature.")


class InterWorkerClient:
    """HTTP to other workers of the cluster, at the base URLs they advertised."""

    def __init__(self, options: Mapping[str, Any] | None = None, *,
                 timeout_s: float = FORWARD_TIMEOUT_S) -> None:
        """`options`: what every inter-worker request is made with (httpx client options:
        `verify` for https between workers, `auth`, ...)."""
        self.options = dict(options or {})
        self.timeout_s = timeout_s

    def _client_options(self) -> dict[str, Any]:
        return dict(self.options)

    def post_task_configs(self, leader_url: str, connector: str,
                          configs: list[dict[str, str]], key: SessionKey | None) -> None:
        """The leader's internal `POST /connectors/{name}/tasks`, signed when `key` is
        given; ConflictError when the leader does not take them."""
        body = json.dumps(configs).encode()
        headers = {"Content-Type": "application/json"}
        if key is not None:
            headers[SIGNATURE_HEADER] = sign(key.key, body)
            headers[SIGNATURE_ALGORITHM_HEADER] = SIGNATURE_ALGORITHM
        url = f"{leader_url.rstrip('/')}/connectors/{quote(connector, safe='')}/tasks"
        with httpx.Client(timeout=TASK_CONFIGS_TIMEOUT_S, **self._client_options()) as client:
            answer = client.post(url, content=body, headers=headers,
                                 params={"forward": "false"})
        if answer.status_code >= 300:
            raise ConflictError(f"leader answered {answer.status_code}: {answer.text[:200]}")

    def put_logger_level(self, url: str, name: str, level: str) -> None:
        """Set a logger's level on the worker at `url` (KIP-976: the leader hands a
        cluster-wide level to each member); ConflictError when it does not take it."""
        with httpx.Client(timeout=TASK_CONFIGS_TIMEOUT_S, **self._client_options()) as client:
            answer = client.put(f"{url.rstrip('/')}/admin/loggers/{quote(name, safe='')}",
                                json={"level": level}, params={"scope": "worker"})
        if answer.status_code >= 300:
            raise ConflictError(f"worker {url} answered {answer.status_code} setting logger "
                                f"{name}: {answer.text[:200]}")

    async def forward(self, base_url: str, method: str, path: str,
                      params: Sequence[tuple[str, str]], headers: Mapping[str, str],
                      body: bytes) -> httpx.Response:
        """A REST request, as it arrived, to the worker at `base_url` (httpx.HTTPError when
        that worker cannot be reached)."""
        kept = {k: v for k, v in headers.items() if k.lower() in FORWARDED_HEADERS}
        # the user's own Authorization travels with the request, not this worker's
        options = {k: v for k, v in self._client_options().items() if k != "auth"}
        async with httpx.AsyncClient(timeout=self.timeout_s, **options) as client:
            return await client.request(method, base_url.rstrip("/") + path,
                                        params=httpx.QueryParams(list(params)),
                                        headers=kept, content=body)


router = APIRouter()


@router.post("/connectors/{name}/tasks", status_code=204, response_class=Response,
             responses=answers(400, 403, 404, 409))
def put_task_configs(request: Request, name: str, body: list[ConfigMap],
                     herder: HerderDep) -> None:
    """Internal (between workers of a cluster): the task configs a worker generated
    for the leader to write, signed with the session key under `sessioned`."""
    if herder.signs_internal_requests:
        verify(herder.session_key(), request.scope.get("kctl.body", b""), request.headers)
    configs = [{str(k): str(v) for k, v in c.items()} for c in body]
    herder.put_task_configs(name, configs)


class BufferedBody:
    """Reads each request's body once and keeps it in the scope, so a request that must be
    served by another worker (RequestTargetError) can be forwarded with its body, and an
    internal request's signature checked against the bytes that were signed."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        chunks, more = [], True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        scope["kctl.body"] = body
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


async def forward(request: Request, exc: Exception) -> Response:
    """Kafka Connect's forwarding: a request that arrives without `forward` may be forwarded
    twice (to the leader, which may hand it to the worker running a task); one that
    arrives with forward=false is answered 409."""
    assert isinstance(exc, RequestTargetError)
    client: InterWorkerClient = request.app.state.inter_worker
    hop = request.query_params.get("forward")
    if hop is not None and hop.lower() == "false":
        return error_response(409, FORWARD_CONFLICT)
    params = [(k, v) for k, v in request.query_params.multi_items() if k != "forward"]
    params.append(("forward", "true" if hop is None else "false"))
    try:
        answer = await client.forward(
            exc.forward_url, request.method, request.url.path, params, request.headers,
            request.scope.get("kctl.body", b""))
    except httpx.HTTPError as e:
        return error_response(409, f"{FORWARD_CONFLICT}: could not forward the request to "
                                   f"{exc.forward_url}: {e}")
    kept = {k: v for k, v in answer.headers.items() if k.lower() in ("content-type", "location")}
    return Response(answer.content, status_code=answer.status_code, headers=kept)

"""Kafka Connect's REST API over a Herder, with its paths, JSON shapes and status codes.

kctl exceptions become HTTP answers here and nowhere else: `{"error_code", "message"}`,
plus `errors` (field -> messages) for invalid configs so clients can show a table.
"""

from __future__ import annotations

from collections.abc import Mapping
from http import HTTPStatus
from typing import Any, Literal
from urllib.parse import quote

from fastapi import Body, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from kctl import __version__
from kctl.errors import (
    AlreadyExistsError,
    ConfigError,
    ConflictError,
    ForbiddenError,
    KctlError,
    NotFoundError,
    PluginError,
    RequestTargetError,
    ValidationError,
)
from kctl.rest.internal import FORWARD_CONFLICT, InterWorkerClient, verify
from kctl.rest.rebalances import ERRORS as REBALANCE_ERRORS
from kctl.rest.rebalances import rebalance_router
from kctl.runtime.herder import Herder
from kctl.runtime.loggers import LEVELS, Loggers
from kctl.runtime.metrics import worker_registry
from kctl.runtime.secrets import REDACTOR
from kctl.states import TargetState

STATUS_BY_ERROR: list[tuple[type[KctlError], int]] = [
    (NotFoundError, 404),
    (ForbiddenError, 403),
    (AlreadyExistsError, 409),
    (ConflictError, 409),
    (ValidationError, 400),
    (ConfigError, 400),
    (PluginError, 400),
]


def error_response(code: int, message: str, headers: Mapping[str, str] | None = None,
                   **extra: Any) -> JSONResponse:
    return JSONResponse({"error_code": code, "message": message, **extra}, status_code=code,
                        headers=dict(headers or {}))


# The error answers each operation can give, so the OpenAPI document declares exactly them
# (and not FastAPI's default 422: request validation answers 400 here, as Kafka Connect).
# 400 wherever a parameter or body can be malformed; 404 for a named connector or plugin.
ERRORS_BY_OPERATION: dict[tuple[str, str], tuple[int, ...]] = {
    ("get", "/"): (),
    ("get", "/health"): (503,),
    ("get", "/connectors"): (400,),
    ("post", "/connectors"): (400, 409),
    ("get", "/connectors/{name}"): (404,),
    ("get", "/connectors/{name}/config"): (404,),
    ("put", "/connectors/{name}/config"): (400, 409),
    ("patch", "/connectors/{name}/config"): (400, 404, 409),
    ("get", "/connectors/{name}/status"): (404,),
    ("get", "/connectors/{name}/tasks"): (404,),
    ("post", "/connectors/{name}/tasks"): (400, 403, 404, 409),
    ("get", "/connectors/{name}/tasks/{task}/status"): (400, 404),
    ("post", "/connectors/{name}/restart"): (400, 404),
    ("post", "/connectors/{name}/tasks/{task}/restart"): (400, 404),
    ("put", "/connectors/{name}/pause"): (404,),
    ("put", "/connectors/{name}/resume"): (404,),
    ("put", "/connectors/{name}/stop"): (404,),
    ("delete", "/connectors/{name}"): (404,),
    ("get", "/connectors/{name}/offsets"): (404,),
    ("patch", "/connectors/{name}/offsets"): (400, 404),
    ("delete", "/connectors/{name}/offsets"): (400, 404),
    ("get", "/connectors/{name}/topics"): (404,),
    ("put", "/connectors/{name}/topics/reset"): (404,),
    ("get", "/connectors/{name}/dlq"): (400, 404),
    ("post", "/connectors/{name}/dlq/replay"): (400, 404),
    ("delete", "/connectors/{name}/dlq"): (404,),
    ("get", "/metrics"): (),
    ("get", "/admin/loggers"): (),
    ("get", "/admin/loggers/{logger}"): (404,),
    ("put", "/admin/loggers/{logger}"): (400,),
    ("get", "/connector-plugins"): (400,),
    ("get", "/connector-plugins/{plugin}/config"): (404,),
    ("put", "/connector-plugins/{plugin}/config/validate"): (400,),
}

ERRORS_BY_OPERATION.update(REBALANCE_ERRORS)  # kctl's extension: rest/rebalances.py

ERROR_SCHEMA = {
    "type": "object", "required": ["error_code", "message"],
    "properties": {
        "error_code": {"type": "integer", "description": "The HTTP status code"},
        "message": {"type": "string"},
        "errors": {"type": "object", "description": "Invalid config: key -> messages",
                   "additionalProperties": {"type": "array", "items": {"type": "string"}}},
    },
}
# Config values are strings in Kafka Connect; YAML users send numbers, booleans and lists
# too (made strings), and null (ignored).
_CONFIG_VALUE = {"anyOf": [{"type": ["string", "number", "boolean", "null"]},
                           {"type": "array", "items": {"type": ["string", "number", "boolean"]}}]}
_CONFIG_MAP = {"type": "object", "additionalProperties": _CONFIG_VALUE}
_OFFSET_ENTRY = {"type": "object", "required": ["partition"], "properties": {
    "partition": {"type": "object"}, "offset": {"type": ["object", "null"]}}}

# Request bodies as the handlers read them (FastAPI only knows "an object").
BODIES: dict[tuple[str, str], dict[str, Any]] = {
    ("post", "/connectors"): {
        "type": "object", "required": ["name", "config"], "properties": {
            "name": {"type": "string", "minLength": 1, "pattern": "^[^/]+$"},
            "config": _CONFIG_MAP,
            "initial_state": {"type": "string", "enum": ["RUNNING", "PAUSED", "STOPPED"]}}},
    ("put", "/connectors/{name}/config"): _CONFIG_MAP,
    ("patch", "/connectors/{name}/config"): _CONFIG_MAP,  # null removes a key
    ("patch", "/connectors/{name}/offsets"): {
        "type": "object", "required": ["offsets"],
        "properties": {"offsets": {"type": "array", "items": _OFFSET_ENTRY}}},
    ("put", "/admin/loggers/{logger}"): {
        "type": "object", "required": ["level"], "properties": {
            "level": {"type": "string", "enum": list(LEVELS)}}},
    ("put", "/connector-plugins/{plugin}/config/validate"): _CONFIG_MAP,
    ("post", "/connectors/{name}/tasks"): {"type": "array", "items": _CONFIG_MAP},
}

class BufferedBody:
    """Reads each request's body once and keeps it in the scope, so a request that must be
    served by another worker (RequestTargetError) can be forwarded with its body."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
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

        async def replay() -> Any:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


async def forward(request: Request, exc: RequestTargetError,
                  client: InterWorkerClient | None = None) -> Response:
    """Kafka Connect's forwarding: a request that arrives without `forward` may be forwarded
    twice (to the leader, which may hand it to the worker running a task); one that
    arrives with forward=false is answered 409."""
    import httpx

    hop = request.query_params.get("forward")
    if hop is not None and hop.lower() == "false":
        return error_response(409, FORWARD_CONFLICT)
    params = [(k, v) for k, v in request.query_params.multi_items() if k != "forward"]
    params.append(("forward", "true" if hop is None else "false"))
    try:
        answer = await (client or InterWorkerClient()).forward(
            exc.forward_url, request.method, request.url.path, params, request.headers,
            request.scope.get("kctl.body", b""))
    except httpx.HTTPError as e:
        return error_response(409, f"{FORWARD_CONFLICT}: could not forward the request to "
                                   f"{exc.forward_url}: {e}")
    kept = {k: v for k, v in answer.headers.items() if k.lower() in ("content-type", "location")}
    return Response(answer.content, status_code=answer.status_code, headers=kept)


def exact_openapi(doc: dict[str, Any]) -> dict[str, Any]:
    """FastAPI's document made to say what the handlers do: their error answers with the
    error schema, their request bodies, and no 422."""
    doc.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR_SCHEMA
    for name in ("HTTPValidationError", "ValidationError"):
        doc["components"]["schemas"].pop(name, None)
    for path, operations in doc.get("paths", {}).items():
        for method, op in operations.items():
            responses = op.setdefault("responses", {})
            responses.pop("422", None)
            for code in ERRORS_BY_OPERATION.get((method, path), ()):
                responses[str(code)] = {
                    "description": HTTPStatus(code).phrase,
                    "content": {"application/json": {
                        "schema": {"$ref": "#/components/schemas/Error"}}}}
            body = BODIES.get((method, path))
            if body is not None:
                op["requestBody"] = {"required": True, "content": {
                    "application/json": {"schema": body}}}
    return doc


def create_app(herder: Herder, loggers: Loggers | None = None,
               metrics: CollectorRegistry | None = None,
               client: InterWorkerClient | None = None) -> FastAPI:
    """`client` carries requests this worker forwards to another one."""
    loggers = loggers or getattr(herder, "loggers", None) or Loggers()
    inter_worker = client or InterWorkerClient()
    if metrics is None:
        metrics = worker_registry(lambda: getattr(herder, "worker", None), herder)
    app = FastAPI(title="kctl", version=__version__,
                  description="Kafka-Connect-compatible REST API of a kctl worker")

    app.add_middleware(BufferedBody)
    async def forward_target(request: Request, exc: RequestTargetError) -> Response:
        return await forward(request, exc, inter_worker)

    app.add_exception_handler(RequestTargetError, forward_target)  # type: ignore[arg-type]

    @app.exception_handler(KctlError)
    async def kctl_error(request: Request, exc: KctlError) -> JSONResponse:
        message = REDACTOR.redact(str(exc))  # an error message never carries a password
        for cls, code in STATUS_BY_ERROR:
            if isinstance(exc, cls):
                extra = {"errors": {k: [REDACTOR.redact(m) for m in ms]
                                    for k, ms in exc.errors.items()}} \
                    if isinstance(exc, ValidationError) else {}
                return error_response(code, message, **extra)
        return error_response(500, message)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        headers = dict(exc.headers or {})
        if exc.status_code == 405:  # every method of the path, not only the first route's
            headers["Allow"] = ", ".join(sorted(allowed_methods(request.scope)))
        return error_response(exc.status_code, str(exc.detail), headers)

    def allowed_methods(scope: Any) -> set[str]:
        methods: set[str] = set()
        for route in app.router.routes:
            match, _ = route.matches(scope)
            if match is not Match.NONE:
                methods |= set(getattr(route, "methods", None) or ())
        return methods

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = exact_openapi(get_openapi(
                title=app.title, version=app.version, description=app.description,
                routes=app.routes))
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {"msg": "invalid request"}
        where = ".".join(str(p) for p in first.get("loc", ()))
        return error_response(400, f"Invalid request ({where}): {first['msg']}")

    app.include_router(rebalance_router(herder))

    @app.get("/")
    def root() -> dict[str, Any]:
        return herder.worker_info()

    @app.get("/health")
    def health() -> JSONResponse:
        health = herder.health()
        return JSONResponse(health.to_json(), status_code=200 if health.up else 503)

    @app.get("/connectors")
    def list_connectors(expand: list[str] = Query(default=[])) -> Any:
        names = herder.connectors()
        if not expand:
            return names
        out: dict[str, Any] = {}
        for n in names:
            entry: dict[str, Any] = {}
            if "status" in expand:
                entry["status"] = herder.connector_status(n).to_json()
            if "info" in expand:
                entry["info"] = herder.connector_info(n).to_json()
            out[n] = entry
        return out

    def created(request: Request, name: str, body: Any) -> JSONResponse:
        """201 with the new connector's URL in Location, as Kafka Connect answers."""
        location = f"{str(request.base_url).rstrip('/')}/connectors/{quote(name, safe='')}"
        return JSONResponse(body, status_code=201, headers={"Location": location})

    @app.post("/connectors", status_code=201)
    def create(request: Request, body: dict[str, Any] = Body(...)) -> Any:
        name = body.get("name")
        config = body.get("config")
        if not isinstance(name, str) or not name:
            raise ValidationError("Connector name must be given as 'name'", {"name": ["missing"]})
        if not isinstance(config, dict):
            raise ValidationError("Connector config must be given as 'config'",
                                  {"config": ["missing"]})
        state = str(body.get("initial_state") or "RUNNING").upper()
        targets = {"RUNNING": TargetState.STARTED, "PAUSED": TargetState.PAUSED,
                   "STOPPED": TargetState.STOPPED}
        if state not in targets:
            raise ValidationError(f"initial_state must be RUNNING, PAUSED or STOPPED, not {state}",
                                  {"initial_state": ["invalid"]})
        return created(request, name, herder.create_connector(name, config, targets[state]).to_json())

    @app.get("/connectors/{name}")
    def get_connector(name: str) -> Any:
        return herder.connector_info(name).to_json()

    @app.get("/connectors/{name}/config")
    def get_config(name: str) -> Any:
        return herder.connector_config(name)

    @app.put("/connectors/{name}/config")
    def put_config(request: Request, name: str, body: dict[str, Any] = Body(...)) -> JSONResponse:
        is_new, info = herder.put_connector_config(name, body)
        return created(request, name, info.to_json()) if is_new else JSONResponse(info.to_json())

    @app.patch("/connectors/{name}/config")
    def patch_config(name: str, body: dict[str, Any] = Body(...)) -> Any:
        return herder.patch_connector_config(name, body).to_json()

    @app.get("/connectors/{name}/status")
    def status(name: str) -> Any:
        return herder.connector_status(name).to_json()

    @app.get("/connectors/{name}/tasks")
    def tasks(name: str) -> Any:
        return [{"id": {"connector": name, "task": i}, "config": c}
                for i, c in enumerate(herder.task_configs(name))]

    @app.post("/connectors/{name}/tasks", status_code=204)
    def put_task_configs(request: Request, name: str,
                         body: list[dict[str, Any]] = Body(...)) -> Response:
        """Internal (between workers of a cluster): the task configs a worker generated
        for the leader to write, signed with the session key under `sessioned`."""
        if herder.signs_internal_requests:
            verify(herder.session_key(), request.scope.get("kctl.body", b""), request.headers)
        configs = [{str(k): str(v) for k, v in c.items()} for c in body]
        herder.put_task_configs(name, configs)
        return Response(status_code=204)

    @app.get("/connectors/{name}/tasks/{task}/status")
    def task_status(name: str, task: int) -> Any:
        return herder.task_status(name, task).to_json()

    @app.post("/connectors/{name}/restart")
    def restart(name: str, includeTasks: bool = False, onlyFailed: bool = False) -> Response:
        plan = herder.restart_connector(name, include_tasks=includeTasks, only_failed=onlyFailed)
        if not includeTasks and not onlyFailed:  # Kafka: a plain restart answers 204, no body
            return Response(status_code=204)
        # any flag set: 202 with the plan, RESTARTING where something restarts
        return JSONResponse(plan.to_json(), status_code=202)

    @app.post("/connectors/{name}/tasks/{task}/restart", status_code=204)
    def restart_task(name: str, task: int) -> Response:
        herder.restart_task(name, task)
        return Response(status_code=204)

    @app.put("/connectors/{name}/pause", status_code=202)
    def pause(name: str) -> Response:
        herder.pause_connector(name)
        return Response(status_code=202)

    @app.put("/connectors/{name}/resume", status_code=202)
    def resume(name: str) -> Response:
        herder.resume_connector(name)
        return Response(status_code=202)

    @app.put("/connectors/{name}/stop", status_code=204)
    def stop(name: str) -> Response:
        herder.stop_connector(name)  # Kafka answers 204 here (pause/resume answer 202)
        return Response(status_code=204)

    @app.delete("/connectors/{name}", status_code=204)
    def delete(name: str) -> Response:
        herder.delete_connector(name)
        return Response(status_code=204)

    @app.get("/connectors/{name}/offsets")
    def offsets(name: str) -> Any:
        return {"offsets": herder.connector_offsets(name)}

    @app.patch("/connectors/{name}/offsets")
    def alter_offsets(name: str, body: dict[str, Any] = Body(...)) -> Any:
        entries = body.get("offsets")
        if not isinstance(entries, list):
            raise ValidationError("Body must be {\"offsets\": [...]}", {"offsets": ["missing"]})
        try:
            return {"message": herder.alter_connector_offsets(name, entries)}
        except ConflictError as e:  # not STOPPED: Kafka answers 400 (BadRequest), not 409
            return error_response(400, str(e))

    @app.delete("/connectors/{name}/offsets")
    def reset_offsets(name: str) -> Any:
        try:
            return {"message": herder.reset_connector_offsets(name)}
        except ConflictError as e:  # not STOPPED: Kafka answers 400 (BadRequest), not 409
            return error_response(400, str(e))

    @app.get("/connectors/{name}/topics")
    def topics(name: str) -> Any:
        return {name: {"topics": herder.connector_topics(name)}}

    @app.put("/connectors/{name}/topics/reset", status_code=202)
    def reset_topics(name: str) -> Response:
        herder.reset_connector_topics(name)
        return Response(status_code=202)  # Kafka: 202 Accepted

    # kctl extension: the dead letter queue of a connector
    @app.get("/connectors/{name}/dlq")
    def dlq(name: str, limit: int = 1000) -> Any:
        return {"records": herder.dlq_records(name, limit)}

    @app.post("/connectors/{name}/dlq/replay")
    def dlq_replay(name: str, to: str | None = None) -> Any:
        return herder.dlq_replay(name, to).to_json()

    @app.delete("/connectors/{name}/dlq")
    def dlq_purge(name: str) -> Any:
        return {"purged": herder.dlq_purge(name)}

    @app.get("/metrics", response_class=PlainTextResponse)
    def prometheus_metrics() -> Response:
        """Prometheus' text format: Kafka Connect's metric names, per connector and task."""
        return Response(generate_latest(metrics), media_type=CONTENT_TYPE_LATEST)

    # KIP-495: log levels at run time. scope=cluster (KIP-976) answers 204 without a body as
    # Kafka Connect does; the herder sets it on every worker (a standalone one is the whole
    # cluster; a distributed one's leader hands it to each member).
    @app.get("/admin/loggers")
    def list_loggers() -> Any:
        return loggers.all()

    @app.get("/admin/loggers/{logger}")
    def get_logger(logger: str) -> Any:
        return loggers.get(logger)

    @app.put("/admin/loggers/{logger}", responses={204: {
        "description": "scope=cluster: set on every worker of the cluster; no body"}})
    def set_logger(logger: str, body: dict[str, Any] = Body(...),
                   scope: Literal["worker", "cluster"] = "worker") -> Any:
        if scope == "cluster":
            herder.set_cluster_logger_level(logger, body.get("level"))
            return Response(status_code=204)
        return loggers.set(logger, body.get("level"))

    @app.get("/connector-plugins")
    def plugins(connectorsOnly: bool = True) -> Any:
        return [p.to_json() for p in herder.plugins(connectorsOnly)]

    @app.get("/connector-plugins/{plugin}/config")
    def plugin_config(plugin: str) -> Any:
        return herder.plugin_config(plugin)

    @app.put("/connector-plugins/{plugin}/config/validate")
    def validate(plugin: str, body: dict[str, Any] = Body(...)) -> Any:
        return herder.validate_connector_config(plugin, body)

    return app

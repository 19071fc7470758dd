"""Kafka Connect's REST API over a Herder, with its paths, JSON shapes and status codes.

kctl exceptions become HTTP answers here and nowhere else: `{"error_code", "message"}`,
plus `errors` (field -> messages) for invalid configs so clients can show a table.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from fastapi import Body, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from kctl import __version__
from kctl.errors import (
    AlreadyExistsError,
    ConfigError,
    ConflictError,
    KctlError,
    NotFoundError,
    PluginError,
    ValidationError,
)
from kctl.runtime.herder import Herder
from kctl.states import TargetState

STATUS_BY_ERROR: list[tuple[type[KctlError], int]] = [
    (NotFoundError, 404),
    (AlreadyExistsError, 409),
    (ConflictError, 409),
    (ValidationError, 400),
    (ConfigError, 400),
    (PluginError, 400),
]


def error_response(code: int, message: str, **extra: Any) -> JSONResponse:
    return JSONResponse({"error_code": code, "message": message, **extra}, status_code=code)


def create_app(herder: Herder) -> FastAPI:
    app = FastAPI(title="kctl", version=__version__,
                  description="Kafka-Connect-compatible REST API of a kctl worker")

    @app.exception_handler(KctlError)
    async def kctl_error(request: Request, exc: KctlError) -> JSONResponse:
        for cls, code in STATUS_BY_ERROR:
            if isinstance(exc, cls):
                extra = {"errors": exc.errors} if isinstance(exc, ValidationError) else {}
                return error_response(code, str(exc), **extra)
        return error_response(500, str(exc))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return error_response(exc.status_code, str(exc.detail))

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {"msg": "invalid request"}
        where = ".".join(str(p) for p in first.get("loc", ()))
        return error_response(400, f"Invalid request ({where}): {first['msg']}")

    @app.get("/")
    def root() -> dict[str, Any]:
        return herder.worker_info()

    @app.get("/health")
    def health() -> JSONResponse:
        ok, message = herder.healthy()
        return JSONResponse({"status": "healthy" if ok else "unhealthy", "message": message},
                            status_code=200 if ok else 503)

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

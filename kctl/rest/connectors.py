"""Kafka Connect's connector paths: create, read, change, restart, pause, resume, stop and
delete connectors; their statuses, task configs, offsets (KIP-875) and active topics
(KIP-558). Status codes are Kafka Connect's, including where they differ between
neighbours (pause 202, stop 204)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Query, Request, Response

from kctl.errors import ConflictError
from kctl.rest.deps import HerderDep
from kctl.rest.errors import answers, error_response
from kctl.rest.models import (
    ActiveTopics,
    ConfigMap,
    ConnectorInfo,
    ConnectorOffsets,
    ConnectorStatus,
    CreateConnector,
    ExpandedConnector,
    Message,
    TaskInfo,
    TaskState,
)
from kctl.states import TargetState

__all__ = ["router"]

router = APIRouter()

_TARGETS = {"RUNNING": TargetState.STARTED, "PAUSED": TargetState.PAUSED,
            "STOPPED": TargetState.STOPPED}


def _location(request: Request, name: str) -> str:
    """The new connector's URL, which Kafka Connect answers a creation with."""
    return f"{str(request.base_url).rstrip('/')}/connectors/{quote(name, safe='')}"


@router.get("/connectors", response_model=list[str] | dict[str, ExpandedConnector],
            response_model_exclude_unset=True, responses=answers(400))
def list_connectors(herder: HerderDep, expand: list[str] = Query(default=[])) -> Any:
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


@router.post("/connectors", status_code=201, response_model=ConnectorInfo,
             responses=answers(400, 409))
def create(request: Request, response: Response, body: CreateConnector,
           herder: HerderDep) -> Any:
    state = _TARGETS[body.initial_state or "RUNNING"]
    info = herder.create_connector(body.name, body.config, state)
    response.headers["Location"] = _location(request, body.name)
    return info.to_json()


@router.get("/connectors/{name}", response_model=ConnectorInfo, responses=answers(404))
def get_connector(name: str, herder: HerderDep) -> Any:
    return herder.connector_info(name).to_json()


@router.get("/connectors/{name}/config", response_model=dict[str, str],
            responses=answers(404))
def get_config(name: str, herder: HerderDep) -> Any:
    return herder.connector_config(name)


@router.put("/connectors/{name}/config", response_model=ConnectorInfo,
            responses={201: {"model": ConnectorInfo, "description": "Created"},
                       **answers(400, 409)})
def put_config(request: Request, response: Response, name: str, body: ConfigMap,
               herder: HerderDep) -> Any:
    is_new, info = herder.put_connector_config(name, body)
    if is_new:
        response.status_code = 201
        response.headers["Location"] = _location(request, name)
    return info.to_json()


@router.patch("/connectors/{name}/config", response_model=ConnectorInfo,
              responses=answers(400, 404, 409))
def patch_config(name: str, body: ConfigMap, herder: HerderDep) -> Any:
    """A null value removes the key."""
    return herder.patch_connector_config(name, body).to_json()


@router.get("/connectors/{name}/status", response_model=ConnectorStatus,
            response_model_exclude_unset=True, responses=answers(404))
def status(name: str, herder: HerderDep) -> Any:
    return herder.connector_status(name).to_json()


@router.get("/connectors/{name}/tasks", response_model=list[TaskInfo], responses=answers(404))
def tasks(name: str, herder: HerderDep) -> Any:
    return [{"id": {"connector": name, "task": i}, "config": c}
            for i, c in enumerate(herder.task_configs(name))]


@router.get("/connectors/{name}/tasks/{task}/status", response_model=TaskState,
            response_model_exclude_unset=True, responses=answers(400, 404))
def task_status(name: str, task: int, herder: HerderDep) -> Any:
    return herder.task_status(name, task).to_json()


@router.post("/connectors/{name}/restart", status_code=202, response_model=ConnectorStatus,
             response_model_exclude_unset=True,
             responses={204: {"description": "A plain restart (neither flag): no body"},
                        **answers(400, 404)})
def restart(name: str, herder: HerderDep, includeTasks: bool = False,
            onlyFailed: bool = False) -> Any:
    """With either flag: 202 with the plan, RESTARTING where something restarts."""
    plan = herder.restart_connector(name, include_tasks=includeTasks, only_failed=onlyFailed)
    if not includeTasks and not onlyFailed:  # Kafka: a plain restart answers 204, no body
        return Response(status_code=204)
    return plan.to_json()


@router.post("/connectors/{name}/tasks/{task}/restart", status_code=204,
             response_class=Response, responses=answers(400, 404))
def restart_task(name: str, task: int, herder: HerderDep) -> None:
    herder.restart_task(name, task)


@router.put("/connectors/{name}/pause", status_code=202, response_class=Response,
            responses=answers(404))
def pause(name: str, herder: HerderDep) -> None:
    herder.pause_connector(name)


@router.put("/connectors/{name}/resume", status_code=202, response_class=Response,
            responses=answers(404))
def resume(name: str, herder: HerderDep) -> None:
    herder.resume_connector(name)


@router.put("/connectors/{name}/stop", status_code=204, response_class=Response,
            responses=answers(404))
def stop(name: str, herder: HerderDep) -> None:
    herder.stop_connector(name)  # Kafka answers 204 here (pause/resume answer 202)


@router.delete("/connectors/{name}", status_code=204, response_class=Response,
               responses=answers(404))
def delete(name: str, herder: HerderDep) -> None:
    herder.delete_connector(name)


@router.get("/connectors/{name}/offsets", response_model=ConnectorOffsets,
            responses=answers(404))
def offsets(name: str, herder: HerderDep) -> Any:
    return {"offsets": herder.connector_offsets(name)}


@router.patch("/connectors/{name}/offsets", response_model=Message,
              responses=answers(400, 404))
def alter_offsets(name: str, body: ConnectorOffsets, herder: HerderDep) -> Any:
    entries = [entry.model_dump() for entry in body.offsets]
    try:
        return {"message": herder.alter_connector_offsets(name, entries)}
    except ConflictError as e:  # not STOPPED: Kafka answers 400 (BadRequest), not 409
        return error_response(400, str(e))


@router.delete("/connectors/{name}/offsets", response_model=Message,
               responses=answers(400, 404))
def reset_offsets(name: str, herder: HerderDep) -> Any:
    try:
        return {"message": herder.reset_connector_offsets(name)}
    except ConflictError as e:  # not STOPPED: Kafka answers 400 (BadRequest), not 409
        return error_response(400, str(e))


@router.get("/connectors/{name}/topics", response_model=dict[str, ActiveTopics],
            responses=answers(404))
def topics(name: str, herder: HerderDep) -> Any:
    return {name: {"topics": herder.connector_topics(name)}}


@router.put("/connectors/{name}/topics/reset", status_code=202, response_class=Response,
            responses=answers(404))
def reset_topics(name: str, herder: HerderDep) -> None:
    herder.reset_connector_topics(name)  # Kafka: 202 Accepted


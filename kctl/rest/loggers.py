"""KIP-495: log levels at run time, in Kafka Connect's shapes.

`scope=cluster` (KIP-976) answers 204 without a body as Kafka Connect does; a standalone
worker is the whole cluster, so it sets this worker's levels (Kafka's StandaloneHerder does
the same).
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Response

from kctl.rest.deps import LoggersDep
from kctl.rest.errors import answers
from kctl.rest.models import LoggerLevel, LoggerLevelChange

__all__ = ["router"]

router = APIRouter()


@router.get("/admin/loggers", response_model=dict[str, LoggerLevel])
def list_loggers(loggers: LoggersDep) -> Any:
    return loggers.all()


@router.get("/admin/loggers/{logger}", response_model=LoggerLevel, responses=answers(404))
def get_logger(logger: str, loggers: LoggersDep) -> Any:
    return loggers.get(logger)


@router.put("/admin/loggers/{logger}", response_model=list[str], responses={
    204: {"description": "scope=cluster: set on every worker of the cluster; no body"},
    **answers(400)})
def set_logger(logger: str, body: LoggerLevelChange, loggers: LoggersDep,
               scope: Literal["worker", "cluster"] = "worker") -> Any:
    """The names of the loggers set (this one and those below it with a level)."""
    touched = loggers.set(logger, body.level)
    return Response(status_code=204) if scope == "cluster" else touched

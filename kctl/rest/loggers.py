"""KIP-495: log levels at run time, in Kafka Connect's shapes.

`scope=cluster` (KIP-976) sets the level on every worker of the cluster (the herder hands
it to the leader, which sets it on each member) and answers 204 without a body as Kafka
Connect does; a standalone worker is the whole cluster.
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Response

from kctl.rest.deps import HerderDep, LoggersDep
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
def set_logger(logger: str, body: LoggerLevelChange, loggers: LoggersDep, herder: HerderDep,
               scope: Literal["worker", "cluster"] = "worker") -> Any:
    """The names of the loggers set (this one and those below it with a level);
    scope=cluster (KIP-976) sets them on every worker of the cluster."""
    if scope == "cluster":
        herder.set_cluster_logger_level(logger, body.level or "")  # "" is refused, named
        return Response(status_code=204)
    return loggers.set(logger, body.level)

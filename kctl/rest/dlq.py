"""kctl's extension: a connector's dead letter queue, read, replayed and purged (sources
have one too)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from kctl.rest.deps import HerderDep
from kctl.rest.errors import answers
from kctl.rest.models import DlqPurged, DlqRecords, ReplayReport

__all__ = ["router"]

router = APIRouter()


@router.get("/connectors/{name}/dlq", response_model=DlqRecords, responses=answers(400, 404))
def dlq(name: str, herder: HerderDep, limit: int = 1000) -> Any:
    return {"records": herder.dlq_records(name, limit)}


@router.post("/connectors/{name}/dlq/replay", response_model=ReplayReport,
             responses=answers(400, 404))
def dlq_replay(name: str, herder: HerderDep, to: str | None = None) -> Any:
    return herder.dlq_replay(name, to).to_json()


@router.delete("/connectors/{name}/dlq", response_model=DlqPurged, responses=answers(404))
def dlq_purge(name: str, herder: HerderDep) -> Any:
    return {"purged": herder.dlq_purge(name)}

"""The worker itself: what it is (GET /), whether it is ready (GET /health) and what it
counts (GET /metrics, Prometheus' text format in Kafka Connect's metric names)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from kctl.rest.deps import HerderDep
from kctl.rest.models import Health, ServerInfo

__all__ = ["router"]

router = APIRouter()


@router.get("/", response_model=ServerInfo)
def root(herder: HerderDep) -> Any:
    return herder.worker_info()


@router.get("/health", response_model=Health,
            responses={503: {"model": Health, "description": "The worker is not ready"}})
def health(herder: HerderDep) -> JSONResponse:
    """healthy, degraded (it serves, but a task cannot move records: `problems` says which)
    or unhealthy (503: starting, stopping, no Kafka cluster, no group)."""
    h = herder.health()
    return JSONResponse(h.to_json(), status_code=200 if h.up else 503)


@router.get("/metrics", response_class=PlainTextResponse)
def prometheus_metrics(herder: HerderDep) -> Response:
    """Prometheus' text format: Kafka Connect's metric names, per connector and task."""
    return Response(generate_latest(herder.metrics()), media_type=CONTENT_TYPE_LATEST)

"""Kafka Connect's REST API over a Herder, with its paths, JSON shapes and status codes.

One router per resource, each in its own module; the JSON is `kctl.rest.models`, errors
become answers in `kctl.rest.errors`. The OpenAPI document is FastAPI's, from the models
and each route's declared `responses=`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI

from kctl import __version__
from kctl.errors import RequestTargetError
from kctl.rest import (
    connectors,
    dlq,
    internal,
    loggers,
    plugins,
    rebalances,
    registry,
    root,
    topics,
)
from kctl.rest.errors import install_error_handlers
from kctl.rest.internal import BufferedBody, InterWorkerClient, forward
from kctl.runtime.herder import Herder
from kctl.runtime.loggers import Loggers

__all__ = ["create_app"]

ROUTERS = (root.router, connectors.router, internal.router, dlq.router, loggers.router,
           plugins.router, rebalances.router, topics.router, registry.router)


def create_app(herder: Herder, loggers: Loggers | None = None,
               client: InterWorkerClient | None = None,
               clock: Callable[[], float] = time.time) -> FastAPI:
    """`client` carries requests this worker forwards to another one."""
    app = FastAPI(title="kctl", version=__version__,
                  description="Kafka-Connect-compatible REST API of a kctl worker")
    app.state.herder = herder
    app.state.loggers = loggers or herder.loggers
    app.state.inter_worker = client or InterWorkerClient()
    app.state.clock = clock
    app.add_middleware(BufferedBody)
    install_error_handlers(app)
    registry.install_schema_registry(app)
    app.add_exception_handler(RequestTargetError, forward)
    for router in ROUTERS:
        app.include_router(router)
    app.state.routes = [route for router in ROUTERS for route in router.routes]
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's document, less the 422 it declares for every validated request: this API
    answers those with 400 (declared per route), as Kafka Connect does."""
    if app.openapi_schema is None:
        doc = FastAPI.openapi(app)
        for operations in doc.get("paths", {}).values():
            for op in operations.values():
                answer = op.get("responses", {}).get("422", {})
                schema = answer.get("content", {}).get("application/json", {}).get("schema", {})
                if schema.get("$ref", "").endswith("/HTTPValidationError"):
                    del op["responses"]["422"]  # FastAPI's; a declared 422 (the registry's) stays
        for name in ("HTTPValidationError", "ValidationError"):
            doc.get("components", {}).get("schemas", {}).pop(name, None)
        app.openapi_schema = doc
    return app.openapi_schema

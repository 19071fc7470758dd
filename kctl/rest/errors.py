"""kctl exceptions become HTTP answers here and nowhere else.

Every error answer is `{"error_code", "message"}`, plus `errors` (field -> messages) for an
invalid config or request, so clients can show a table. A request FastAPI cannot validate
is answered 400, as Kafka Connect answers it (not FastAPI's 422).
"""

from __future__ import annotations

from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from kctl.errors import (
    AlreadyExistsError,
    ConfigError,
    ConflictError,
    ForbiddenError,
    KctlError,
    NotFoundError,
    PluginError,
    ValidationError,
)
from kctl.rest.models import Error
from kctl.runtime.secrets import REDACTOR

__all__ = ["STATUS_BY_ERROR", "answers", "error_response", "install_error_handlers",
           "json_answers"]

STATUS_BY_ERROR: list[tuple[type[KctlError], int]] = [
    (NotFoundError, 404),
    (ForbiddenError, 403),
    (AlreadyExistsError, 409),
    (ConflictError, 409),
    (ValidationError, 400),
    (ConfigError, 400),
    (PluginError, 400),
]


def answers(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The error answers an operation can give, for its `responses=`: 400 wherever a
    parameter or body can be malformed, 404 for a named connector or plugin, ..."""
    return {code: {"model": Error, "description": HTTPStatus(code).phrase} for code in codes}


def json_answers(*codes: int) -> dict[int | str, dict[str, Any]]:
    """`answers` for a route whose own answer is not JSON (FastAPI would put the error
    body under the route's media type)."""
    return {code: {"description": HTTPStatus(code).phrase, "content": {"application/json": {
        "schema": {"$ref": "#/components/schemas/Error"}}}} for code in codes}


def error_response(code: int, message: str, headers: Mapping[str, str] | None = None,
                   errors: Mapping[str, list[str]] | None = None) -> JSONResponse:
    body = Error(error_code=code, message=message)
    if errors is not None:
        body.errors = dict(errors)
    return JSONResponse(body.model_dump(exclude_unset=True), status_code=code,
                        headers=dict(headers or {}))


async def _kctl_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, KctlError)
    message = REDACTOR.redact(str(exc))  # an error message never carries a password
    for cls, code in STATUS_BY_ERROR:
        if isinstance(exc, cls):
            errors = {k: [REDACTOR.redact(m) for m in ms] for k, ms in exc.errors.items()} \
                if isinstance(exc, ValidationError) else None
            return error_response(code, message, errors=errors)
    return error_response(500, message)


def _allowed_methods(request: Request) -> set[str]:
    """The methods of every route whose path matches (`app.state.routes`: the routes of
    the routers create_app included)."""
    methods: set[str] = set()
    for route in request.app.state.routes:
        match, _ = route.matches(request.scope)
        if match is not Match.NONE and isinstance(route, APIRoute) and route.methods:
            methods |= route.methods
    return methods


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    headers = dict(exc.headers or {})
    if exc.status_code == 405:  # every method of the path, not only the first route's
        headers["Allow"] = ", ".join(sorted(_allowed_methods(request)))
    return error_response(exc.status_code, str(exc.detail), headers)


async def _bad_request(request: Request, exc: Exception) -> JSONResponse:
    """400 naming the first problem, and every field's problems in `errors`."""
    assert isinstance(exc, RequestValidationError)
    problems = exc.errors()
    if not problems:
        return error_response(400, "Invalid request")
    errors: dict[str, list[str]] = {}
    for p in problems:
        loc = [str(part) for part in p.get("loc", ())]
        field = ".".join(loc[1:]) or loc[0] if loc else "request"
        errors.setdefault(field, []).append(str(p["msg"]))
    first = problems[0]
    where = ".".join(str(part) for part in first.get("loc", ()))
    given = first.get("input")
    said = f", not {given!r}" if isinstance(given, str | int | float | bool) else ""
    message = REDACTOR.redact(f"Invalid request ({where}): {first['msg']}{said}")
    return error_response(400, message,
                          errors={k: [REDACTOR.redact(m) for m in ms] for k, ms in errors.items()})


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(KctlError, _kctl_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _bad_request)

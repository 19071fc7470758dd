"""The OpenAPI document says what the worker does: it is FastAPI's, written from the models
of kctl.rest.models and each route's declared answers, with kctl's error body for every
error answer, the request bodies the routes read, and nothing it never sends (no FastAPI
422). schemathesis, run against a live worker with its default checks, finds nothing to
report."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from kctl.launch import StandaloneWorker
from kctl.runtime.worker_config import WorkerConfig

HERE = Path(__file__).parent


@pytest.fixture
def worker(tmp_path) -> Iterator[StandaloneWorker]:
    w = StandaloneWorker(WorkerConfig({"state.dir": str(tmp_path / "state"),
                                       "listeners": "http://127.0.0.1:0"}))
    w.start()
    yield w
    w.stop()


ERROR = {"$ref": "#/components/schemas/Error"}


def schema_of(doc: dict, ref: dict) -> dict:
    return doc["components"]["schemas"][ref["$ref"].rsplit("/", 1)[1]]


def test_every_error_answer_is_the_error_body_and_there_is_no_422(worker):
    doc = httpx.get(f"{worker.rest.url}/openapi.json").json()
    operations = {(m, p): op for p, ops in doc["paths"].items() for m, op in ops.items()}
    assert ("get", "/connectors/{name}/status") in operations and len(operations) > 30
    for key, op in operations.items():
        codes = {int(c) for c in op["responses"]}
        # Kafka Connect answers a bad request 400; Confluent's registry answers an invalid
        # schema, version or level 422 with its own error codes, which its clients expect
        assert 422 not in codes or key[1].startswith("/schema-registry"), key
        for code in (c for c in codes if c >= 400 and key != ("get", "/health")):
            assert op["responses"][str(code)]["content"]["application/json"]["schema"] \
                == ERROR, key
    error = doc["components"]["schemas"]["Error"]
    assert error["required"] == ["error_code", "message"]
    assert "HTTPValidationError" not in doc["components"]["schemas"]


def test_the_document_declares_the_answers_kafka_connect_gives(worker):
    """Status codes that differ between neighbours, as Kafka Connect's, are in the
    document: a plain restart's 204 beside the flagged one's 202, PUT config's 201 for a
    new connector, pause's 202 beside stop's 204, a worker that is not ready's 503."""
    doc = httpx.get(f"{worker.rest.url}/openapi.json").json()

    def codes(method: str, path: str) -> set[int]:
        return {int(c) for c in doc["paths"][path][method]["responses"]}

    assert codes("post", "/connectors/{name}/restart") == {202, 204, 400, 404}
    assert codes("put", "/connectors/{name}/config") == {200, 201, 400, 409}
    assert codes("put", "/connectors/{name}/pause") == {202, 404}
    assert codes("put", "/connectors/{name}/stop") == {204, 404}
    assert codes("get", "/health") == {200, 503}
    assert codes("post", "/connectors/{name}/tasks") == {204, 400, 403, 404, 409}


def test_request_bodies_are_the_models_the_routes_read(worker):
    doc = httpx.get(f"{worker.rest.url}/openapi.json").json()

    def body(method: str, path: str) -> dict:
        op = doc["paths"][path][method]
        assert op["requestBody"]["required"] is True
        return op["requestBody"]["content"]["application/json"]["schema"]

    create = schema_of(doc, body("post", "/connectors"))
    assert create["required"] == ["name", "config"]
    assert create["properties"]["name"]["pattern"] == "^[^/]+$"
    level = schema_of(doc, body("put", "/admin/loggers/{logger}"))
    assert level["required"] == ["level"] and "DEBUG" in level["properties"]["level"]["enum"]
    offsets = schema_of(doc, body("patch", "/connectors/{name}/offsets"))
    assert offsets["required"] == ["offsets"]
    for method, path in [("put", "/connectors/{name}/config"),
                         ("patch", "/connectors/{name}/config"),
                         ("put", "/connector-plugins/{plugin}/config/validate")]:
        config = body(method, path)
        assert config["type"] == "object" and "additionalProperties" in config, path
    assert body("post", "/connectors/{name}/tasks")["type"] == "array"


def test_a_wrong_method_is_405_naming_every_allowed_method(worker):
    r = httpx.request("TRACE", f"{worker.rest.url}/connectors/x/offsets")
    assert r.status_code == 405
    assert r.headers["Allow"] == "DELETE, GET, PATCH"
    assert r.json() == {"error_code": 405, "message": "Method Not Allowed"}


@pytest.mark.slow
# every phase schemathesis runs by default, in two tests so that test processes share them
@pytest.mark.parametrize("phases", ["examples,coverage", "fuzzing,stateful"])
def test_schemathesis_finds_the_live_api_honest(worker, tmp_path, phases):
    r = subprocess.run(
        [sys.executable, "-m", "schemathesis.cli", "--config-file",
         str(HERE / "schemathesis.toml"), "run", f"{worker.rest.url}/openapi.json",
         "--phases", phases, "--max-examples", "8", "--seed", "1", "--no-color"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]
    generated = re.search(r"(\d+) generated, (\d+) passed", r.stdout)
    assert generated and generated[1] == generated[2] and int(generated[1]) > 100, r.stdout[-3000:]
    assert "Failures:" not in r.stdout
    # the worker is still there and answers
    assert httpx.get(f"{worker.rest.url}/").status_code == 200

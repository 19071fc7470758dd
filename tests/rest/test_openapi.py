"""The OpenAPI document says what the worker does: every error answer it can give, with kctl's
error body, its request bodies, and nothing it never sends (no FastAPI 422). schemathesis,
run against a live worker with its default checks, finds nothing to report."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from kctl.launch import StandaloneWorker
from kctl.rest.app import BODIES, ERRORS_BY_OPERATION
from kctl.runtime.worker_config import WorkerConfig

HERE = Path(__file__).parent


@pytest.fixture
def worker(tmp_path) -> Iterator[StandaloneWorker]:
    w = StandaloneWorker(WorkerConfig({"state.dir": str(tmp_path / "state"),
                                       "listeners": "http://127.0.0.1:0"}))
    w.start()
    yield w
    w.stop()


def test_every_operation_declares_exactly_its_error_answers(worker):
    doc = httpx.get(f"{worker.rest.url}/openapi.json").json()
    operations = {(m, p): op for p, ops in doc["paths"].items() for m, op in ops.items()}
    assert set(operations) == set(ERRORS_BY_OPERATION), "the table names every operation"
    for key, op in operations.items():
        codes = {int(c) for c in op["responses"]}
        errors = {c for c in codes if c >= 400}
        assert errors == set(ERRORS_BY_OPERATION[key]), key
        assert 422 not in codes
        for code in errors:
            schema = op["responses"][str(code)]["content"]["application/json"]["schema"]
            assert schema == {"$ref": "#/components/schemas/Error"}
        if key in BODIES:
            assert op["requestBody"]["content"]["application/json"]["schema"] == BODIES[key]
    error = doc["components"]["schemas"]["Error"]
    assert error["required"] == ["error_code", "message"]
    assert "HTTPValidationError" not in doc["components"]["schemas"]


def test_a_wrong_method_is_405_naming_every_allowed_method(worker):
    r = httpx.request("TRACE", f"{worker.rest.url}/connectors/x/offsets")
    assert r.status_code == 405
    assert r.headers["Allow"] == "DELETE, GET, PATCH"
    assert r.json() == {"error_code": 405, "message": "Method Not Allowed"}


@pytest.mark.slow
def test_schemathesis_finds_the_live_api_honest(worker, tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "schemathesis.cli", "--config-file",
         str(HERE / "schemathesis.toml"), "run", f"{worker.rest.url}/openapi.json",
         "--max-examples", "8", "--seed", "1", "--no-color"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]
    generated = re.search(r"(\d+) generated, (\d+) passed", r.stdout)
    assert generated and generated[1] == generated[2] and int(generated[1]) > 100, r.stdout[-3000:]
    assert "Failures:" not in r.stdout
    # the worker is still there and answers
    assert httpx.get(f"{worker.rest.url}/").status_code == 200

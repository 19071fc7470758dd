"""A worker serving the Schema Registry, for the registry-backed converters' tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kctl.launch import StandaloneWorker
from kctl.runtime.worker_config import WorkerConfig


@pytest.fixture(scope="module")
def registry_url(tmp_path_factory) -> Iterator[str]:
    """The registry of a standalone worker (no Spark started), one per test module."""
    state = tmp_path_factory.mktemp("registry-worker")
    worker = StandaloneWorker(WorkerConfig({"state.dir": str(state / "state"),
                                            "listeners": "http://127.0.0.1:0",
                                            "spark.start": "lazy"}))
    worker.start()
    yield f"{worker.rest.url}/schema-registry"
    worker.stop()

"""/admin/loggers answers in Kafka Connect's shapes (KIP-495, KIP-976's scope), so clients
written for Connect change a kctl worker's log levels unchanged."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import httpx
import pytest

from kctl.launch import StandaloneWorker
from kctl.runtime.worker_config import WorkerConfig


@pytest.fixture
def url(tmp_path) -> Iterator[str]:
    w = StandaloneWorker(WorkerConfig({"state.dir": str(tmp_path / "state"),
                                       "listeners": "http://127.0.0.1:0"}))
    w.start()
    names = ("kctl.test.loggers", "kctl.test.loggers.child")
    try:
        yield w.rest.url
    finally:
        for name in names:
            logging.getLogger(name).setLevel(logging.NOTSET)
        w.stop()


def test_worker_scope_answers_the_names_it_set_and_get_shows_when(url):
    child = logging.getLogger("kctl.test.loggers.child")
    child.setLevel(logging.ERROR)

    r = httpx.put(f"{url}/admin/loggers/kctl.test.loggers", json={"level": "WARN"})
    assert r.status_code == 200
    assert r.json() == ["kctl.test.loggers", "kctl.test.loggers.child"]
    assert child.level == logging.WARNING

    got = httpx.get(f"{url}/admin/loggers/kctl.test.loggers.child").json()
    assert got["level"] == "WARN" and got["last_modified"] > 1.7e12
    listed = httpx.get(f"{url}/admin/loggers").json()
    assert "root" in listed and listed["kctl.test.loggers"]["level"] == "WARN"


def test_cluster_scope_is_204_and_a_standalone_worker_is_the_whole_cluster(url):
    r = httpx.put(f"{url}/admin/loggers/kctl.test.loggers", params={"scope": "cluster"},
                  json={"level": "debug"})
    assert r.status_code == 204 and r.content == b""
    assert logging.getLogger("kctl.test.loggers").level == logging.DEBUG


def test_a_missing_or_unknown_level_or_scope_is_400_naming_the_problem(url):
    r = httpx.put(f"{url}/admin/loggers/kctl.test.loggers", json={})
    assert r.status_code == 400 and r.json()["error_code"] == 400
    assert "names no 'level'" in r.json()["message"]
    r = httpx.put(f"{url}/admin/loggers/kctl.test.loggers", json={"level": "LOUD"})
    assert r.status_code == 400 and "Invalid log level 'LOUD'" in r.json()["message"]
    r = httpx.put(f"{url}/admin/loggers/kctl.test.loggers", params={"scope": "galaxy"},
                  json={"level": "INFO"})
    assert r.status_code == 400 and "scope" in r.json()["message"]
    assert logging.getLogger("kctl.test.loggers").level == logging.NOTSET, "nothing was set"

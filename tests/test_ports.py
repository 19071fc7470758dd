"""Servers the tests start on a port picked in advance start again on a fresh one when
another process took it first, and a missing database server is named, not a traceback."""

from __future__ import annotations

import socket

import pytest
from support import broker, databases


@pytest.mark.broker
def test_a_broker_whose_port_was_taken_starts_on_a_fresh_one(monkeypatch):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        handed = iter([port])  # the first port handed out is the taken one
        free = broker.free_port
        monkeypatch.setattr(broker, "free_port", lambda: next(handed, None) or free())
        started = broker.start_broker()
        try:
            assert started.port != port
            assert broker.listens(started.proc.pid, started.port) is True
            assert broker.listens(started.proc.pid, port) is False
        finally:
            started.stop()


def test_a_machine_without_postgresql_is_told_what_to_install(monkeypatch):
    monkeypatch.setattr(databases, "_answers", lambda port: False)
    monkeypatch.setattr(databases.glob, "glob", lambda pattern: [])
    with pytest.raises(pytest.fail.Exception) as e:
        databases.start_postgres()
    assert str(e.value).startswith("PostgreSQL neither answers on 127.0.0.1:5432 nor is "
                                   "installed: run `bash scripts/test-deps.sh`")

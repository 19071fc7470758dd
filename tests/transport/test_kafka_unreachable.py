"""A Kafka cluster that cannot be reached is one clear line, not a flood.

librdkafka retries a connection several times a second and reports each attempt; kctl routes
its log through Python logging, lets one line of each kind through per interval (saying how
many were held back), and a task that fails because the cluster is down says so in the last
line of its trace, naming `bootstrap.servers`.
"""

from __future__ import annotations

import logging

import pytest
from support.broker import free_port
from support.clock import FakeClock
from support.inprocess import running_worker
from support.waiting import wait_until

from kctl.states import State
from kctl.transport.kafka import CLIENT_LOG, RepeatFilter


def record(msg: str) -> logging.LogRecord:
    return logging.LogRecord("kctl.transport.kafka.client", logging.ERROR, __file__, 1, msg,
                             (), None)


def test_repeated_client_lines_pass_once_per_interval_with_a_count():
    clock = FakeClock()
    f = RepeatFilter(interval_s=30, clock=clock)
    attempts = [record(f"Connect to ipv4#127.0.0.1:9 failed (after {i}ms)") for i in range(50)]
    passed = [r for r in attempts if f.filter(r)]
    assert len(passed) == 1, "the same line with other numbers is held back"
    assert f.filter(record("something else entirely")), "another kind of line passes"
    clock.now = 31
    later = record("Connect to ipv4#127.0.0.1:9 failed (after 7ms)")
    assert f.filter(later)
    assert later.getMessage().endswith("(49 like it in the last 30 s not shown)")


@pytest.mark.slow
def test_a_task_on_an_unreachable_cluster_fails_with_one_clear_line(tmp_path, caplog):
    port = free_port()  # nobody listens there
    caplog.set_level(logging.INFO, logger=CLIENT_LOG.name)
    with running_worker(tmp_path / "state", {"bootstrap.servers": f"127.0.0.1:{port}"}) as w:
        w.herder.create_connector("c", {
            "connector.class": "support.connectors.CounterSourceConnector",
            "topic": "t", "count": 10})
        st = wait_until(lambda: (s := w.herder.connector_status("c")).tasks and
                        s.tasks[0].state is State.FAILED and s, timeout=60,
                        message="the task FAILED")
    last = st.tasks[0].trace.strip().splitlines()[-1]
    assert last.startswith("kctl.errors.TransportError: cannot list topics: cannot reach the "
                           f"Kafka cluster at 127.0.0.1:{port} (bootstrap.servers): "), last
    client_lines = [r for r in caplog.records if r.name == CLIENT_LOG.name]
    assert len(client_lines) <= 6, [r.getMessage() for r in client_lines]

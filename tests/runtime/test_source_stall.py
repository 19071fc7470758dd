"""A source task whose producer cannot deliver says so.

Story: a worker's source task writes to a broker that then goes away. Its sends wait for
acknowledgements that do not come (the producer keeps retrying); once none came for
DELIVERY_STALL_S the task's RUNNING status carries a note saying so and since when, the
worker's `/metrics` give the moment, its log has one line for it, and `/health` names the
cluster it cannot reach.
"""

from __future__ import annotations

import logging

import httpx
from support.broker import start_broker
from support.inprocess import running_worker, unique
from support.waiting import wait_until

from kctl.runtime.tasks import source


def test_a_source_whose_sends_go_unacknowledged_says_so(tmp_path, caplog, monkeypatch):
    # test-sized: the task says it is stalled after 5 s without an acknowledgement, not 30
    monkeypatch.setattr(source, "DELIVERY_STALL_S", 5.0)
    broker = start_broker()  # its own: this story stops it
    name = unique("stall-source")
    settings = {"bootstrap.servers": broker.bootstrap,
                "topic.creation.default.replication.factor": 1}
    caplog.set_level(logging.INFO)
    try:
        with running_worker(tmp_path / "state", settings) as w:
            w.herder.put_connector_config(name, {
                "connector.class": "support.connectors.CounterSourceConnector",
                "topic": unique("stall-source-topic"), "count": "100000000",
                "per.poll": "100", "poll.sleep.ms": "20", "tasks.max": "1"})
            wait_until(lambda: any(t.records_sent > 500 for t in w.herder.worker.tasks.values()),
                       timeout=60, message="the source delivers")
            broker.stop()

            def noted():
                task = w.herder.connector_status(name).tasks[0]
                return task if task.trace and "Stalled since" in task.trace else None

            task = wait_until(noted, timeout=120, interval=0.5,
                              message="the task's status says it cannot deliver")
            assert task.state.value == "RUNNING"
            assert "sends to the Kafka cluster are not acknowledged" in task.trace

            metrics = httpx.get(f"{w.rest.url}/metrics", timeout=10).text
            assert any(m.startswith("kafka_connect_connector_task_metrics_stalled_since_ms{")
                       and f'connector="{name}"' in m and not m.endswith(" 0.0")
                       for m in metrics.splitlines())
            health = httpx.get(f"{w.rest.url}/health", timeout=30)
            assert health.status_code == 503
            assert "cannot reach its Kafka cluster" in health.json()["message"]
        assert len([r for r in caplog.records
                    if r.getMessage().startswith(f"Task {name}-0 is stalled since")]) == 1
    finally:
        if broker.proc.poll() is None:
            broker.stop()

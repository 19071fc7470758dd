"""A sink task whose consumer group hands it nothing is not silent.

Story: the sink's group `connect-<name>` on the test broker is left with a leader that
will never assign: two consumers formed it, the one that is not the leader left and the
leader left while the group was forming again (this broker then keeps naming the departed
leader, so no later member is ever given partitions; it was seen after every worker of a
cluster got Ctrl-C at once). A worker starts the sink and records wait in its topic. Once
its member has gone a rebalance timeout and a session without completing a generation,
the task says so: its RUNNING status carries a note with the reason and since when,
`/health` answers `degraded` naming the task, `/metrics` gives the moment it stalled, and
the worker's log has one line for it; the member keeps joining again as a new member.
"""

from __future__ import annotations

import logging
import time

import httpx
from support import connectors as sc
from support.cluster import SINK_CONSUMERS
from support.inprocess import produce, running_worker, unique
from support.waiting import wait_until

from kctl.transport.base import TopicSpec
from kctl.transport.kafka import KafkaTransport


def leave_a_departed_leader(transport: KafkaTransport, group: str, topic: str) -> None:
    """Two members form `group`; the follower leaves, then the leader, while it re-forms."""
    conf = {"session.timeout.ms": 4000, "heartbeat.interval.ms": 500}
    members = [transport.consumer(group, conf) for _ in range(2)]
    for m in members:
        m.subscribe([topic])

    def formed() -> bool:
        for m in members:
            m.poll_batch(10, 0.05)
        return sum(len(m.assignment()) for m in members) == 2

    wait_until(formed, timeout=60, message="the first members formed the group")
    leader = next(m for m in members if m._group.member.is_leader)
    follower = next(m for m in members if m is not leader)
    follower.close()
    leader.close()


def test_a_sink_whose_group_never_assigns_says_so_in_status_health_metrics_and_log(
        kafka_broker, tmp_path, caplog):
    topic, sink = unique("stall-topic"), unique("stall-sink")
    transport = KafkaTransport(kafka_broker.bootstrap)
    try:
        transport.admin().create_topics([TopicSpec(topic, 2)])
        leave_a_departed_leader(transport, f"connect-{sink}", topic)
        produce(transport, topic, [b'"waiting"'] * 10)
    finally:
        transport.close()

    # the member is stalled once it went two rebalance timeouts (max.poll.interval.ms) and
    # a session without a generation: test-sized, 12 s instead of 24
    settings = {"bootstrap.servers": kafka_broker.bootstrap,
                "topic.creation.default.replication.factor": 1, **SINK_CONSUMERS,
                "consumer.max.poll.interval.ms": 4000}
    caplog.set_level(logging.INFO)
    started = time.time()
    with running_worker(tmp_path / "state", settings) as w:
        w.herder.put_connector_config(sink, {
            "connector.class": "support.connectors.CollectingSinkConnector", "topics": topic,
            "tasks.max": "1", "value.converter": "StringConverter"})

        def noted() -> dict | None:
            task = w.herder.connector_status(sink).tasks[0]
            return task if task.trace and "Stalled since" in task.trace else None

        task = wait_until(noted, timeout=90, interval=0.5,
                          message="the task's status says it is stalled")
        assert task.state.value == "RUNNING"
        assert f"consumer group connect-{sink} has given this consumer no partitions" \
            in task.trace
        assert "joining again as a new member" in task.trace
        assert sc.SINK_RECEIVED[sink] == []

        health = httpx.get(f"{w.rest.url}/health", timeout=10)
        assert health.status_code == 200, "a stalled task does not take the worker down"
        assert health.json()["status"] == "degraded"
        assert f"Task {sink}-0 stalled since" in health.json()["message"]

        metrics = httpx.get(f"{w.rest.url}/metrics", timeout=10).text
        line = next(m for m in metrics.splitlines() if m.startswith(
            "kafka_connect_connector_task_metrics_stalled_since_ms{")
            and f'connector="{sink}"' in m)
        since_ms = float(line.rsplit(" ", 1)[1])
        assert started * 1000 - 1000 <= since_ms <= time.time() * 1000

        stalled_lines = [r for r in caplog.records
                         if r.getMessage().startswith(f"Task {sink}-0 is stalled since")]
        assert len(stalled_lines) == 1, "one line, not one per check"

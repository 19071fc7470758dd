"""Producer, consumer and admin settings pass through as in Kafka Connect.

The worker's `producer.*` / `consumer.*` settings, under each connector's
`producer.override.*` / `consumer.override.*`, reach every client of the connector: its
task's producer or consumer, its dead letter queue's producer and the producer of a
`dlq replay`; the worker's `admin.*` under `admin.override.*` reach the admin clients that
create a connector's topics and its dead letter queue. Where a setting has an effect these tests can see, they check the effect; a
setting the client rejects fails that task with the key named, and the worker runs on.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import pytest
from support import probes
from support.inprocess import produce, running_worker, unique
from support.waiting import wait_until

from kctl.runtime.dlq import read_topic
from kctl.states import State
from kctl.transport.base import Admin, Consumer, Producer, Transport

SOURCE = "support.connectors.CounterSourceConnector"
SINK = "support.connectors.CollectingSinkConnector"


class RecordingTransport(Transport):
    """The real transport, remembering the settings each client was made with."""

    def __init__(self, inner: Transport):
        self.inner = inner
        self.name = inner.name
        self.producers: list[dict[str, Any]] = []
        self.consumers: list[tuple[str | None, dict[str, Any]]] = []
        self.admins: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def producer(self, config: Mapping[str, Any] | None = None) -> Producer:
        with self._lock:
            self.producers.append(dict(config or {}))
        return self.inner.producer(config)

    def consumer(self, group_id: str | None, config: Mapping[str, Any] | None = None) -> Consumer:
        with self._lock:
            self.consumers.append((group_id, dict(config or {})))
        return self.inner.consumer(group_id, config)

    def admin(self, config: Mapping[str, Any] | None = None) -> Admin:
        if config is None:
            return self.inner.admin()
        with self._lock:
            self.admins.append(dict(config))
        return self.inner.admin(config)

    def close(self) -> None:
        self.inner.close()


def running(herder: Any, name: str) -> bool:
    s = herder.connector_status(name)
    return bool(s.tasks) and all(t.state is State.RUNNING for t in s.tasks)


def failed_trace(herder: Any, name: str) -> str:
    s = wait_until(lambda: (st := herder.connector_status(name)).tasks and
                   st.tasks[0].state is State.FAILED and st, timeout=30,
                   message=f"{name} FAILED")
    return s.tasks[0].trace


def test_every_producer_of_a_connector_takes_its_settings(tmp_path, transport_settings):
    recorded: list[RecordingTransport] = []

    def wrap(t: Transport) -> Transport:
        recorded.append(RecordingTransport(t))
        return recorded[0]

    topic, source, sink = unique("settings"), unique("src"), unique("snk")
    dlq = {"errors.tolerance": "all", "errors.deadletterqueue.topic.replication.factor": 1}
    settings = {**transport_settings, "producer.linger.ms": 7, "consumer.fetch.wait.max.ms": 20}
    with running_worker(tmp_path / "state", settings, wrap=wrap) as w:
        t, h = recorded[0], w.herder
        h.create_connector(source, {"connector.class": SOURCE, "topic": topic, "count": 5, **dlq,
                                    "errors.deadletterqueue.topic.name": unique("src-dlq"),
                                    "producer.override.compression.type": "gzip",
                                    "producer.override.linger.ms": "3"})
        h.create_connector(sink, {"connector.class": SINK, "topics": topic, **dlq,
                                  "errors.deadletterqueue.topic.name": unique("snk-dlq"),
                                  "producer.override.compression.type": "snappy",
                                  "consumer.override.fetch.wait.max.ms": "25"})
        wait_until(lambda: running(h, source) and running(h, sink), timeout=30)
        h.dlq_replay(source)
        h.dlq_replay(sink)

        def producers(compression: str) -> list[dict[str, Any]]:
            return [c for c in t.producers if c.get("compression.type") == compression]

        # the source's task, DLQ and replay producers: its override over the worker's
        assert len(producers("gzip")) == 3
        assert all(str(c["linger.ms"]) == "3" for c in producers("gzip"))
        # the sink's DLQ and replay producers: its override, and the worker's setting
        assert len(producers("snappy")) == 2
        assert all(str(c["linger.ms"]) == "7" for c in producers("snappy"))
        [sink_consumer] = [c for g, c in t.consumers if g == f"connect-{sink}"]
        assert str(sink_consumer["fetch.wait.max.ms"]) == "25"


def test_max_poll_records_from_consumer_settings_bounds_each_put(tmp_path, transport_settings):
    topic, worker_level, overridden = unique("polls"), unique("worker"), unique("override")
    settings = {**transport_settings, "consumer.max.poll.records": 5}
    sink = {"connector.class": "support.probes.GatedSinkConnector", "topics": topic,
            "value.converter": "JsonConverter", "value.converter.schemas.enable": "false"}
    with running_worker(tmp_path / "state", settings) as w:
        produce(w.transport, topic, [str(i).encode() for i in range(40)])
        w.herder.create_connector(worker_level, sink)
        w.herder.create_connector(overridden, {**sink, "consumer.override.max.poll.records": 9})
        for name in (worker_level, overridden):
            wait_until(lambda n=name: len(probes.WRITTEN[n]) >= 40, timeout=60,
                       message=f"every record at {name}")
            assert sorted(probes.WRITTEN[name]) == list(range(40))
        assert max(probes.PUT_SIZES[worker_level]) == 5
        assert max(probes.PUT_SIZES[overridden]) == 9, "the connector's override wins"


def test_an_unusable_max_poll_records_fails_the_task_naming_the_key(tmp_path, transport_settings):
    name = unique("bad-polls")
    with running_worker(tmp_path / "state", transport_settings) as w:
        w.herder.create_connector(name, {"connector.class": SINK, "topics": unique("t"),
                                         "consumer.override.max.poll.records": "lots"})
        trace = failed_trace(w.herder, name)
        assert "consumer.override.max.poll.records" in trace and "'lots'" in trace


@pytest.fixture
def broker_settings(kafka_broker) -> dict[str, Any]:
    return {"bootstrap.servers": kafka_broker.bootstrap,
            "topic.creation.default.replication.factor": 1}


def test_a_producer_override_takes_effect_on_the_broker(tmp_path, broker_settings):
    # message.max.bytes is checked by the client: a 5000-byte value passes the default and
    # is refused by a producer whose override caps it at 2000 bytes
    limited, unlimited = unique("limited"), unique("unlimited")
    source = {"connector.class": "support.probes.KeyedSourceConnector", "count": 10,
              "big": "5", "big.size": 5000}
    with running_worker(tmp_path / "state", broker_settings) as w:
        h = w.herder
        h.create_connector(limited, {**source, "topic": unique("limited"),
                                     "producer.override.message.max.bytes": "2000"})
        h.create_connector(unlimited, {**source, "topic": unique("unlimited")})

        trace = failed_trace(h, limited)
        assert "KAFKA_PRODUCE" in trace and "too large" in trace, trace
        wait_until(lambda: len(read_topic(w.transport, source_topic(h, unlimited))) == 10,
                   timeout=30, message="every record produced without the override")
        assert running(h, unlimited)


def source_topic(herder: Any, name: str) -> str:
    return herder.connector_config(name)["topic"]


def test_a_setting_the_client_rejects_fails_its_task_naming_the_key(tmp_path, broker_settings):
    acks, reset, dlq_codec, healthy = (unique("acks"), unique("reset"), unique("codec"),
                                       unique("healthy"))
    with running_worker(tmp_path / "state", broker_settings) as w:
        h = w.herder
        h.create_connector(healthy, {"connector.class": SOURCE, "topic": unique("t")})
        h.create_connector(acks, {"connector.class": SOURCE, "topic": unique("t"),
                                  "producer.override.acks": "banana"})
        h.create_connector(reset, {"connector.class": SINK, "topics": unique("t"),
                                   "consumer.override.auto.offset.reset": "sideways"})
        # the dead letter queue's producer takes the same settings, and fails the same way
        h.create_connector(dlq_codec, {"connector.class": SINK, "topics": unique("t"),
                                       "errors.tolerance": "all",
                                       "errors.deadletterqueue.topic.name": unique("dlq"),
                                       "errors.deadletterqueue.topic.replication.factor": 1,
                                       "producer.override.compression.type": "nope"})

        for name, key, value in ((acks, "producer.override.acks", "banana"),
                                 (reset, "consumer.override.auto.offset.reset", "sideways"),
                                 (dlq_codec, "producer.override.compression.type", "nope")):
            trace = failed_trace(h, name)
            assert f"Invalid {key.split('.')[0]} setting {key} = '{value}'" in trace, trace
            assert f"connector {name}" in trace

        # the worker carries on: the other connector runs, the herder answers
        wait_until(lambda: running(h, healthy), timeout=30)
        assert sorted(h.connectors()) == sorted([acks, reset, dlq_codec, healthy])


def test_sink_assignment_strategies_in_java_names_work_on_the_broker(tmp_path, broker_settings):
    """Kafka Connect users write Java class names; kctl runs the assignors itself (the same
    ones `kctl rebalance explain --kind consumer` shows), so Kafka's names, the short names
    and plain sticky (which librdkafka lacks) all work, and an unknown one is refused."""
    topic = unique("strategy")
    java, sticky, unknown = unique("java"), unique("sticky"), unique("unknown")
    sink = {"connector.class": "support.probes.GatedSinkConnector", "topics": topic,
            "value.converter": "JsonConverter", "value.converter.schemas.enable": "false"}
    with running_worker(tmp_path / "state", broker_settings) as w:
        produce(w.transport, topic, [str(i).encode() for i in range(20)])
        w.herder.create_connector(java, {
            **sink, "consumer.override.partition.assignment.strategy":
            "org.apache.kafka.clients.consumer.RangeAssignor,"
            "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"})
        w.herder.create_connector(sticky, {
            **sink, "consumer.override.partition.assignment.strategy": "sticky"})
        w.herder.create_connector(unknown, {
            **sink, "consumer.override.partition.assignment.strategy": "range,fastest"})
        for name in (java, sticky):
            wait_until(lambda name=name: len(probes.WRITTEN[name]) >= 20, timeout=60,
                       message=f"every record through {name}'s strategy")
            assert sorted(probes.WRITTEN[name]) == list(range(20))
        trace = failed_trace(w.herder, unknown)
        assert "partition.assignment.strategy" in trace and "fastest" in trace, trace


def test_the_admins_that_create_a_connectors_topics_take_its_admin_overrides(
        tmp_path, transport_settings):
    recorded: list[RecordingTransport] = []

    def wrap(t: Transport) -> Transport:
        recorded.append(RecordingTransport(t))
        return recorded[0]

    topic, dlq = unique("admin-settings"), unique("admin-dlq")
    settings = {**transport_settings, "admin.socket.timeout.ms": 41_000,
                "admin.request.timeout.ms": 29_000}
    with running_worker(tmp_path / "state", settings, wrap=wrap) as w:
        t, h = recorded[0], w.herder
        source = unique("src")
        h.create_connector(source, {"connector.class": SOURCE, "topic": topic, "count": 5,
                                    "errors.tolerance": "all",
                                    "errors.deadletterqueue.topic.name": dlq,
                                    "errors.deadletterqueue.topic.replication.factor": 1,
                                    "admin.override.socket.timeout.ms": "43000"})
        wait_until(lambda: running(h, source), timeout=30)
        wait_until(lambda: topic in w.transport.admin().list_topics(), timeout=30,
                   message="the source's topic created")
    # one admin for the dead letter queue, one for the topic: the connector's override
    # over the worker's admin.socket.timeout.ms, the worker's admin.request.timeout.ms kept
    assert len(t.admins) == 2
    assert all(str(a["socket.timeout.ms"]) == "43000" for a in t.admins)
    assert all(str(a["request.timeout.ms"]) == "29000" for a in t.admins)


def test_an_admin_override_the_client_rejects_fails_the_task_naming_it(tmp_path, kafka_broker):
    settings = {"bootstrap.servers": kafka_broker.bootstrap,
                "topic.creation.default.replication.factor": 1}
    with running_worker(tmp_path / "state", settings) as w:
        source = unique("src")
        w.herder.create_connector(source, {"connector.class": SOURCE,
                                           "topic": unique("admin-rejected"), "count": 5,
                                           "admin.override.no.such.setting": "1"})
        trace = failed_trace(w.herder, source)
    assert "admin.override.no.such.setting" in trace


def test_the_workers_fetch_wait_is_every_consumers_and_a_consumers_own_wins(tmp_path,
                                                                              kafka_broker):
    """`fetch.max.wait.ms` reaches every consumer a worker opens, its internal topics'
    readers too; Kafka's 500 ms when unset; a consumer's own setting wins."""
    from kctl.launch import build_transport
    from kctl.runtime.worker_config import WorkerConfig

    def transport(**extra: Any) -> Any:
        return build_transport(WorkerConfig({"bootstrap.servers": kafka_broker.bootstrap,
                                             "state.dir": str(tmp_path / unique("s")),
                                             **extra}))

    def wait_of(consumer: Any) -> int:
        wait = int(consumer._conf["fetch.wait.max.ms"])
        consumer.close()
        return wait

    tuned, default = transport(**{"fetch.max.wait.ms": 120}), transport()
    try:
        assert wait_of(tuned.consumer(None, {"kctl.passive": "true"})) == 120  # a log reader
        assert wait_of(tuned.consumer(unique("g"), {})) == 120
        assert wait_of(tuned.consumer(unique("g"), {"fetch.wait.max.ms": 25})) == 25
        assert wait_of(default.consumer(None, {})) == 500
    finally:
        tuned.close()
        default.close()

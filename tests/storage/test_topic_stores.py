"""A distributed worker's stores on compacted topics, on the embedded log and on Kafka.

Two stores on the same topic stand for two workers: what one writes, the other reads back
from the log, in order, with its listeners told; a store started later restores every
connector, target state, status and offset; the topics hold Kafka Connect's keys and JSON
values; a topic that is not compacted, or holds someone else's records, is refused with a
message that names the topic and what to do.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator

import pytest

from kctl.errors import ConfigError
from kctl.states import State, TargetState
from kctl.storage.configs import (
    ConfigEvent,
    ConnectorConfigRemoved,
    ConnectorConfigUpdated,
    TaskConfigsUpdated,
)
from kctl.storage.offsets import serialize_key, serialize_value
from kctl.storage.topic_log import LogTopic, TopicBackedLog
from kctl.storage.topic_stores import (
    KafkaConfigBackingStore,
    KafkaOffsetBackingStore,
    KafkaStatusBackingStore,
)
from kctl.transport.base import ProducerRecord, TopicSpec, Transport
from kctl.transport.embedded import EmbeddedTransport
from kctl.transport.kafka import KafkaTransport


@pytest.fixture(params=["embedded", "kafka"])
def transports(request, tmp_path) -> Iterator[tuple[Transport, Transport]]:
    """Two workers' transports to one log (the embedded log is one process's: shared)."""
    if request.param == "kafka":
        bootstrap = request.getfixturevalue("kafka_broker").bootstrap
        a, b = KafkaTransport(bootstrap), KafkaTransport(bootstrap)
    else:
        a = b = EmbeddedTransport(tmp_path / "state")
    yield a, b
    a.close()
    b.close()


@pytest.fixture
def settings() -> dict[str, object]:
    suffix = uuid.uuid4().hex[:8]
    return {"group.id": f"cluster-{suffix}",
            "config.storage.topic": f"configs-{suffix}",
            "status.storage.topic": f"status-{suffix}",
            "offset.storage.topic": f"offsets-{suffix}",
            "config.storage.replication.factor": 1,
            "status.storage.replication.factor": 1,
            "offset.storage.replication.factor": 1,
            "offset.storage.partitions": 3}


class Events:
    def __init__(self) -> None:
        self.seen: list[ConfigEvent] = []

    def __call__(self, event: ConfigEvent) -> None:
        self.seen.append(event)


def raw_records(t: Transport, topic: str) -> dict[str, object]:
    """What any Kafka tool would show: keys as text, values as JSON (last per key)."""
    seen: dict[str, object] = {}
    log = TopicBackedLog(t, LogTopic(topic), lambda r: seen.__setitem__(
        r.key.decode(), None if r.value is None else json.loads(r.value)))
    log.start()
    log.stop()
    return seen


def test_config_changes_reach_every_worker_through_the_log(transports, settings):
    ta, tb = transports
    w1 = KafkaConfigBackingStore(ta, settings)
    w1.start()
    w1_events = Events()
    w1.add_listener(w1_events)
    w2 = KafkaConfigBackingStore(tb, settings)
    w2.start()
    w2_events = Events()
    w2.add_listener(w2_events)

    # w1 (the leader) creates a connector and writes its task configs
    w1.put_connector_config("clicks", {"connector.class": "FileSource", "tasks.max": "2"},
                            TargetState.PAUSED)
    w1.put_task_configs("clicks", [{"task": "0"}, {"task": "1"}])
    # w1's own listener heard it from the log, when the write returned
    assert ConnectorConfigUpdated("clicks") in w1_events.seen
    assert TaskConfigsUpdated("clicks", (0, 1)) in w1_events.seen

    w2.read_to_end()
    assert w2.connector_config("clicks") == {"connector.class": "FileSource", "tasks.max": "2"}
    assert w2.task_configs("clicks") == [{"task": "0"}, {"task": "1"}]
    assert w2.target_state("clicks") is TargetState.PAUSED
    assert w2_events.seen == w1_events.seen  # the same changes, in the same order
    assert w2.offset == w1.offset > 0
    topic = raw_records(ta, settings["config.storage.topic"])
    assert topic["commit-clicks"] == {"tasks": 2}
    assert topic["task-clicks-1"] == {"properties": {"task": "1"}}
    assert topic["target-state-clicks"]["state"] == "PAUSED"

    # a deletion is a tombstone every worker applies
    w2.remove_connector("clicks")
    w1.read_to_end()
    assert not w1.contains("clicks") and ConnectorConfigRemoved("clicks") in w1_events.seen
    w1.put_connector_config("orders", {"connector.class": "FileSink"})
    w1.stop()
    w2.stop()

    # a worker started after everyone stopped restores the cluster's configs
    w3 = KafkaConfigBackingStore(ta, settings)
    w3.start()
    assert w3.connector_names() == ["orders"]
    w3.stop()

    topic = raw_records(ta, settings["config.storage.topic"])
    assert topic["connector-orders"] == {"properties": {"connector.class": "FileSink"}}
    assert topic["connector-clicks"] is None


def test_statuses_are_shared_and_restored(transports, settings):
    ta, tb = transports
    w1 = KafkaStatusBackingStore(ta, settings)
    w2 = KafkaStatusBackingStore(tb, settings)
    w1.start()
    w2.start()
    w1.put_connector_state("clicks", State.RUNNING, "w1:8083")
    w1.put_task_state("clicks", 0, State.FAILED, "w1:8083", trace="boom")
    w2.put_task_state("clicks", 1, State.RUNNING, "w2:8083")
    w1.read_to_end()
    w2.read_to_end()
    for store in (w1, w2):
        assert store.connector_state("clicks").state is State.RUNNING
        assert store.task_state("clicks", 0) == (State.FAILED, "w1:8083", "boom")
        assert store.task_state("clicks", 1).worker_id == "w2:8083"
    w1.stop()
    w2.stop()
    restored = KafkaStatusBackingStore(ta, settings)
    restored.start()
    assert [t.task for t in restored.tasks("clicks")] == [0, 1]
    restored.stop()
    topic = raw_records(ta, settings["status.storage.topic"])
    assert topic["status-task-clicks-0"]["state"] == "FAILED"
    assert topic["status-connector-clicks"]["worker_id"] == "w1:8083"


def test_source_offsets_are_kafka_connects_bytes(transports, settings):
    ta, tb = transports
    w1 = KafkaOffsetBackingStore(ta, settings)
    w2 = KafkaOffsetBackingStore(tb, settings)
    w1.start()
    w2.start()
    key = serialize_key("clicks", {"file": "/data/a.log"})
    other = serialize_key("clicks", {"file": "/data/b.log"})
    w1.set({key: serialize_value({"position": 42}), other: b'{"position":1}'}).result(30)
    assert w2.get([key])[key] == b'{"position":42}'
    w2.set({other: None}).result(30)  # a tombstone
    assert w1.get([other]) == {other: None}
    w1.stop()
    w2.stop()
    restored = KafkaOffsetBackingStore(ta, settings)
    restored.start()
    assert restored.snapshot() == {key: b'{"position":42}'}
    restored.stop()


def test_an_offset_commit_is_done_once_acknowledged_even_while_its_reader_is_behind(
        transports, settings):
    """As Kafka's KafkaOffsetBackingStore: `set` completes when the broker acknowledged the
    records; reading them back is for `get` and `snapshot`. A worker whose log reader lags
    (hundreds of tasks committing) still commits, and the others read what it wrote."""
    gate = threading.Event()

    class Lagging(KafkaOffsetBackingStore):
        def _on_record(self, record) -> None:
            gate.wait(30)  # the reader is stuck on the first record it sees
            super()._on_record(record)

    ta, tb = transports
    w1, w2 = Lagging(ta, settings, timeout=3), KafkaOffsetBackingStore(tb, settings)
    w1.start()
    w2.start()
    key = serialize_key("clicks", {"file": "/data/a.log"})
    try:
        w1.set({key: serialize_value({"position": 7})}).result(10)
        assert w2.get([key]) == {key: b'{"position":7}'}
    finally:
        gate.set()
        w1.stop()
        w2.stop()


def test_a_topic_that_is_not_compacted_is_refused(transports, settings):
    ta, _ = transports
    ta.admin().create_topics([TopicSpec(settings["config.storage.topic"], 1, 1,
                                        {"cleanup.policy": "delete"})])
    store = KafkaConfigBackingStore(ta, settings)
    with pytest.raises(ConfigError, match=r"cleanup.policy=delete.*needs cleanup.policy=compact"):
        store.start()


def test_a_config_topic_with_another_layout_is_refused(transports, settings):
    ta, _ = transports
    topic = settings["config.storage.topic"]
    ta.admin().create_topics([TopicSpec(topic, 1, 1, {"cleanup.policy": "compact"})])
    p = ta.producer()
    p.send(ProducerRecord(topic, b'{"order": 1}', b"order-17"))
    assert p.flush(30) == 0
    p.close()
    store = KafkaConfigBackingStore(ta, settings)
    with pytest.raises(ConfigError, match=r"not Kafka Connect config records.*order-17"):
        store.start()


def test_the_config_topic_has_one_partition(transports, settings):
    ta, _ = transports
    with pytest.raises(ConfigError, match=r"config\.storage\.partitions must be 1"):
        KafkaConfigBackingStore(ta, {**settings, "config.storage.partitions": 3})
    with pytest.raises(ConfigError, match=r"status\.storage\.topic is required"):
        KafkaStatusBackingStore(ta, {})


def test_the_config_topic_belongs_to_the_first_group_and_refuses_another(transports, settings):
    """A worker of another group.id on the same topics would run every connector a second
    time: the first group to start records itself as the topic's owner, its own workers
    are welcome later, and a worker of another group is refused with the reason."""
    ta, tb = transports
    first = KafkaConfigBackingStore(ta, settings)
    first.start()
    first.claim("cluster-a", "10.0.0.1:8083", 1_700_000_000_000)
    first.put_connector_config("orders", {"connector.class": "FileSink"})
    first.stop()

    same = KafkaConfigBackingStore(tb, settings)
    same.start()
    same.claim("cluster-a", "10.0.0.2:8083", 1_700_000_100_000)  # a worker of the group
    assert same.connector_names() == ["orders"]
    same.stop()

    other = KafkaConfigBackingStore(tb, settings)
    other.start()
    with pytest.raises(ConfigError) as refused:
        other.claim("cluster-b", "10.0.0.3:8083", 1_700_000_200_000)
    message = str(refused.value)
    assert f"topic {settings['config.storage.topic']}" in message
    assert "'cluster-a'" in message and "'cluster-b'" in message and "10.0.0.1:8083" in message
    other.stop()
    assert raw_records(tb, settings["config.storage.topic"])["kctl-group"]["group.id"] == \
        "cluster-a"


def test_a_hundred_reads_to_the_end_finish_while_the_log_is_written_all_the_time(transports):
    """A hundred source tasks starting at once each read the offsets topic to its end while
    the tasks already running keep committing offsets to it: every read finishes, and each
    has seen every record acknowledged before it began."""
    a, b = transports
    topic = f"busy-{uuid.uuid4().hex[:8]}"
    a.admin().create_topics([TopicSpec(topic, 3, 1, {"cleanup.policy": "compact"})])
    consumed = 0

    def count(_record) -> None:
        nonlocal consumed
        consumed += 1

    reader = TopicBackedLog(b, LogTopic(topic, 3), count)
    reader.start()
    writing, acked = threading.Event(), [0]

    def write() -> None:
        producer = a.producer()
        i = 0
        while not writing.is_set():
            for _ in range(20):
                producer.send(ProducerRecord(topic, b"v", f"k{i}".encode(),  # none compacted
                                             partition=i % 3))
                i += 1
            assert producer.flush(10) == 0
            acked[0] = i
        producer.close()

    seen_short: list[tuple[int, int]] = []
    failures: list[BaseException] = []

    def read() -> None:
        before = acked[0]
        try:
            reader.read_to_end(timeout=30)
        except BaseException as e:  # reported below
            failures.append(e)
            return
        if consumed < before:
            seen_short.append((consumed, before))

    writer = threading.Thread(target=write)
    writer.start()
    try:
        readers = [threading.Thread(target=read) for _ in range(100)]
        for r in readers:
            r.start()
        for r in readers:
            r.join(60)
    finally:
        writing.set()
        writer.join(30)
        reader.stop()
    assert failures == []
    assert seen_short == [], "a read returned before records acknowledged earlier"
    assert acked[0] > 0


def test_a_log_starts_while_its_topic_is_written_all_the_time(transports):
    """A worker joining a cluster whose tasks commit offsets all the time reads the offsets
    topic to its end as of its start, and starts: it does not chase an end that keeps
    moving while its fetches arrive a little later than the writes."""
    a, b = transports
    topic = f"moving-{uuid.uuid4().hex[:8]}"
    a.admin().create_topics([TopicSpec(topic, 3, 1, {"cleanup.policy": "compact"})])
    writing, acked = threading.Event(), [0]

    def write() -> None:
        producer = a.producer()
        i = 0
        while not writing.is_set():
            producer.send(ProducerRecord(topic, b"v", f"k{i}".encode(), partition=i % 3))
            i += 1
            assert producer.flush(10) == 0
            acked[0] = i
            writing.wait(0.01)
        producer.close()

    writer = threading.Thread(target=write)
    writer.start()
    consumed = 0

    def count(_record) -> None:
        nonlocal consumed
        consumed += 1

    try:
        while acked[0] < 50:
            writing.wait(0.05)
        before = acked[0]
        log = TopicBackedLog(b, LogTopic(topic, 3), count)
        log.start(timeout=15)
        assert consumed >= before, "it started before reading what was written before it"
        log.stop()
    finally:
        writing.set()
        writer.join(30)

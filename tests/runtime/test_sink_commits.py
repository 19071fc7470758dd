"""On a broker, a sink's offsets live in the consumer group `connect-<name>`, and only what
the sink has flushed is committed there.

The sink takes records in put() but does not flush them until the test lets it; until then
its pre_commit says nothing is safe. The group is read with a plain confluent-kafka
consumer, as any Kafka tool would read it.
"""

from __future__ import annotations

from confluent_kafka import Consumer as KConsumer
from confluent_kafka import TopicPartition as KTP
from support import probes
from support.inprocess import produce, running_worker, unique
from support.waiting import wait_until

from kctl.api.records import TopicPartition


def committed(bootstrap: str, group: str, topic: str) -> int | None:
    c = KConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                   "enable.auto.commit": False})
    try:
        [tp] = c.committed([KTP(topic, 0)], timeout=10)
    finally:
        c.close()
    return tp.offset if tp.offset >= 0 else None


def test_a_sink_commits_to_its_group_only_what_it_has_flushed(tmp_path, kafka_broker):
    settings = {"bootstrap.servers": kafka_broker.bootstrap,
                "topic.creation.default.replication.factor": 1}
    topic, name = unique("gated"), unique("gated-sink")
    group = f"connect-{name}"
    with running_worker(tmp_path / "state", settings) as w:
        produce(w.transport, topic, [str(i).encode() for i in range(30)])
        w.herder.create_connector(name, {
            "connector.class": "support.probes.GatedSinkConnector", "topics": topic,
            "value.converter": "JsonConverter", "value.converter.schemas.enable": "false"})

        # every record was put, and several commit rounds passed: nothing was flushed, so
        # nothing is committed
        wait_until(lambda: len(probes.WRITTEN[name]) >= 30, timeout=60, message="all put")
        rounds = len(probes.PRE_COMMITS[name])
        wait_until(lambda: len(probes.PRE_COMMITS[name]) >= rounds + 3, timeout=30,
                   message="three more commit rounds")
        assert committed(kafka_broker.bootstrap, group, topic) is None

        # the sink flushes: the group holds exactly the offset the sink said was flushed
        probes.FLUSH_ALLOWED[name].set()
        wait_until(lambda: committed(kafka_broker.bootstrap, group, topic) == 30, timeout=30,
                   message="the flushed offset committed to connect-<name>")
        assert probes.PRE_COMMITS[name][-1] == {TopicPartition(topic, 0): 30}
        assert w.herder.connector_offsets(name) == [
            {"partition": {"kafka_topic": topic, "kafka_partition": 0},
             "offset": {"kafka_offset": 30}}]

"""Sink consumers on Kafka are group members run by kctl's own protocol and assignors.

Stories: Kafka's admin clients see an ordinary consumer group (its members and their
committed offsets, so its lag); a member whose heartbeats stop
(as a SIGSTOPped worker's do) is evicted, its partitions go to the other member, and when
it comes back its commit is refused and it is told its partitions were lost, not revoked.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions
from confluent_kafka import TopicPartition as KTP
from confluent_kafka.admin import AdminClient
from kafka.admin import KafkaAdminClient
from support.waiting import wait_until

from kctl.api.records import TopicPartition
from kctl.errors import CommitFailedError
from kctl.transport.base import ProducerRecord, TopicSpec
from kctl.transport.kafka import KafkaConsumer, KafkaTransport

pytestmark = pytest.mark.broker


class DescribeGroups(KafkaAdminClient):
    """kafka-python's admin client, minus its reading of authorized operations (the test
    broker answers with bits it does not know)."""

    def _process_acl_operations(self, group: dict) -> dict:
        group.pop("authorized_operations", None)
        return group


@pytest.fixture
def transport(kafka_broker):
    t = KafkaTransport(kafka_broker.bootstrap)
    yield t
    t.close()


def topic_of(t: KafkaTransport, partitions: int) -> tuple[str, set[TopicPartition]]:
    name = f"cg-{uuid.uuid4().hex[:10]}"
    t.admin().create_topics([TopicSpec(name, partitions)])
    return name, {TopicPartition(name, p) for p in range(partitions)}


def poll_until(consumers: list[KafkaConsumer], condition, message: str, timeout: float = 45):
    def step() -> bool:
        for c in consumers:
            c.poll_batch(100, 0.05)
        return condition()

    wait_until(step, timeout=timeout, message=message)


def test_kafka_tooling_sees_the_group_its_members_and_their_offsets(transport, kafka_broker):
    topic, everything = topic_of(transport, 4)
    group = f"connect-{uuid.uuid4().hex[:8]}"
    a = transport.consumer(group, {"client.id": "connector-consumer-sink-0"})
    b = transport.consumer(group, {"client.id": "connector-consumer-sink-1"})
    a.subscribe([topic])
    b.subscribe([topic])
    poll_until([a, b], lambda: a.assignment() | b.assignment() == everything
               and len(a.assignment()) == 2, "the partitions split over both members")
    a.commit({tp: 3 for tp in a.assignment()})
    b.commit({tp: 5 for tp in b.assignment()})

    tool = DescribeGroups(bootstrap_servers=kafka_broker.bootstrap)
    [described] = tool.describe_groups([group]).values()
    tool.close()
    assert (described["group_state"], described["protocol_type"]) == ("Stable", "consumer")
    # the broker names each member after its client id; it does not return the members'
    # assignments (Kafka does, decoded by its tools as ConsumerProtocol)
    assert sorted(m["member_id"].rsplit("-", 5)[0] for m in described["members"]) == [
        "connector-consumer-sink-0", "connector-consumer-sink-1"]
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    request = ConsumerGroupTopicPartitions(group, [KTP(tp.topic, tp.partition)
                                                   for tp in sorted(everything)])
    offsets = admin.list_consumer_group_offsets([request])[group].result(30)
    assert {TopicPartition(p.topic, p.partition): p.offset
            for p in offsets.topic_partitions} == \
        {**{tp: 3 for tp in a.assignment()}, **{tp: 5 for tp in b.assignment()}}
    a.close()
    b.close()


def test_a_stalled_member_is_evicted_and_its_late_commit_refused(transport):
    topic, everything = topic_of(transport, 2)
    group = f"connect-{uuid.uuid4().hex[:8]}"
    conf = {"session.timeout.ms": 3000, "heartbeat.interval.ms": 300}
    a, b = transport.consumer(group, conf), transport.consumer(group, conf)
    revoked: list[TopicPartition] = []
    lost: list[TopicPartition] = []
    a.subscribe([topic], on_revoke=revoked.extend, on_lost=lost.extend)
    b.subscribe([topic])
    poll_until([a, b], lambda: len(a.assignment()) == 1 and len(b.assignment()) == 1,
               "one partition each")
    p = ProducerRecord(topic, b"x", partition=0)
    producer = transport.producer()
    producer.send(p)
    producer.flush(10)
    producer.close()
    held_by_a = set(a.assignment())

    # a's heartbeats stop, as every thread of a SIGSTOPped worker stops; b keeps polling
    group_a = a._group
    assert group_a is not None
    group_a._closing.set()
    group_a._thread.join(5)
    poll_until([b], lambda: b.assignment() == everything,
               "the broker evicted a and b holds every partition", timeout=60)

    # a comes back: what it still believes it holds is not its own any more
    with pytest.raises(CommitFailedError, match="moved this member's partitions"):
        a.commit({tp: 1 for tp in held_by_a})
    passive = transport.consumer(group, {"kctl.passive": "true"})
    assert passive.committed(held_by_a) == {tp: None for tp in held_by_a}
    group_a._closing.clear()
    group_a._thread = type(group_a._thread)(target=group_a._run, daemon=True)
    group_a._thread.start()
    poll_until([a, b], lambda: not a.assignment() & b.assignment() and
               len(a.assignment()) == 1, "a rejoined and took a partition back")
    assert sorted(lost) == sorted(held_by_a) and revoked == []
    for c in (a, b, passive):
        c.close()

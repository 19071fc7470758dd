"""KafkaTransport against the real broker: produce, consume in a group, commit."""

import uuid

from kctl.api.records import TopicPartition
from kctl.transport.base import ProducerRecord, TopicSpec
from kctl.transport.kafka import KafkaTransport


def test_produce_then_group_consume_and_commit(kafka_broker):
    t = KafkaTransport(kafka_broker.bootstrap)
    topic = f"t-{uuid.uuid4().hex[:8]}"
    t.admin().create_topics([TopicSpec(topic, 2)])
    assert t.admin().list_topics()[topic] == 2
    p = t.producer()
    acks = []
    for i in range(100):
        p.send(ProducerRecord(topic, f"v{i}".encode(), f"k{i}".encode(),
                              headers=(("h", b"x"),)), lambda md, err: acks.append((md, err)))
    assert p.flush(10) == 0
    assert len(acks) == 100 and all(err is None for _, err in acks)

    c = t.consumer(f"g-{uuid.uuid4().hex[:6]}", {"fetch.wait.max.ms": 10})
    assigned = []
    c.subscribe([topic], on_assign=assigned.extend)
    seen = []
    for _ in range(100):
        seen.extend(c.poll_batch(500, 0.2))
        if len(seen) >= 100:
            break
    assert sorted(r.value for r in seen) == sorted(f"v{i}".encode() for i in range(100))
    assert seen[0].headers == (("h", b"x"),)
    assert {tp.topic for tp in assigned} == {topic}
    ends = {}
    for r in seen:
        ends[r.topic_partition] = r.offset + 1
    c.commit(ends)
    assert c.committed(ends) == ends
    c.close()
    p.close()


def test_committed_is_none_for_unknown_group(kafka_broker):
    t = KafkaTransport(kafka_broker.bootstrap)
    topic = f"t-{uuid.uuid4().hex[:8]}"
    t.admin().create_topics([TopicSpec(topic, 1)])
    c = t.consumer(f"g-{uuid.uuid4().hex[:6]}")
    assert c.committed([TopicPartition(topic, 0)]) == {TopicPartition(topic, 0): None}
    c.close()

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

    # session test-sized: the test broker completes a JoinGroup half a session after it began
    c = t.consumer(f"g-{uuid.uuid4().hex[:6]}", {"fetch.wait.max.ms": 10,
                                                 "session.timeout.ms": 3000})
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


def test_a_keyless_batch_spreads_over_the_topics_partitions(kafka_broker):
    """Each keyless batch a source sends lands on every partition in a fair share, so the
    sink tasks reading the topic share the load (librdkafka's sticky partitioner put a
    whole batch on one partition: one source's lines split 81 / 62,588 / 37,331)."""
    import collections

    import pyarrow as pa

    t = KafkaTransport(kafka_broker.bootstrap)
    topic = f"t-{uuid.uuid4().hex[:8]}"
    t.admin().create_topics([TopicSpec(topic, 3)])
    p = t.producer()
    c = t.consumer(None, {"fetch.wait.max.ms": 10})
    c.assign([TopicPartition(topic, n) for n in range(3)])
    rows = 3000
    for batch in range(3):
        done = []
        p.send_batch(topic, pa.array([f"{batch} {i}".encode() for i in range(rows)],
                                     pa.binary()), done.append)
        assert p.flush(30) == 0
        assert done and not done[0].errors
        per_partition: collections.Counter = collections.Counter()
        for _ in range(500):
            for r in c.poll_batch(5000, 0.2):
                per_partition[r.partition] += 1
            if sum(per_partition.values()) >= rows:
                break
        assert sum(per_partition.values()) == rows
        assert min(per_partition[n] for n in range(3)) > rows // 5, per_partition
    c.close()
    p.close()


def test_a_second_source_batch_queues_while_the_first_waits_for_its_acks(kafka_broker):
    """Sources send 100k-record batches: the producer takes the next one without waiting
    for the last one's acks (librdkafka's own queue, 100k messages, made each batch wait)."""
    import pyarrow as pa

    t = KafkaTransport(kafka_broker.bootstrap)
    topic = f"t-{uuid.uuid4().hex[:8]}"
    t.admin().create_topics([TopicSpec(topic, 1)])
    p = t.producer()
    done: list = []
    for batch in range(2):
        p.send_batch(topic, pa.array([f"{batch}-{i}".encode() for i in range(100_000)],
                                     pa.binary()), done.append)
    # nothing has served a delivery report yet: both batches are queued in the producer
    assert len(p._p) > 100_000
    assert p.flush(60) == 0
    assert len(done) == 2 and not done[0].errors and not done[1].errors
    assert sum(done[1].ends.values()) == 200_000
    p.close()

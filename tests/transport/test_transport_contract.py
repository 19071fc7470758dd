"""What the runtime relies on from a transport, checked on the embedded log and on Kafka.

The worker runs unchanged on either; these are the promises it leans on: what was produced
is read back with its key, headers, timestamp and null value; a key always lands in the
partition Java Kafka clients would choose (so kctl and Kafka Connect workers agree);
explicit partitions are honoured; a consumer group resumes from its committed offsets; seek,
position, pause and resume behave; topics are created (compacted too), listed and deleted.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Iterator

import pyarrow as pa
import pytest
from support.waiting import wait_until

from kctl.api.records import TopicPartition
from kctl.transport.base import (
    BatchDelivery,
    Consumer,
    LogRecord,
    ProducerRecord,
    RebalanceCallback,
    TopicSpec,
    Transport,
)
from kctl.transport.embedded import EmbeddedTransport, partition_for_key
from kctl.transport.kafka import KafkaTransport


@pytest.fixture(params=["embedded", "kafka"])
def transport(request, tmp_path) -> Iterator[Transport]:
    if request.param == "kafka":
        t: Transport = KafkaTransport(request.getfixturevalue("kafka_broker").bootstrap)
    else:
        t = EmbeddedTransport(tmp_path / "state")
    yield t
    t.close()


# Group members, test-sized: the test broker completes a JoinGroup half a session after
# the first member's, so the consumer's default 10 s made every join take 5 s
GROUP = {"session.timeout.ms": 3000, "heartbeat.interval.ms": 500}


def new_topic(t: Transport, partitions: int = 3, **config: str) -> str:
    name = f"contract-{uuid.uuid4().hex[:10]}"
    t.admin().create_topics([TopicSpec(name, partitions, 1, config)])
    return name


def produce(t: Transport, records: list[ProducerRecord]) -> list:
    acks: list = [None] * len(records)
    p = t.producer()
    for i, r in enumerate(records):
        p.send(r, lambda md, err, i=i: acks.__setitem__(i, (md, err)))
    assert p.flush(30) == 0
    p.close()
    assert all(a is not None and a[1] is None for a in acks), acks
    return [md for md, _ in acks]


def drain(c: Consumer, want: int, timeout: float = 30) -> list[LogRecord]:
    out: list[LogRecord] = []
    deadline = time.monotonic() + timeout
    while len(out) < want and time.monotonic() < deadline:
        out.extend(c.poll_batch(1000, 0.2))
    return out


def reader(t: Transport, topic: str, partitions: int) -> Consumer:
    c = t.consumer(None, {"kctl.passive": "true"})
    c.assign([TopicPartition(topic, p) for p in range(partitions)])
    return c


def test_records_come_back_as_they_were_sent(transport):
    topic = new_topic(transport, 1)
    sent = [ProducerRecord(topic, b"v0", b"k0", headers=(("h", b"1"), ("h", b"2"))),
            ProducerRecord(topic, None, b"k1"),  # a tombstone
            ProducerRecord(topic, b"v2", None, headers=(("empty", None),)),
            ProducerRecord(topic, b"v3", b"k3", timestamp=1_700_000_000_123)]
    mds = produce(transport, sent)
    assert [(m.topic, m.partition, m.offset) for m in mds] == [(topic, 0, i) for i in range(4)]
    c = reader(transport, topic, 1)
    got = drain(c, 4)
    c.close()
    assert [(r.offset, r.key, r.value) for r in got] == \
        [(0, b"k0", b"v0"), (1, b"k1", None), (2, None, b"v2"), (3, b"k3", b"v3")]
    assert got[0].headers == (("h", b"1"), ("h", b"2"))
    assert got[2].headers == (("empty", None),)
    assert got[3].timestamp == 1_700_000_000_123
    assert abs(got[0].timestamp - time.time() * 1000) < 60_000


def test_a_key_lands_where_java_clients_put_it_and_partitions_are_honoured(transport):
    topic = new_topic(transport, 6)
    keys = [f"user-{i}".encode() for i in range(60)]
    mds = produce(transport, [ProducerRecord(topic, b"x", k) for k in keys])
    assert [m.partition for m in mds] == [partition_for_key(k, 6) for k in keys]
    md = produce(transport, [ProducerRecord(topic, b"pinned", b"user-0", partition=5)])[0]
    assert md.partition == 5


def test_a_group_resumes_from_its_committed_offsets(transport):
    topic = new_topic(transport, 2)
    produce(transport, [ProducerRecord(topic, f"{i}".encode(), partition=i % 2)
                        for i in range(20)])
    group = f"g-{uuid.uuid4().hex[:8]}"
    tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]

    c = transport.consumer(group, GROUP)
    assert c.committed(tps) == {tp: None for tp in tps}
    assigned: list[TopicPartition] = []
    c.subscribe([topic], on_assign=assigned.extend)
    first = drain(c, 20)
    assert sorted(int(r.value) for r in first) == list(range(20))
    assert sorted(assigned) == tps
    c.commit({TopicPartition(topic, 0): 4, TopicPartition(topic, 1): 7})
    assert c.committed(tps) == {TopicPartition(topic, 0): 4, TopicPartition(topic, 1): 7}
    c.close()

    again = transport.consumer(group, GROUP)
    again.subscribe([topic])
    rest = drain(again, 6 + 3)
    again.close()
    # partition 0 holds 0,2,..,18 (offsets 0-9), partition 1 holds 1,3,..,19
    assert sorted(int(r.value) for r in rest) == sorted(
        [2 * o for o in range(4, 10)] + [2 * o + 1 for o in range(7, 10)])


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_a_seek_in_on_assign_is_where_consumption_starts(transport, strategy):
    """What an exactly-once sink does: its task's open() rewinds each partition it is
    given to what its own output holds, before anything is read."""
    topic = new_topic(transport, 2)
    produce(transport, [ProducerRecord(topic, f"{i}".encode(), partition=i % 2)
                        for i in range(20)])
    c = transport.consumer(f"g-{uuid.uuid4().hex[:8]}",
                           {**GROUP, "partition.assignment.strategy": strategy})
    starts = {0: 6, 1: 8}

    def rewind(partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            c.seek(tp, starts[tp.partition])
            assert c.position(tp) == starts[tp.partition]

    c.subscribe([topic], on_assign=rewind)
    got = drain(c, 4 + 2)
    c.close()
    assert sorted((r.partition, r.offset) for r in got) == [
        (0, 6), (0, 7), (0, 8), (0, 9), (1, 8), (1, 9)]


@pytest.mark.parametrize("strategy", ["range", "sticky", "cooperative-sticky"])
def test_two_members_of_a_group_split_its_partitions_and_read_each_record_once(
        transport, strategy):
    """What sink tasks of one connector rely on: members share the partitions without
    overlap (the assignor named by partition.assignment.strategy decides, kctl's own on
    both transports), each commits what it read, and the group holds those offsets."""
    topic = new_topic(transport, 4)
    group = f"g-{uuid.uuid4().hex[:8]}"
    everything = {TopicPartition(topic, p) for p in range(4)}
    conf = {**GROUP, "partition.assignment.strategy": strategy}
    a, b = transport.consumer(group, conf), transport.consumer(group, conf)
    read: dict[Consumer, list[LogRecord]] = {a: [], b: []}

    def poll_both() -> bool:
        for c in (a, b):
            read[c].extend(c.poll_batch(1000, 0.05))
        return a.assignment() | b.assignment() == everything and \
            not a.assignment() & b.assignment() and len(a.assignment()) == 2

    def polled_until(enough: Callable[[], bool]) -> bool:
        poll_both()  # its answer is about the assignment, not the records
        return enough()

    def hand_over(c: Consumer) -> RebalanceCallback:
        """What a sink task does before a partition moves: commit where it got to."""
        return lambda tps: c.commit({tp: c.position(tp) for tp in tps})

    a.subscribe([topic], on_revoke=hand_over(a))
    wait_until(lambda: poll_both() or a.assignment() == everything, timeout=30,
               message="the first member holds every partition")
    produce(transport, [ProducerRecord(topic, f"{i}".encode(), partition=i % 4)
                        for i in range(40)])
    wait_until(lambda: polled_until(lambda: len(read[a]) >= 40), timeout=30,
               message="the first member read the first 40 records")
    b.subscribe([topic], on_revoke=hand_over(b))
    wait_until(poll_both, timeout=45, message="the second member took half the partitions")
    assert read[b] == []  # what it took over starts where the first member had committed
    produce(transport, [ProducerRecord(topic, f"{i}".encode(), partition=i % 4)
                        for i in range(40, 80)])
    wait_until(lambda: polled_until(lambda: len(read[a]) + len(read[b]) >= 80), timeout=30,
               message="every record read")
    for c in (a, b):
        assert {r.topic_partition for r in read[c] if int(r.value) >= 40} == c.assignment()
        c.commit({tp: c.position(tp) for tp in c.assignment()})
    assert sorted(int(r.value) for r in read[a] + read[b]) == list(range(80))
    passive = transport.consumer(group, {"kctl.passive": "true"})
    assert passive.committed(everything) == {tp: 20 for tp in everything}
    for c in (a, b, passive):
        c.close()


def test_seek_position_pause_and_resume(transport):
    topic = new_topic(transport, 2)
    produce(transport, [ProducerRecord(topic, f"{i}".encode(), partition=i % 2)
                        for i in range(10)])
    c = reader(transport, topic, 2)
    p0, p1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    c.pause([p1])
    got = drain(c, 5, timeout=5)
    assert {r.partition for r in got} == {0} and len(got) == 5
    assert c.position(p0) == 5
    c.resume([p1])
    got = drain(c, 5)
    assert {r.partition for r in got} == {1}
    c.seek(p0, 3)
    got = drain(c, 2)
    assert [(r.partition, r.offset) for r in got] == [(0, 3), (0, 4)]
    assert c.assignment() == {p0, p1}
    c.close()


def test_topics_are_created_listed_and_deleted(transport):
    admin = transport.admin()
    plain = new_topic(transport, 4)
    compacted = new_topic(transport, 1, **{"cleanup.policy": "compact"})
    topics = admin.list_topics()
    assert topics[plain] == 4 and topics[compacted] == 1
    admin.create_topics([TopicSpec(plain, 4)])  # exist_ok by default
    produce(transport, [ProducerRecord(compacted, b"v", b"k")])
    admin.delete_topics([plain, compacted])
    wait_until(lambda: not ({plain, compacted} & set(admin.list_topics())), timeout=20, message="topics deleted")
    with contextlib.suppress(Exception):
        admin.delete_topics([plain])  # deleting twice must not hang


def test_a_keyed_column_batch_lands_where_its_keys_say(transport):
    """send_batch with keys: each row in its key's partition (Kafka's partitioner), in
    order within the partition, keys and headers as sent; the callback names each
    partition's end."""
    topic = new_topic(transport, 3)
    n = 300
    keys = pa.array([f"key-{i % 37}".encode() for i in range(n)], pa.binary())
    values = pa.array([f"v{i}".encode() for i in range(n)], pa.binary())
    headers = [("h", pa.array([f"{i}".encode() for i in range(n)], pa.binary()))]
    p = transport.producer()
    delivered: list[BatchDelivery] = []
    p.send_batch(topic, values, delivered.append, headers=headers, keys=keys)
    assert p.flush(30) == 0
    p.close()
    c = reader(transport, topic, 3)
    got = drain(c, n)
    c.close()
    assert len(got) == n
    for r in got:
        i = int(r.headers[0][1])
        assert (r.key, r.value) == (f"key-{i % 37}".encode(), f"v{i}".encode())
        assert r.partition == partition_for_key(r.key, 3)
    for part in range(3):
        rows = [int(r.headers[0][1]) for r in got if r.partition == part]
        assert rows == sorted(rows)
    [result] = delivered
    assert not result.errors
    assert result.ends == {(topic, part): max(r.offset for r in got if r.partition == part) + 1
                           for part in {r.partition for r in got}}


def test_a_column_batch_arrives_as_if_it_had_been_sent_row_by_row(transport):
    """send_batch: keyless rows as Arrow columns, one callback for all of them."""
    topic = new_topic(transport, 1)
    batches = [  # (values, headers): with nulls, plain, and big rows
        (pa.array([b"a", b"", None, b"x" * 3000], pa.binary()),
         [("h", pa.array([b"1", None, b"3", b""], pa.binary())), ("g", pa.array([b"g"] * 4))]),
        (pa.array([f"row {i}".encode() for i in range(500)], pa.binary()),
         [("__kctl.source", pa.array([f"[{i}]" for i in range(500)]).cast(pa.binary()))]),
        (pa.array([b"v"] * 3, pa.binary()).slice(1), []),  # a slice, no headers
    ]
    p = transport.producer()
    p.send(ProducerRecord(topic, b"before", partition=0))
    delivered: list[BatchDelivery] = []
    for values, headers in batches:
        p.send_batch(topic, values, delivered.append, headers=headers)
    assert p.flush(30) == 0
    p.close()
    assert delivered == [BatchDelivery({}, {(topic, 0): 5}), BatchDelivery({}, {(topic, 0): 505}),
                         BatchDelivery({}, {(topic, 0): 507})]
    c = reader(transport, topic, 1)
    got = drain(c, 507)
    c.close()
    expected = [(b"before", ())]
    for values, headers in batches:
        rows = values.to_pylist()
        cols = [(name, col.to_pylist()) for name, col in headers]
        expected += [(v, tuple((name, col[i]) for name, col in cols)) for i, v in enumerate(rows)]
    assert [(r.value, r.headers) for r in got] == expected
    assert [r.offset for r in got] == list(range(507))
    assert all(r.key is None for r in got)


def test_a_columnar_poll_reads_what_a_record_poll_reads(transport):
    """poll_columns (the sink's columnar path) gives exactly the records poll_batch gives:
    one run of columns per partition, in offset order, keys a binary column (None when no
    record of the run has one), values with their nulls, headers as sent."""
    topic = new_topic(transport, 3)
    sent = [ProducerRecord(topic, None if i % 11 == 0 else f"v{i}".encode(),
                           None if i % 3 == 0 or i % 4 == 0 else f"k{i}".encode(),
                           partition=i % 3 if i % 4 else 0,
                           headers=(("h", f"{i}".encode()), ("e", None)) if i % 5 == 0 else ())
            for i in range(120)]
    sent += [ProducerRecord(topic, f"keyless{i}".encode(), partition=2) for i in range(5)]
    produce(transport, sent)

    by_records = reader(transport, topic, 3)
    expected = sorted(drain(by_records, len(sent)), key=lambda r: (r.partition, r.offset))
    by_records.close()
    by_columns = reader(transport, topic, 3)
    runs = []
    deadline = time.monotonic() + 30
    while sum(map(len, runs)) < len(sent) and time.monotonic() < deadline:
        runs.extend(by_columns.poll_columns(50, 0.2))
    by_columns.close()

    got = sorted((r for run in runs for r in run.records()), key=lambda r: (r.partition, r.offset))
    assert got == expected and len(got) == len(sent)
    for run in runs:
        assert [run.record(i) for i in range(len(run))] == run.records()
        assert list(run.offsets) == sorted(run.offsets)
        assert len({(r.topic, r.partition) for r in run.records()}) == 1
        if run.keys is None:
            assert all(r.key is None for r in run.records())
        else:
            assert run.keys.type == pa.binary() and len(run.keys) == len(run)

"""The embedded durable log: what was acknowledged is there after a reopen, or a kill -9."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kctl.api.records import TopicPartition
from kctl.errors import AlreadyExistsError, TransportError
from kctl.transport.base import ProducerRecord, TopicSpec
from kctl.transport.embedded import (
    OFFSETS_TOPIC,
    EmbeddedTransport,
    murmur2,
    partition_for_key,
    range_assignor,
)

REPO = Path(__file__).resolve().parents[2]


class Clock:
    def __init__(self, t: float = 1_700_000_000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


def produce(t: EmbeddedTransport, records: list[ProducerRecord]) -> list:
    """Send all, flush; returns (metadata, error) per record, in the order they were sent."""
    acks: list = [None] * len(records)
    p = t.producer()
    for i, r in enumerate(records):
        p.send(r, lambda md, err, i=i: acks.__setitem__(i, (md, err)))
    assert p.flush() == 0
    p.close()
    assert None not in acks
    return acks


def read_all(t: EmbeddedTransport, topic: str, group: str | None = None) -> list:
    c = t.consumer(group)
    c.assign([TopicPartition(topic, p) for p in range(t.topics()[topic])])
    out = []
    while batch := c.poll_batch(1000, 0):
        out.extend(batch)
    c.close()
    return out


def segment_files(state: Path, topic: str, partition: int = 0) -> list[Path]:
    return sorted((state / "log" / topic / str(partition)).glob("*.log"))


# -- append and read ---------------------------------------------------------------------------


def test_records_come_back_after_a_reopen_with_keys_headers_and_timestamps(tmp_path):
    clock = Clock()
    with EmbeddedTransport(tmp_path, clock=clock) as t:
        t.admin().create_topics([TopicSpec("orders", 3)])
        sent = [ProducerRecord("orders", f"v{i}".encode(), f"k{i % 7}".encode(),
                               headers=(("trace", f"h{i}".encode()), ("empty", None)))
                for i in range(300)]
        sent.append(ProducerRecord("orders", None, b"gone", partition=1))
        sent.append(ProducerRecord("orders", b"stamped", None, partition=2, timestamp=42))
        acks = produce(t, sent)
    assert all(err is None for _, err in acks)
    assert len(acks) == len(sent)

    with EmbeddedTransport(tmp_path, clock=clock) as t:
        assert t.admin().list_topics() == {"orders": 3}
        got = read_all(t, "orders")
    by_value = {(r.key, r.value): r for r in got}
    assert len(got) == len(sent)
    for (md, _), rec in zip(acks, sent, strict=True):
        stored = by_value[(rec.key, rec.value)]
        assert (stored.partition, stored.offset) == (md.partition, md.offset)
        assert stored.headers == rec.headers
        assert stored.timestamp == (rec.timestamp if rec.timestamp is not None else 1_700_000_000_000)
    # per partition, offsets are dense and in send order
    for p in range(3):
        offsets = [r.offset for r in got if r.partition == p]
        assert offsets == list(range(len(offsets)))


def test_keys_land_where_kafkas_default_partitioner_puts_them(tmp_path):
    # Kafka's own test vectors for Utils.murmur2
    assert murmur2(b"21") == -973932308
    assert murmur2(b"foobar") == -790332482
    assert murmur2(b"a-little-bit-longer-string") == -1486304829
    assert murmur2(b"abc") == 479470107
    with EmbeddedTransport(tmp_path) as t:
        t.admin().create_topics([TopicSpec("keyed", 6)])
        keys = [f"user-{i}".encode() for i in range(50)]
        acks = produce(t, [ProducerRecord("keyed", b"x", k) for k in keys])
        for k, (md, _) in zip(keys, acks, strict=True):
            assert md.partition == partition_for_key(k, 6) == (murmur2(k) & 0x7FFFFFFF) % 6


def test_records_without_a_key_spread_over_partitions(tmp_path):
    with EmbeddedTransport(tmp_path) as t:
        t.admin().create_topics([TopicSpec("spread", 3)])
        p = t.producer()
        parts = []
        for _ in range(6):  # each batch sticks to one partition, the next moves on
            p.send_many([ProducerRecord("spread", b"v")] * 10,
                        lambda md, err: parts.append(md.partition))
            p.flush()
        assert set(parts) == {0, 1, 2}
        assert all(len(set(parts[i:i + 10])) == 1 for i in range(0, 60, 10))


def test_delivery_callbacks_fire_only_from_poll_or_flush(tmp_path):
    with EmbeddedTransport(tmp_path) as t:
        p = t.producer()
        acks = []
        p.send(ProducerRecord("auto", b"v"), lambda md, err: acks.append(md))
        p.send_many([ProducerRecord("auto", b"w")], lambda md, err: acks.append(md))
        assert acks == []
        assert p.poll(0) == 2
        assert [md.offset for md in acks] == [0, 1]


def test_a_bad_partition_fails_only_its_record(tmp_path):
    with EmbeddedTransport(tmp_path) as t:
        t.admin().create_topics([TopicSpec("two", 2)])
        results = produce(t, [ProducerRecord("two", b"ok", partition=1),
                              ProducerRecord("two", b"bad", partition=5)])
        assert results[0][1] is None and results[0][0].partition == 1
        assert results[1][0] is None and isinstance(results[1][1], TransportError)


def test_topics_are_created_deleted_and_named_safely(tmp_path):
    with EmbeddedTransport(tmp_path) as t:
        admin = t.admin()
        admin.create_topics([TopicSpec("a", 2)])
        admin.create_topics([TopicSpec("a", 5)])  # exist_ok keeps the original
        assert admin.list_topics() == {"a": 2}
        with pytest.raises(AlreadyExistsError):
            admin.create_topics([TopicSpec("a", 2)], exist_ok=False)
        with pytest.raises(Exception, match="invalid topic name"):
            admin.create_topics([TopicSpec("../escape", 1)])
        admin.delete_topics(["a"])
        assert "a" not in admin.list_topics()
        assert OFFSETS_TOPIC in t.topics()  # internal topics exist but are not listed
    assert not (tmp_path / "log" / "a").exists()


def test_reads_cross_segment_boundaries(tmp_path):
    with EmbeddedTransport(tmp_path, segment_bytes=4096) as t:
        for batch in range(50):  # a batch never splits; segments roll between batches
            produce(t, [ProducerRecord("rolled", f"{i:05d}".encode() * 20, partition=0)
                        for i in range(batch * 10, batch * 10 + 10)])
    assert len(segment_files(tmp_path, "rolled")) > 5
    with EmbeddedTransport(tmp_path, segment_bytes=4096) as t:
        got = read_all(t, "rolled")
        assert [r.offset for r in got] == list(range(500))
        c = t.consumer(None)
        c.assign([TopicPartition("rolled", 0)])
        c.seek(TopicPartition("rolled", 0), 321)
        assert c.poll_batch(1, 0)[0].value == b"00321" * 20


# -- crashes -----------------------------------------------------------------------------------


def test_a_torn_tail_is_cut_off_on_open_and_the_log_goes_on(tmp_path):
    with EmbeddedTransport(tmp_path) as t:
        produce(t, [ProducerRecord("t", f"r{i}".encode(), partition=0) for i in range(10)])
    seg = segment_files(tmp_path, "t")[-1]
    size = seg.stat().st_size
    with open(seg, "r+b") as f:  # half of the last frame never reached the disk
        f.truncate(size - 5)
    with EmbeddedTransport(tmp_path) as t:
        assert [r.value for r in read_all(t, "t")] == [f"r{i}".encode() for i in range(9)]
        acks = produce(t, [ProducerRecord("t", b"after", partition=0)])
        assert acks[0][0].offset == 9
    with EmbeddedTransport(tmp_path) as t:
        assert read_all(t, "t")[-1].value == b"after"


def test_a_corrupted_tail_frame_is_detected_by_its_crc(tmp_path):
    with EmbeddedTransport(tmp_path) as t:
        produce(t, [ProducerRecord("t", b"x" * 50, partition=0) for _ in range(3)])
    seg = segment_files(tmp_path, "t")[-1]
    data = bytearray(seg.read_bytes())
    data[-10] ^= 0xFF  # flip a byte inside the last record's value
    seg.write_bytes(bytes(data))
    with EmbeddedTransport(tmp_path) as t:
        assert len(read_all(t, "t")) == 2


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.lists(st.binary(max_size=40), min_size=1, max_size=20), cut=st.integers(0, 10_000))
def test_after_any_torn_write_the_log_holds_a_prefix_of_what_was_written(tmp_path_factory, values, cut):
    d = tmp_path_factory.mktemp("torn")
    with EmbeddedTransport(d) as t:
        produce(t, [ProducerRecord("t", v, partition=0) for v in values])
    seg = segment_files(d, "t")[-1]
    size = seg.stat().st_size
    with open(seg, "r+b") as f:
        f.truncate(cut % (size + 1))
    with EmbeddedTransport(d) as t:
        got = [r.value for r in read_all(t, "t")]
        assert got == values[:len(got)]
        acks = produce(t, [ProducerRecord("t", b"next", partition=0)])
        assert acks[0][0].offset == len(got)


CHILD = textwrap.dedent("""
    import sys
    from kctl.transport.base import ProducerRecord, TopicSpec
    from kctl.transport.embedded import EmbeddedTransport

    t = EmbeddedTransport(sys.argv[1])
    t.admin().create_topics([TopicSpec("crash", 2)])
    p = t.producer()
    out = sys.stdout
    i = 0
    while True:
        for _ in range(50):
            p.send(ProducerRecord("crash", str(i).encode(), str(i).encode()),
                   lambda md, err, v=i: out.write(f"{v}\\n") if err is None else None)
            i += 1
        p.poll(0)
        out.flush()
""")


def test_acknowledged_records_survive_sigkill_of_the_writer(tmp_path):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    state = tmp_path / "state"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.Popen([sys.executable, str(script), str(state)], stdout=subprocess.PIPE,
                             env=env, text=True)
    acked: list[int] = []
    try:
        assert child.stdout is not None
        for line in child.stdout:
            acked.append(int(line))
            if len(acked) >= 3000:
                break
        # while the child holds the state dir, nobody else may open it
        with pytest.raises(TransportError, match=rf"{state}.*pid {child.pid}"):
            EmbeddedTransport(state)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert len(acked) >= 3000
    with EmbeddedTransport(state) as t:
        stored = {int(r.value) for r in read_all(t, "crash")}
    assert set(acked) <= stored


# -- compaction -----------------------------------------------------------------------------


def test_a_compacted_topic_keeps_the_last_value_per_key_and_forgets_tombstones(tmp_path):
    compact = {"cleanup.policy": "compact"}
    with EmbeddedTransport(tmp_path, min_compact_garbage=10**9) as t:
        t.admin().create_topics([TopicSpec("cfg", 1, config=compact)])
        produce(t, [ProducerRecord("cfg", f"a{i}".encode(), b"a") for i in range(5)]
                + [ProducerRecord("cfg", b"b0", b"b"), ProducerRecord("cfg", None, b"b"),
                   ProducerRecord("cfg", b"c0", b"c"), ProducerRecord("cfg", b"a5", b"a")])
        before = read_all(t, "cfg")
        t.compact("cfg")
        after = read_all(t, "cfg")
        with pytest.raises(TransportError):  # keys are required on compacted topics
            p = t.producer()
            errs = []
            p.send(ProducerRecord("cfg", b"v"), lambda md, err: errs.append(err))
            p.flush()
            raise errs[0]
    assert len(before) == 9
    assert {(r.key, r.value) for r in after} == {(b"c", b"c0"), (b"a", b"a5")}
    # offsets stay what they were: the survivors keep theirs
    assert [r.offset for r in after] == [7, 8]
    with EmbeddedTransport(tmp_path) as t:
        assert [(r.key, r.offset) for r in read_all(t, "cfg")] == [(b"c", 7), (b"a", 8)]
        acks = produce(t, [ProducerRecord("cfg", b"d0", b"d")])
        assert acks[0][0].offset == 9


def test_compaction_runs_by_itself_when_garbage_piles_up(tmp_path):
    with EmbeddedTransport(tmp_path, min_compact_garbage=100) as t:
        t.admin().create_topics([TopicSpec("hot", 1, config={"cleanup.policy": "compact"})])
        for round_ in range(20):
            produce(t, [ProducerRecord("hot", f"{round_}".encode(), f"k{k}".encode())
                        for k in range(10)])
        got = read_all(t, "hot")
    assert len(got) < 200
    assert {r.key: r.value for r in got} == {f"k{k}".encode(): b"19" for k in range(10)}


def test_a_compaction_interrupted_before_the_swap_is_finished_on_open(tmp_path):
    with EmbeddedTransport(tmp_path, min_compact_garbage=10**9) as t:
        t.admin().create_topics([TopicSpec("c", 1, config={"cleanup.policy": "compact"})])
        produce(t, [ProducerRecord("c", f"v{i}".encode(), b"k") for i in range(5)])
    part = tmp_path / "log" / "c" / "0"
    seg = segment_files(tmp_path, "c")[0]
    # simulate: the cleaned file was renamed to .swap, then the process died
    (part / (seg.name + ".swap")).write_bytes(seg.read_bytes())
    seg.unlink()
    (part / "junk.log.cleaned").write_bytes(b"partial")
    with EmbeddedTransport(tmp_path) as t:
        assert [r.value for r in read_all(t, "c")][-1] == b"v4"
    assert not list(part.glob("*.swap")) and not list(part.glob("*.cleaned"))


# -- consumer groups -------------------------------------------------------------------------


def test_two_consumers_in_a_group_share_partitions_and_hand_them_over(tmp_path):
    with EmbeddedTransport(tmp_path) as t:
        t.admin().create_topics([TopicSpec("jobs", 4)])
        produce(t, [ProducerRecord("jobs", f"{i}".encode(), partition=i % 4) for i in range(40)])
        events: list[tuple[str, str, list]] = []

        def consumer(name):
            c = t.consumer("workers")
            c.subscribe(["jobs"], on_assign=lambda tps: events.append((name, "assign", tps)),
                        on_revoke=lambda tps: on_revoke(c, name, tps))
            return c

        def on_revoke(c, name, tps):
            events.append((name, "revoke", tps))
            c.commit({tp: c.position(tp) for tp in tps})  # what a sink does before handing over

        a = consumer("a")
        first = a.poll_batch(100, 0)
        assert a.assignment() == {TopicPartition("jobs", p) for p in range(4)}
        assert len(first) == 40

        b = consumer("b")
        assert b.poll_batch(100, 0) == []  # a still owns everything until it revokes
        assert not (a.assignment() & b.assignment())
        a.poll_batch(100, 0)  # a revokes what the range assignor moves to b
        b.poll_batch(100, 0)
        assert a.assignment() | b.assignment() == {TopicPartition("jobs", p) for p in range(4)}
        assert not (a.assignment() & b.assignment())
        assert len(a.assignment()) == len(b.assignment()) == 2
        # b starts where a committed: nothing is read twice
        for tp in b.assignment():
            assert b.position(tp) == 10
        assert [e[:2] for e in events] == [("a", "assign"), ("a", "revoke"), ("b", "assign")]

        produce(t, [ProducerRecord("jobs", b"late", partition=p) for p in range(4)])
        late_a = a.poll_batch(100, 0)
        late_b = b.poll_batch(100, 0)
        assert len(late_a) == len(late_b) == 2
        assert {r.partition for r in late_a} == {tp.partition for tp in a.assignment()}

        b.close()  # leaving hands b's partitions back to a
        a.poll_batch(100, 0)
        assert a.assignment() == {TopicPartition("jobs", p) for p in range(4)}
        described = t.admin().describe_groups(["workers"])["workers"]
        assert list(described["members"]) == [a.member_id]
        a.close()


def test_a_pluggable_assignor_decides_who_gets_what(tmp_path):
    def everything_to_the_last(parts, subs):
        last = max(subs)
        return {m: ([TopicPartition(t, p) for t, n in parts.items() for p in range(n)]
                    if m == last else []) for m in subs}

    with EmbeddedTransport(tmp_path, assignor=everything_to_the_last) as t:
        t.admin().create_topics([TopicSpec("x", 3)])
        a, b = t.consumer("g"), t.consumer("g")
        a.subscribe(["x"])
        b.subscribe(["x"])
        a.poll_batch(1, 0)
        b.poll_batch(1, 0)
        assert a.assignment() == set() and len(b.assignment()) == 3


def test_paused_partitions_are_not_fetched(tmp_path):
    with EmbeddedTransport(tmp_path) as t:
        t.admin().create_topics([TopicSpec("p", 2)])
        produce(t, [ProducerRecord("p", b"v", partition=i % 2) for i in range(4)])
        c = t.consumer("g")
        c.subscribe(["p"])
        c.poll_batch(0, 0)
        c.pause([TopicPartition("p", 0)])
        assert {r.partition for r in c.poll_batch(10, 0)} == {1}
        c.resume([TopicPartition("p", 0)])
        assert {r.partition for r in c.poll_batch(10, 0)} == {0}


def test_a_waiting_poll_wakes_up_when_a_record_arrives(tmp_path):
    import threading

    with EmbeddedTransport(tmp_path) as t:
        t.admin().create_topics([TopicSpec("w", 1)])
        c = t.consumer(None)
        c.assign([TopicPartition("w", 0)])
        got = []
        th = threading.Thread(target=lambda: got.extend(c.poll_batch(10, 30)))
        th.start()
        produce(t, [ProducerRecord("w", b"ping")])
        th.join(30)
        assert [r.value for r in got] == [b"ping"]


def test_committed_offsets_survive_a_reopen_and_can_be_deleted(tmp_path):
    tp = TopicPartition("src", 0)
    with EmbeddedTransport(tmp_path) as t:
        t.admin().create_topics([TopicSpec("src", 1)])
        produce(t, [ProducerRecord("src", f"{i}".encode()) for i in range(10)])
        c = t.consumer("connect-sink")
        c.subscribe(["src"])
        assert len(c.poll_batch(4, 0)) == 4
        c.commit({tp: 4})
        c.close()
    with EmbeddedTransport(tmp_path) as t:
        c = t.consumer("connect-sink")
        assert c.committed([tp]) == {tp: 4}
        assert t.consumer("other").committed([tp]) == {tp: None}
        c.subscribe(["src"])
        assert [r.value for r in c.poll_batch(100, 0)] == [f"{i}".encode() for i in range(4, 10)]
        c.close()
        t.admin().delete_group_offsets("connect-sink", [tp])
    with EmbeddedTransport(tmp_path) as t:
        assert t.consumer("connect-sink").committed([tp]) == {tp: None}


@given(
    partitions=st.dictionaries(st.sampled_from("abcde"), st.integers(1, 12), min_size=1),
    members=st.dictionaries(st.text("mnopq", min_size=1, max_size=3),
                            st.sets(st.sampled_from("abcde"), min_size=1), min_size=1),
)
def test_the_range_assignor_gives_each_partition_to_exactly_one_subscriber(partitions, members):
    result = range_assignor(partitions, {m: sorted(ts) for m, ts in members.items()})
    assert set(result) == set(members)
    for topic, n in partitions.items():
        owners = [m for m, tps in result.items() for tp in tps if tp.topic == topic]
        subscribers = [m for m, ts in members.items() if topic in ts]
        if not subscribers:
            assert owners == []
            continue
        assert sorted(tp.partition for tps in result.values() for tp in tps
                      if tp.topic == topic) == list(range(n))
        assert set(owners) <= set(subscribers)
        counts = [owners.count(m) for m in subscribers]
        assert max(counts) - min(counts) <= 1


# -- the lock -----------------------------------------------------------------------------


def test_only_one_owner_of_a_state_dir_at_a_time(tmp_path):
    t = EmbeddedTransport(tmp_path)
    with pytest.raises(TransportError) as e:
        EmbeddedTransport(tmp_path)
    assert str(tmp_path) in str(e.value) and f"pid {os.getpid()}" in str(e.value)
    t.close()
    EmbeddedTransport(tmp_path).close()  # released on close


def test_producers_in_many_threads_get_distinct_offsets_and_lose_nothing(tmp_path):
    import threading

    with EmbeddedTransport(tmp_path) as t:
        t.admin().create_topics([TopicSpec("shared", 2)])
        acked: list = []
        lock = threading.Lock()

        def work(n):
            p = t.producer()
            for i in range(500):
                p.send(ProducerRecord("shared", f"{n}-{i}".encode(), partition=i % 2),
                       lambda md, err: (lock.acquire(), acked.append((md, err)), lock.release()))
                if i % 97 == 0:
                    p.poll(0)
            p.close()

        threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert all(err is None for _, err in acked) and len(acked) == 2000
        positions = {(md.partition, md.offset) for md, _ in acked}
        assert len(positions) == 2000
        got = read_all(t, "shared")
        assert sorted(r.value for r in got) == sorted(
            f"{n}-{i}".encode() for n in range(4) for i in range(500))


def test_with_fsync_records_and_commits_are_written_through(tmp_path):
    with EmbeddedTransport(tmp_path, fsync=True) as t:
        t.admin().create_topics([TopicSpec("synced", 1, config={"cleanup.policy": "compact"})])
        acks = produce(t, [ProducerRecord("synced", b"v", b"k")])
        assert acks[0][1] is None
        c = t.consumer("g")
        c.commit({TopicPartition("synced", 0): 1})
    with EmbeddedTransport(tmp_path, fsync=True) as t:
        assert [r.value for r in read_all(t, "synced")] == [b"v"]
        assert t.consumer("g").committed([TopicPartition("synced", 0)]) == {
            TopicPartition("synced", 0): 1}

"""The embedded durable log: what was acknowledged is there after a reopen, or a kill -9."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.clock import FakeClock

from kctl.api.records import TopicPartition
from kctl.errors import AlreadyExistsError, ConfigError, TransportError
from kctl.group.assignors.consumer import (
    CooperativeStickyAssignor,
    Subscription,
    encode_generation,
)
from kctl.group.assignors.consumer import TopicPartition as GroupTopicPartition
from kctl.rebalance import explain
from kctl.transport.base import ProducerRecord, TopicSpec
from kctl.transport.embedded import (
    OFFSETS_TOPIC,
    EmbeddedTransport,
    murmur2,
    partition_for_key,
)

REPO = Path(__file__).resolve().parents[2]


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
    clock = FakeClock(1_700_000_000.0)
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


@pytest.mark.parametrize(
    ("strategy", "callbacks"),
    [
        # range is eager: a gives up all four partitions, then takes two of them back
        (None, [("a", "assign", 4), ("a", "revoke", 4), ("a", "assign", 2), ("b", "assign", 2)]),
        # cooperative-sticky: a revokes only the two that move to b
        ("cooperative-sticky", [("a", "assign", 4), ("a", "revoke", 2), ("b", "assign", 2)]),
    ],
    ids=["default-range-eager", "cooperative-sticky"],
)
def test_two_consumers_in_a_group_share_partitions_and_hand_them_over(tmp_path, strategy, callbacks):
    with EmbeddedTransport(tmp_path) as t:
        t.admin().create_topics([TopicSpec("jobs", 4)])
        produce(t, [ProducerRecord("jobs", f"{i}".encode(), partition=i % 4) for i in range(40)])
        events: list[tuple[str, str, list]] = []
        config = {} if strategy is None else {"partition.assignment.strategy": strategy}

        def consumer(name):
            c = t.consumer("workers", config)
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
        a.poll_batch(100, 0)  # a revokes (all, or what moves to b)
        b.poll_batch(100, 0)
        assert a.assignment() | b.assignment() == {TopicPartition("jobs", p) for p in range(4)}
        assert not (a.assignment() & b.assignment())
        assert len(a.assignment()) == len(b.assignment()) == 2
        # b (and a, after an eager revoke) start where a committed: nothing is read twice
        for c in (a, b):
            for tp in c.assignment():
                assert c.position(tp) == 10
        assert [(n, what, len(tps)) for n, what, tps in events] == callbacks

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
        assert described["protocol"] == (strategy or "range")
        a.close()


def poll_until_stable(t: EmbeddedTransport, group: str, consumers: list) -> dict:
    """Poll every member until each holds exactly its assignment; the group's description."""
    for _ in range(10):
        for c in consumers:
            c.poll_batch(1000, 0)
        described = t.admin().describe_groups([group])[group]
        if described["state"] == "Stable":
            return described
    raise AssertionError(f"group {group} does not settle: {described}")


def assignments(described: dict) -> dict[str, list[str]]:
    return {m: v["assignment"] for m, v in described["members"].items()}


def test_cooperative_sticky_moves_only_what_a_joining_member_needs_and_matches_the_simulator(
        tmp_path):
    """One implementation: the embedded group, the assignor called directly with the
    subscriptions a real group sends, and the simulator for the same story agree."""
    topics = {"T0": 4, "T1": 3}
    config = {"partition.assignment.strategy":
              "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"}
    with EmbeddedTransport(tmp_path) as t:
        t.admin().create_topics([TopicSpec(n, p) for n, p in topics.items()])
        held: dict[str, set] = {}
        history: list[tuple[str, str, frozenset]] = []

        def track(name, what):
            def callback(tps):
                history.append((name, what, frozenset(tps)))
                mine = held.setdefault(name, set())
                if what == "assign":
                    others = set().union(*(v for k, v in held.items() if k != name))
                    assert not (others & set(tps)), "a partition is handed over before it is revoked"
                    mine |= set(tps)
                else:
                    mine -= set(tps)
            return callback

        consumers = []
        by_generation: dict[int, dict[str, list[str]]] = {}
        for name in ("a", "b", "c"):
            c = t.consumer("sinks", config)
            c.subscribe(["T0", "T1"], on_assign=track(name, "assign"),
                        on_revoke=track(name, "revoke"))
            consumers.append(c)
            described = poll_until_stable(t, "sinks", consumers)
            by_generation[described["generation"]] = assignments(described)
        ids = {c.member_id: name for name, c in zip("abc", consumers, strict=True)}

    # c's join moved exactly c's share, and only from a and b; nothing else moved.
    before, after = by_generation[3], by_generation[5]
    for member in list(before):
        assert set(after[member]) <= set(before[member]), f"{ids[member]} lost more than needed"
    moved = [tp for member in before for tp in before[member] if tp not in after[member]]
    c_id = consumers[2].member_id
    assert sorted(moved) == sorted(after[c_id]) and len(moved) == 7 // 3
    revoked = [tps for name, what, tps in history if what == "revoke"]
    assert sorted(str(tp) for tps in revoked for tp in tps) == sorted(
        [tp for member in by_generation[1] for tp in by_generation[1][member]
         if tp not in by_generation[3][member]] + moved)

    # The join round, recomputed with the metadata a real consumer group carries: the
    # members' owned partitions and generation, and each assignor's user data.
    owned = {m: tuple(GroupTopicPartition.parse(p) for p in ps) for m, ps in before.items()}
    subscriptions = {
        m: Subscription(("T0", "T1"), encode_generation(3), owned[m], 3) for m in before
    } | {c_id: Subscription(("T0", "T1"), encode_generation(-1), (), -1)}
    direct = CooperativeStickyAssignor().assign(topics, subscriptions)
    first_round = {m: sorted(set(after[m]) - set(moved)) for m in after}
    assert {m: [str(tp) for tp in a.partitions] for m, a in direct.items()} == first_round

    # The simulator tells the same story round by round, under the same generations.
    doc = explain.simulate_document({
        "kind": "consumer", "protocol": "cooperative-sticky", "topics": topics,
        "members": {"a": ["T0", "T1"]},
        "events": [{"join": {"b": ["T0", "T1"]}}, {"join": {"c": ["T0", "T1"]}}],
    })
    simulated = {r["generation"]: r["assignments"] for r in doc["rounds"]}
    for generation, embedded in by_generation.items():
        assert {ids[m]: ps for m, ps in embedded.items()} == simulated[generation]


def test_the_sticky_assignor_gets_its_user_data_from_its_own_member(tmp_path):
    """Eager sticky: members give up everything, yet each gets back a subset of what it
    had, which it can only know from the assignment its own assignor remembered."""
    with EmbeddedTransport(tmp_path) as t:
        t.admin().create_topics([TopicSpec("T0", 4), TopicSpec("T1", 3)])
        consumers, rounds = [], []
        for _ in range(3):
            c = t.consumer("g", {"partition.assignment.strategy": "sticky"})
            c.subscribe(["T0", "T1"])
            consumers.append(c)
            rounds.append(assignments(poll_until_stable(t, "g", consumers)))
    for earlier, later in itertools.pairwise(rounds):
        for member, parts in earlier.items():
            assert set(later[member]) <= set(parts), (member, earlier, later)
    assert sorted(len(p) for p in rounds[-1].values()) == [2, 2, 3]


def test_the_strategy_is_read_from_the_consumer_config_like_kafkas(tmp_path):
    with EmbeddedTransport(tmp_path) as t:
        t.admin().create_topics([TopicSpec("x", 2)])
        for value, protocol in [
            ("roundrobin", "roundrobin"),
            ("org.apache.kafka.clients.consumer.StickyAssignor", "sticky"),
            ("cooperative-sticky, range", "cooperative-sticky"),
            (["roundrobin", "range"], "roundrobin"),
            (CooperativeStickyAssignor, "cooperative-sticky"),
        ]:
            group = f"g-{protocol}-{len(str(value))}"
            c = t.consumer(group, {"partition.assignment.strategy": value})
            c.subscribe(["x"])
            assert t.admin().describe_groups([group])[group]["protocol"] == protocol
            c.close()
        with pytest.raises(ConfigError) as e:
            t.consumer("g", {"partition.assignment.strategy": "range, fastest"})
        assert e.value.key == "partition.assignment.strategy"
        assert "'fastest'" in str(e.value) and "cooperative-sticky" in str(e.value)


def test_a_group_selects_the_assignor_every_member_offers(tmp_path):
    """Kafka's rolling upgrade: [range, cooperative-sticky] members and a cooperative-sticky
    member agree on cooperative-sticky; a member sharing no assignor is refused."""
    with EmbeddedTransport(tmp_path) as t:
        t.admin().create_topics([TopicSpec("x", 4)])
        old = t.consumer("g")  # Kafka's default list: range first
        old.subscribe(["x"])
        assert t.admin().describe_groups(["g"])["g"]["protocol"] == "range"
        new = t.consumer("g", {"partition.assignment.strategy": "cooperative-sticky"})
        new.subscribe(["x"])
        described = poll_until_stable(t, "g", [old, new])
        assert described["protocol"] == "cooperative-sticky"
        assert sorted(len(v["assignment"]) for v in described["members"].values()) == [2, 2]
        odd = t.consumer("g", {"partition.assignment.strategy": "roundrobin"})
        with pytest.raises(TransportError, match="INCONSISTENT_GROUP_PROTOCOL"):
            odd.subscribe(["x"])
        assert len(t.admin().describe_groups(["g"])["g"]["members"]) == 2


def test_only_a_change_to_subscribed_topics_rebalances_a_group(tmp_path):
    with EmbeddedTransport(tmp_path) as t:
        t.admin().create_topics([TopicSpec("x", 2)])
        c = t.consumer("g")
        c.subscribe(["x", "later"])
        c.poll_batch(1, 0)
        generation = t.admin().describe_groups(["g"])["g"]["generation"]
        revoked: list = []
        c.subscribe(["x", "later"], on_revoke=revoked.extend)  # the same subscription
        t.admin().create_topics([TopicSpec("unrelated", 3)])
        c.poll_batch(1, 0)
        assert t.admin().describe_groups(["g"])["g"]["generation"] == generation
        assert revoked == []
        t.admin().create_topics([TopicSpec("later", 1)])
        c.poll_batch(1, 0)
        assert t.admin().describe_groups(["g"])["g"]["generation"] == generation + 1
        assert c.assignment() == {TopicPartition("x", 0), TopicPartition("x", 1),
                                  TopicPartition("later", 0)}


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


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(
    strategy=st.sampled_from(["range", "roundrobin", "sticky", "cooperative-sticky"]),
    partitions=st.dictionaries(st.sampled_from("abcd"), st.integers(1, 6), min_size=1),
    members=st.lists(st.sets(st.sampled_from("abcde"), min_size=1), min_size=1, max_size=4),
)
def test_an_embedded_group_ends_where_the_simulator_does(
        tmp_path_factory, strategy, partitions, members):
    """Members join one after another: every subscribed partition ends with exactly one of
    its subscribers, and each member holds what the simulator's member holds."""
    names = [f"C{i}" for i in range(len(members))]
    with EmbeddedTransport(tmp_path_factory.mktemp("group")) as t:
        t.admin().create_topics([TopicSpec(n, p) for n, p in partitions.items()])
        consumers = []
        for topics in members:
            c = t.consumer("g", {"partition.assignment.strategy": strategy})
            c.subscribe(sorted(topics))
            consumers.append(c)
        poll_until_stable(t, "g", consumers)
        held = {name: sorted(str(tp) for tp in c.assignment())
                for name, c in zip(names, consumers, strict=True)}
    owners = [tp for parts in held.values() for tp in parts]
    subscribed = {n for topics in members for n in topics if n in partitions}
    assert sorted(owners) == sorted(f"{n}-{p}" for n in subscribed for p in range(partitions[n]))
    for name, topics in zip(names, members, strict=True):
        assert {tp.rsplit("-", 1)[0] for tp in held[name]} <= topics
    doc = explain.simulate_document({
        "kind": "consumer", "protocol": strategy, "topics": partitions,
        "members": {names[0]: sorted(members[0])},
        "events": [{"join": {n: sorted(ts)}} for n, ts in zip(names[1:], members[1:], strict=True)],
    })
    assert held == doc["final"]


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


# -- column batches ----------------------------------------------------------------------------


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.tuples(st.binary(max_size=300), st.none() | st.binary(max_size=60)),
                     min_size=1, max_size=60),
       header_names=st.lists(st.text(min_size=1, max_size=8), max_size=2),
       cuts=st.lists(st.integers(0, 60), max_size=3))
def test_a_column_batch_is_written_byte_for_byte_as_row_by_row_sends(tmp_path_factory, rows,
                                                                     header_names, cuts):
    """The vectorised frame encoder (and its fallback for null header values) writes
    exactly the frames the per-record encoder writes."""
    state = tmp_path_factory.mktemp("log")
    values = [v for v, _ in rows]
    header_values = [h for _, h in rows]
    headers = [(name, pa.array(header_values, pa.binary())) for name in header_names]
    bounds = sorted({0, len(rows), *(c for c in cuts if c < len(rows))})
    with EmbeddedTransport(state, clock=FakeClock(1_700_000_000.0)) as t:
        t.create_topic(TopicSpec("rows", 1))
        t.create_topic(TopicSpec("cols", 1))
        produce(t, [ProducerRecord("rows", v, partition=0,
                                   headers=tuple((name, h) for name in header_names))
                    for v, h in rows])
        p = t.producer()
        for a, b in itertools.pairwise(bounds):
            p.send_batch("cols", pa.array(values, pa.binary()).slice(a, b - a), lambda r: None,
                         headers=[(name, col.slice(a, b - a)) for name, col in headers])
        assert p.flush() == 0
        p.close()
    assert segment_files(state, "cols")[0].read_bytes() == \
        segment_files(state, "rows")[0].read_bytes()


def test_a_keyed_column_batch_is_written_byte_for_byte_as_keyed_sends(tmp_path):
    """Keys in the column encoder (and its per-row fallback for a null key) give the frames
    the per-record encoder writes; a compacted topic keeps the last value of each key."""
    rows = [(f"k{i % 5}".encode(), f"value {i}".encode()) for i in range(40)]
    with EmbeddedTransport(tmp_path, clock=FakeClock(1_700_000_000.0)) as t:
        for name in ("rows", "cols", "nullkey-rows", "nullkey-cols"):
            t.create_topic(TopicSpec(name, 1))
        produce(t, [ProducerRecord("rows", v, k, partition=0) for k, v in rows])
        with_null = [*rows[:3], (None, b"no key"), *rows[3:6]]
        produce(t, [ProducerRecord("nullkey-rows", v, k, partition=0) for k, v in with_null])
        p = t.producer()
        p.send_batch("cols", pa.array([v for _, v in rows], pa.binary()), lambda r: None,
                     keys=pa.array([k for k, _ in rows], pa.binary()))
        p.send_batch("nullkey-cols", pa.array([v for _, v in with_null], pa.binary()),
                     lambda r: None, keys=pa.array([k for k, _ in with_null], pa.binary()))
        t.create_topic(TopicSpec("compact", 1, config={"cleanup.policy": "compact"}))
        p.send_batch("compact", pa.array([v for _, v in rows], pa.binary()), lambda r: None,
                     keys=pa.array([k for k, _ in rows], pa.binary()))
        assert p.flush() == 0
        p.close()
        t.compact("compact")
        c = t.consumer(None)
        c.assign([TopicPartition("compact", 0)])
        kept = {r.key: r.value for r in c.poll_batch(100, 0)}
        c.close()
    assert segment_files(tmp_path, "cols")[0].read_bytes() == \
        segment_files(tmp_path, "rows")[0].read_bytes()
    assert segment_files(tmp_path, "nullkey-cols")[0].read_bytes() == \
        segment_files(tmp_path, "nullkey-rows")[0].read_bytes()
    assert kept == {f"k{j}".encode(): f"value {35 + j}".encode() for j in range(5)}


def test_column_batches_are_indexed_as_a_reopen_indexes_them(tmp_path):
    """Seeks into the middle of big column batches land on the right record, and the live
    sparse index equals the one rebuilt from the files."""
    def index(t: EmbeddedTransport) -> list:
        part = t.partition(TopicPartition("big", 0))
        return [(s.index_offsets, s.index_positions) for s in part.segments]

    with EmbeddedTransport(tmp_path, segment_bytes=1 << 20) as t:
        t.create_topic(TopicSpec("big", 1))
        p = t.producer()
        expected: list[bytes] = []
        for size in (3000, 1, 700, 4000, 2500):
            values = [f"{i:07d}".encode() * 20 for i in range(len(expected), len(expected) + size)]
            p.send_batch("big", pa.array(values), lambda r: None,
                         headers=[("h", pa.array([b"x" * 30] * size))])
            p.send(ProducerRecord("big", b"single", partition=0))
            expected += [*values, b"single"]
        assert p.flush() == 0
        p.close()
        live = index(t)
    assert len(live) > 1 and sum(len(offsets) for offsets, _ in live) > 20
    with EmbeddedTransport(tmp_path, segment_bytes=1 << 20) as t:
        assert index(t) == live
        c = t.consumer(None)
        c.assign([TopicPartition("big", 0)])
        for offset in [*range(0, len(expected), 97), len(expected) - 1]:
            c.seek(TopicPartition("big", 0), offset)
            got = c.poll_batch(1, 0)[0]
            assert (got.offset, got.value) == (offset, expected[offset])
        c.close()


_records = st.lists(st.tuples(st.none() | st.binary(max_size=5),  # key
                              st.none() | st.binary(max_size=40),  # value: short and long
                              st.lists(st.tuples(st.text(max_size=4),
                                                 st.none() | st.binary(max_size=6)),
                                       max_size=2)),
                    min_size=1, max_size=80)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=_records, start=st.integers(0, 90), max_records=st.integers(1, 30),
       partitions=st.integers(1, 3))
def test_a_columnar_poll_reads_what_a_record_poll_reads(tmp_path_factory, records, start,
                                                        max_records, partitions):
    """poll_columns cuts records out of the log with numpy and Arrow; row by row, from any
    start offset, over segment rolls, they are exactly the records poll_batch gives."""
    state = tmp_path_factory.mktemp("log")
    with EmbeddedTransport(state, clock=FakeClock(1_700_000_000.0), segment_bytes=512) as t:
        t.create_topic(TopicSpec("t", partitions))
        for i in range(0, len(records), 7):  # several appends: segments roll between them
            produce(t, [ProducerRecord("t", v, key=k, partition=(i + j) % partitions,
                                       headers=tuple(h))
                        for j, (k, v, h) in enumerate(records[i:i + 7])])

        def read(columnar: bool) -> list:
            c = t.consumer(None)
            tps = [TopicPartition("t", p) for p in range(partitions)]
            c.assign(tps)
            for tp in tps:
                c.seek(tp, min(start, t.end_offset(tp)))
            got = []
            while True:
                if columnar:
                    polled = c.poll_columns(max_records, 0)
                    assert sum(map(len, polled)) <= max_records
                    assert all(len(cols) for cols in polled)
                    batch = [r for cols in polled for r in cols.records()]
                    assert [cols.record(i) for cols in polled for i in range(len(cols))] == batch
                else:
                    batch = c.poll_batch(max_records, 0)
                if not batch:
                    break
                got.extend(batch)
            c.close()
            return sorted(got, key=lambda r: (r.partition, r.offset))

        expected = read(columnar=False)
        assert read(columnar=True) == expected
        assert len(expected) == sum(max(0, sum(1 for j in range(len(records))
                                                if j % partitions == p) - start)
                                    for p in range(partitions))


def test_a_columnar_poll_takes_a_frame_larger_than_its_read_buffer(tmp_path, monkeypatch):
    from kctl.transport.embedded import segments

    monkeypatch.setattr(segments, "COLUMN_READ_CHUNK", 64)
    values = [b"small", b"x" * 500, b"tail" * 10]
    with EmbeddedTransport(tmp_path) as t:
        produce(t, [ProducerRecord("big", v, partition=0, headers=(("h", b"1"),))
                    for v in values])
        c = t.consumer(None)
        c.assign([TopicPartition("big", 0)])
        got = []
        while polled := c.poll_columns(10, 0):
            got.extend(r for cols in polled for r in cols.records())
        assert [(r.offset, r.value, r.headers) for r in got] == \
            [(i, v, (("h", b"1"),)) for i, v in enumerate(values)]


def test_a_small_columnar_poll_does_not_keep_a_large_read_buffer_alive(tmp_path):
    """The columns' headers are decoded on demand from the read buffer, so a sink holding
    a batch holds that buffer: it must be about the size of the batch's own frames."""
    with EmbeddedTransport(tmp_path) as t:
        produce(t, [ProducerRecord("wide", b"v" * 500, partition=0, headers=(("h", b"x"),))
                    for _ in range(5000)])
        c = t.consumer(None)
        c.assign([TopicPartition("wide", 0)])
        (cols,) = c.poll_columns(10, 0)
        assert len(cols) == 10 and cols.headers[9] == (("h", b"x"),)
        assert len(cols.headers._buf) < 10 * 600
        c.close()


def test_a_reader_does_not_wait_for_a_batch_being_written(tmp_path, monkeypatch):
    """Writers take turns for as long as an append lasts, readers lock only to look at the
    segments: a sink goes on reading what is there while a source's batch is encoded and
    written (they used to wait for each other, a third of a second per 100k records)."""
    import threading

    from kctl.transport.embedded import segments

    held, release = threading.Event(), threading.Event()
    encode = segments._encode_columns

    def held_encode(*args, **kwargs):
        held.set()
        release.wait(30)
        return encode(*args, **kwargs)

    with EmbeddedTransport(tmp_path) as t:
        t.create_topic(TopicSpec("flow", 1))
        produce(t, [ProducerRecord("flow", b"there", partition=0)])
        monkeypatch.setattr(segments, "_encode_columns", held_encode)
        p = t.producer()
        writer = threading.Thread(target=lambda: p.send_batch(
            "flow", pa.array([b"next"], pa.binary()), lambda r: None))
        writer.start()
        assert held.wait(30)
        c = t.consumer(None)
        c.assign([TopicPartition("flow", 0)])
        read: list = []
        reader = threading.Thread(target=lambda: read.extend(c.poll_columns(10, 0)))
        reader.start()
        reader.join(20)
        still_held = not release.is_set()
        release.set()
        writer.join(30)
        assert still_held and not reader.is_alive()
        assert [v.as_py() for cols in read for v in cols.values] == [b"there"]
        assert p.flush() == 0
        assert [r.value for r in c.poll_batch(10, 0)] == [b"next"]
        p.close()
        c.close()

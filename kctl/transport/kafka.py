"""Kafka as the worker's transport, through confluent-kafka (librdkafka).

Producers are idempotent with acks=all; sink consumers are members of the connector's group
(`connect-<name>`) through kctl's own group protocol and assignors (librdkafka only
fetches, by manual assignment), never auto-commit, and commit only what the sink has
flushed, as the member in its generation.
User settings pass through (`producer.*`, `consumer.*`, `*.override.*`) on top of these.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_INVALID,
    KafkaError,
    KafkaException,
)
from confluent_kafka import Consumer as KConsumer
from confluent_kafka import Producer as KProducer
from confluent_kafka import (
    TopicPartition as KTP,
)
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from kctl.api.records import RecordMetadata, TopicPartition
from kctl.errors import NotFoundError, TransportError
from kctl.transport.assignor_plugins import assignment_strategy
from kctl.transport.base import (
    Admin,
    BatchCallback,
    BatchDelivery,
    Consumer,
    DeliveryCallback,
    HeaderColumns,
    LogRecord,
    Producer,
    ProducerRecord,
    RebalanceCallback,
    RecordColumns,
    Stall,
    TopicSpec,
    Transport,
    column_rows,
)
from kctl.transport.kafka_consumer_group import DEFAULT_STRATEGY, ConsumerGroupMember
from kctl.transport.member_ids import MemberIds
from kctl.transport.security import librdkafka_config, security_settings

if TYPE_CHECKING:
    import pyarrow as pa

PRODUCER_DEFAULTS = {
    "enable.idempotence": True,
    "acks": "all",
    "linger.ms": 20,
    "batch.size": 1_000_000,
    "compression.type": "lz4",
    # Java clients hash keys with murmur2; librdkafka's default (crc32) would send the same
    # key to another partition than a Kafka Connect worker or the embedded log does
    "partitioner": "murmur2_random",
    # keyless records: a random partition each, not one partition per 10 ms (librdkafka's
    # sticky default sent a whole source batch to one partition, so one sink task of
    # three read almost everything)
    "sticky.partitioning.linger.ms": 0,
    # room for the next source batch (100k records by default) while the last one waits
    # for its acks: librdkafka's 100k-message queue made every batch wait for the one
    # before (file -> test broker, 400k records: 66-72k -> 83-85k records/s); its bytes
    # stay capped by queue.buffering.max.kbytes (1 GiB)
    "queue.buffering.max.messages": 1_000_000,
}
CONSUMER_DEFAULTS = {
    "enable.auto.commit": False,
    "auto.offset.reset": "earliest",
    "enable.partition.eof": False,
    "session.timeout.ms": 10000,
    "heartbeat.interval.ms": 1000,
    "partition.assignment.strategy": DEFAULT_STRATEGY,
}
log = logging.getLogger(__name__)

# kctl-only keys that must not reach librdkafka.
_PRIVATE = ("kctl.",)

# librdkafka's own log lines, through Python logging (its syslog levels mapped by
# confluent-kafka) instead of stderr, so `/admin/loggers` and the worker's log settings
# apply to them too.
CLIENT_LOG = logging.getLogger("kctl.transport.kafka.client")
REPEAT_INTERVAL_S = 30.0


class RepeatFilter(logging.Filter):
    """One line per kind of message per interval: a broker that is down makes librdkafka
    report every reconnect attempt, several a second. Numbers are ignored when lines are
    compared; the next line that passes says how many were held back."""

    def __init__(self, interval_s: float = REPEAT_INTERVAL_S,
                 clock: Any = time.monotonic):
        super().__init__()
        self.interval_s = interval_s
        self.clock = clock
        self._last: dict[tuple[int, str], tuple[float, int]] = {}
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.levelno, re.sub(r"\d+", "#", record.getMessage()))
        now = self.clock()
        with self._lock:
            last = self._last.get(key)
            if last is not None and now - last[0] < self.interval_s:
                self._last[key] = (last[0], last[1] + 1)
                return False
            held = last[1] if last else 0
            self._last[key] = (now, 0)
        if held:
            record.msg = f"{record.getMessage()} ({held} like it in the last " \
                         f"{self.interval_s:.0f} s not shown)"
            record.args = ()
        return True


CLIENT_LOG.addFilter(RepeatFilter())

# Errors that mean the cluster cannot be reached (as opposed to a refused request).
_UNREACHABLE = {KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._RESOLVE,
                KafkaError._AUTHENTICATION, KafkaError._SSL}


_REFUSED = re.compile(r"SASL|SSL|certificate|authentication", re.I)
LIST_TOPICS_TIMEOUT_S = 10.0  # how long listing topics may wait for an answer


class Reachability:
    """What the clients of one transport last said about reaching the cluster; errors that
    time out quote it, so a task's status names the cause in one line."""

    def __init__(self, bootstrap: str):
        self.bootstrap = bootstrap
        self.last_error: str | None = None
        self.last_ok = True
        self.refusals = 0  # handshakes the cluster refused (credentials, TLS), ever

    def error_cb(self, err: KafkaError) -> None:
        if err.code() in (KafkaError._AUTHENTICATION, KafkaError._SSL) or \
                (err.code() in _UNREACHABLE and _REFUSED.search(err.str())):
            self.refusals += 1
        if err.code() in _UNREACHABLE:
            # "all brokers down" after a refused handshake says less than the refusal
            if err.code() != KafkaError._ALL_BROKERS_DOWN or not self.last_error or \
                    not _REFUSED.search(self.last_error):
                self.last_error = err.str()
            self.last_ok = False
            CLIENT_LOG.warning("cannot reach the Kafka cluster at %s (bootstrap.servers): %s",
                               self.bootstrap, err.str())
        else:
            CLIENT_LOG.error("Kafka client error: %s", err.str())

    def explain(self, what: str, err: KafkaError | None = None) -> str:
        """`what` failed (with `err`); says so in one line, naming the cluster and the
        clients' last connection error when it could not be reached."""
        unreachable = err is not None and err.code() in (*_UNREACHABLE, KafkaError._TIMED_OUT)
        if self.last_error is None and not unreachable:
            return f"{what}: {err.str()}" if err is not None else what
        why = self.last_error or (err.str() if err is not None else "no broker answered")
        return (f"{what}: cannot reach the Kafka cluster at {self.bootstrap} "
                f"(bootstrap.servers): {why}")


def _clean(conf: Mapping[str, Any]) -> dict[str, Any]:
    """What librdkafka gets: no kctl-only or group-only keys, Kafka's Java security names
    (ssl.truststore.location, sasl.jaas.config, ...) in librdkafka's words."""
    return librdkafka_config({k: v for k, v in conf.items()
                              if not k.startswith(_PRIVATE) and k not in _GROUP_ONLY})


# Settings of a consumer's group membership, which kctl runs (kafka_consumer_group.py):
# librdkafka only fetches, so it never sees them (it cannot run kctl's assignors).
_GROUP_ONLY = ("partition.assignment.strategy",)


def _tp(ktp: KTP) -> TopicPartition:
    return TopicPartition(ktp.topic, ktp.partition)


class _BatchState:
    """The rows of one send_batch still in flight; reports once all are settled."""

    __slots__ = ("ends", "errors", "left", "on_delivery")

    def __init__(self, n: int, on_delivery: BatchCallback):
        self.left = n
        self.errors: dict[int, BaseException] = {}
        self.ends: dict[tuple[str, int], int] = {}
        self.on_delivery = on_delivery

    def settle(self, i: int, err: KafkaError | BaseException | None, msg: Any) -> None:
        if err is not None:
            self.errors[i] = err if isinstance(err, BaseException) else \
                TransportError(f"produce to {msg.topic()} failed: {err.str()}")
        else:
            key = (msg.topic(), msg.partition())
            end = msg.offset() + 1
            if self.ends.get(key, -1) < end:
                self.ends[key] = end
        self.left -= 1
        if self.left == 0:
            self.on_delivery(BatchDelivery(self.errors, self.ends))


class KafkaProducer(Producer):
    def __init__(self, conf: Mapping[str, Any]):
        self._p = KProducer(conf)

    def send_batch(self, topic: str, values: pa.Array, on_delivery: BatchCallback,
                   *, headers: HeaderColumns = (), keys: pa.Array | None = None) -> None:
        """librdkafka batches by itself: produce row by row with one light callback each."""
        rows, row_headers = column_rows(values, headers)
        row_keys = keys.to_pylist() if keys is not None else None
        n = len(rows)
        if n == 0:
            on_delivery(BatchDelivery({}, {}))
            return
        state = _BatchState(n, on_delivery)
        settle, produce = state.settle, self._p.produce
        for i, v in enumerate(rows):
            cb = functools.partial(settle, i)
            while True:
                try:
                    k = row_keys[i] if row_keys is not None else None
                    if headers:
                        produce(topic, v, k, on_delivery=cb, headers=list(row_headers[i]))
                    else:
                        produce(topic, v, k, on_delivery=cb)
                    break
                except BufferError:  # local queue full: serve callbacks, then try again
                    self._p.poll(0.1)
                except KafkaException as e:
                    settle(i, TransportError(f"produce to {topic} failed: {e}"), None)
                    break

    def send(self, record: ProducerRecord, on_delivery: DeliveryCallback | None = None) -> None:
        def cb(err: KafkaError | None, msg: Any) -> None:
            if on_delivery is None:
                return
            if err is not None:
                on_delivery(None, TransportError(f"produce to {record.topic} failed: {err.str()}"))
            else:
                ts = msg.timestamp()[1]
                on_delivery(RecordMetadata(msg.topic(), msg.partition(), msg.offset(), ts), None)

        kwargs: dict[str, Any] = {"value": record.value, "key": record.key, "on_delivery": cb}
        if record.partition is not None:
            kwargs["partition"] = record.partition
        if record.headers:
            kwargs["headers"] = list(record.headers)
        if record.timestamp is not None:
            kwargs["timestamp"] = record.timestamp
        while True:
            try:
                self._p.produce(record.topic, **kwargs)
                return
            except BufferError:  # local queue full: serve callbacks, then try again
                self._p.poll(0.1)
            except KafkaException as e:
                raise TransportError(f"produce to {record.topic} failed: {e}") from e

    def poll(self, timeout: float = 0.0) -> int:
        return self._p.poll(timeout)

    def flush(self, timeout: float | None = None) -> int:
        return self._p.flush(-1 if timeout is None else timeout)

    def close(self) -> None:
        self._p.flush(10)
        close = getattr(self._p, "close", None)  # confluent-kafka >= 2.13; GC frees it before
        if close is not None:
            close()


class KafkaConsumer(Consumer):
    """librdkafka fetches by manual assignment; a subscribed consumer's group membership is
    kctl's own (`ConsumerGroupMember`), whose rebalance callbacks run here in `poll`."""

    def __init__(self, conf: Mapping[str, Any], *,
                 partition_counts: Callable[[], Mapping[str, int]] | None = None,
                 member_ids: MemberIds | None = None):
        self._c = KConsumer(_clean(conf))
        self._member_ids = member_ids
        self._conf = conf  # with the group's settings, which librdkafka does not get
        if "partition.assignment.strategy" in conf:  # a bad one fails now, not at a join
            assignment_strategy(conf["partition.assignment.strategy"])
        self._partition_counts = partition_counts
        self._group: ConsumerGroupMember | None = None
        self._on_assign: RebalanceCallback | None = None
        self._on_revoke: RebalanceCallback | None = None
        self._on_lost: RebalanceCallback | None = None
        self._seeked: dict[TopicPartition, int] = {}
        # seeks asked for inside on_assign: librdkafka has not assigned the partitions yet
        # (a seek there fails with "Erroneous state"), so they become the start offsets
        self._assigning = False
        self._start_at: dict[TopicPartition, int] = {}
        self._pause_at: list[KTP] = []
        self._assignment: set[TopicPartition] = set()
        self._paused: set[TopicPartition] = set()
        self._closed = False

    def subscribe(self, topics: Sequence[str], *, on_assign: RebalanceCallback | None = None,
                  on_revoke: RebalanceCallback | None = None,
                  on_lost: RebalanceCallback | None = None) -> None:
        self._on_assign, self._on_revoke = on_assign, on_revoke
        self._on_lost = on_lost or on_revoke
        if self._group is not None:
            self._group.resubscribe(topics)
            return
        group_id = str(self._conf["group.id"])
        if self._partition_counts is None:
            raise TransportError(f"consumer of group {group_id} cannot subscribe: it was made "
                                 "without a view of the cluster's topics")
        self._group = ConsumerGroupMember(str(self._conf["bootstrap.servers"]), group_id,
                                          topics, self._conf, self._partition_counts,
                                          security=security_settings(self._conf),
                                          member_ids=self._member_ids)
        self._group.start()

    def stall(self) -> Stall | None:
        return self._group.stall if self._group is not None else None

    def refetch(self, reason: str) -> None:
        """A new librdkafka client for the same partitions, from the positions reached
        (`stall`'s other half: partitions that grow while nothing is fetched)."""
        positions = {tp: self.position(tp) for tp in sorted(self._assignment)}
        log.warning("consumer of group %s: %s; fetching %s again from a new client",
                    self._conf.get("group.id"), reason,
                    ", ".join(f"{tp}@{off}" for tp, off in positions.items()))
        old, self._c = self._c, KConsumer(_clean(self._conf))
        try:
            old.close()
        except KafkaException as e:
            log.info("closing the stalled client failed: %s", e)
        if positions:
            self._c.assign([KTP(tp.topic, tp.partition, off) for tp, off in positions.items()])
        paused = [KTP(tp.topic, tp.partition) for tp in self._paused & self._assignment]
        if paused:
            self._c.pause(paused)

    def _rebalance(self) -> None:
        """Run what the group handed over: revocations first, in order, each acknowledged
        once librdkafka no longer fetches those partitions."""
        group = self._group
        if group is None:
            return
        if group.failure is not None:
            raise TransportError(group.failure)
        for work in group.take():
            try:
                if work.start:
                    self._start(work.partitions)
                else:
                    self._stop(work.partitions, lost=work.lost)
            finally:
                work.done.set()

    def _start(self, tps: list[TopicPartition]) -> None:
        self._assignment |= set(tps)
        for tp in tps:
            self._seeked.pop(tp, None)
        self._assigning = True
        try:
            if self._on_assign:
                self._on_assign(tps)
        finally:
            self._assigning = False
        parts = []
        for tp in tps:
            start = self._start_at.pop(tp, None)
            parts.append(KTP(tp.topic, tp.partition) if start is None else
                         KTP(tp.topic, tp.partition, start))
        self._c.incremental_assign(parts)
        pause, self._pause_at = self._pause_at, []
        if pause:
            self._c.pause(pause)

    def _stop(self, tps: list[TopicPartition], *, lost: bool) -> None:
        try:
            callback = self._on_lost if lost else self._on_revoke
            if callback:
                callback(tps)
        finally:
            self._c.incremental_unassign([KTP(tp.topic, tp.partition) for tp in tps])
            self._assignment -= set(tps)
            for tp in tps:
                self._seeked.pop(tp, None)

    def assign(self, partitions: Sequence[TopicPartition]) -> None:
        self._assignment = set(partitions)
        self._seeked = {}
        self._c.assign([KTP(p.topic, p.partition, OFFSET_BEGINNING) for p in partitions])

    def assignment(self) -> set[TopicPartition]:
        return set(self._assignment)

    def poll_batch(self, max_records: int, timeout: float) -> list[LogRecord]:
        self._rebalance()
        msgs = self._c.consume(max_records, timeout)
        out: list[LogRecord] = []
        for m in msgs:
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    continue
                raise TransportError(f"consume failed: {err.str()}")
            out.append(LogRecord(m.topic(), m.partition(), m.offset(), m.timestamp()[1],
                                 m.key(), m.value(), tuple(m.headers() or ())))
        return out

    def poll_columns(self, max_records: int, timeout: float) -> list[RecordColumns]:
        """`poll_batch` as columns, cut straight from librdkafka's messages: no LogRecord
        per record, each field read once per message, values one Arrow array a partition."""
        import pyarrow as pa

        self._rebalance()
        msgs = self._c.consume(max_records, timeout)
        if not msgs:
            return []
        if any(m.error() is not None for m in msgs):
            msgs = [m for m in msgs if _consumed(m)]
        runs: dict[tuple[str, int], list[Any]] = {}
        for m in msgs:
            run = runs.get((m.topic(), m.partition()))
            if run is None:
                runs[(m.topic(), m.partition())] = [m]
            else:
                run.append(m)
        out = []
        for (topic, partition), run in runs.items():
            keys = [m.key() for m in run]
            out.append(RecordColumns(
                topic, partition, [m.offset() for m in run], [m.timestamp()[1] for m in run],
                None if keys.count(None) == len(keys) else pa.array(keys, pa.binary()),
                pa.array([m.value() for m in run], pa.binary()),
                [tuple(h) if (h := m.headers()) else () for m in run]))
        return out

    def seek(self, tp: TopicPartition, offset: int) -> None:
        if self._assigning:
            self._start_at[tp] = offset
        else:
            self._c.seek(KTP(tp.topic, tp.partition, offset))
        self._seeked[tp] = offset

    def position(self, tp: TopicPartition) -> int:
        pos = self._c.position([KTP(tp.topic, tp.partition)])[0].offset
        if pos >= 0:
            return pos
        # librdkafka knows a position only once it consumed from the partition: until then
        # it is where we seeked, else where the group committed
        if tp in self._seeked:
            return self._seeked[tp]
        committed = self._c.committed([KTP(tp.topic, tp.partition)], timeout=10)[0].offset
        return committed if committed >= 0 else 0

    def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        parts = [KTP(p.topic, p.partition) for p in partitions]
        if not parts:
            return {}
        res = self._c.committed(parts, timeout=10)
        return {_tp(r): (r.offset if r.offset != OFFSET_INVALID and r.offset >= 0 else None)
                for r in res}

    def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        """As the group's member when subscribed (refused once a rebalance moved the
        partitions: CommitFailedError), else as a plain client of the group."""
        if not offsets:
            return
        if self._group is not None:
            self._group.commit(offsets)
            return
        parts = [KTP(tp.topic, tp.partition, off) for tp, off in offsets.items()]
        try:
            self._c.commit(offsets=parts, asynchronous=False)
        except KafkaException as e:
            raise TransportError(f"offset commit failed: {e}") from e

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        partitions = list(partitions)
        self._paused.update(partitions)
        parts = [KTP(p.topic, p.partition) for p in partitions]
        if self._assigning:  # inside on_assign: paused once librdkafka has them
            self._pause_at.extend(parts)
        elif parts:
            self._c.pause(parts)

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        partitions = list(partitions)
        self._paused.difference_update(partitions)
        parts = [KTP(p.topic, p.partition) for p in partitions]
        if parts:
            self._c.resume(parts)

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The broker's answer, or the high watermark the last fetch carried when that is
        further: neither overstates the end, and some brokers (Tansu) answer ListOffsets
        "latest" short of it while their fetch responses carry it exactly."""
        out = {}
        for p in partitions:
            ktp = KTP(p.topic, p.partition)
            _, high = self._c.get_watermark_offsets(ktp, timeout=10, cached=False)
            try:
                _, fetched = self._c.get_watermark_offsets(ktp, cached=True)
            except KafkaException:  # nothing fetched from this partition yet
                fetched = -1
            out[p] = max(high, fetched)
        return out

    def beginning_offsets(self, partitions: Iterable[TopicPartition]
                          ) -> dict[TopicPartition, int]:
        """The low watermark of each partition, as the broker answers it."""
        return {p: self._c.get_watermark_offsets(KTP(p.topic, p.partition), timeout=10,
                                                 cached=False)[0] for p in partitions}

    def close(self) -> None:
        """Leave the group without callbacks (the caller has closed what it held)."""
        if not self._closed:
            self._closed = True
            try:
                if self._group is not None:
                    self._group.close()
            finally:
                self._c.close()


def _consumed(m: Any) -> bool:
    """Whether a message from consume() is a record (False: an end-of-partition event);
    any other error fails the poll, as in poll_batch."""
    err = m.error()
    if err is None:
        return True
    if err.code() == KafkaError._PARTITION_EOF:
        return False
    raise TransportError(f"consume failed: {err.str()}")


class KafkaAdmin(Admin):
    def __init__(self, conf: Mapping[str, Any], reachability: Reachability | None = None):
        self._client: AdminClient | None = AdminClient(conf)
        self._conf = conf
        self._reach = reachability or Reachability(str(conf.get("bootstrap.servers", "")))

    @property
    def _a(self) -> AdminClient:
        if self._client is None:
            raise TransportError("the Kafka admin client is closed")
        return self._client

    def close(self) -> None:
        """AdminClient has no close(): dropping the last reference stops its threads."""
        self._client = None

    def create_topics(self, specs: Sequence[TopicSpec], *, exist_ok: bool = True) -> None:
        if not specs:
            return
        new = [NewTopic(s.name, num_partitions=s.partitions,
                        replication_factor=s.replication_factor, config=dict(s.config))
               for s in specs]
        for name, fut in self._a.create_topics(new, operation_timeout=30).items():
            try:
                fut.result(30)
            except KafkaException as e:
                err = e.args[0]
                if exist_ok and err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                    continue
                raise TransportError(self._reach.explain(f"cannot create topic {name}", err)) \
                    from e

    def describe_topic(self, name: str) -> TopicSpec:
        partitions = self.list_topics().get(name)
        if partitions is None:
            raise NotFoundError(f"Topic {name} does not exist")
        resource = ConfigResource(ConfigResource.Type.TOPIC, name)
        try:
            entries = self._a.describe_configs([resource])[resource].result(30)
        except KafkaException as e:
            raise TransportError(f"cannot describe topic {name}: {e.args[0].str()}") from e
        config = {k: v.value for k, v in entries.items() if v.value is not None}
        return TopicSpec(name, partitions, 1, config)

    def list_topics(self) -> dict[str, int]:
        """Asked in short rounds for up to LIST_TOPICS_TIMEOUT_S: a cluster that refuses the
        handshake (wrong credentials, an untrusted certificate) will not accept it by being
        asked again, so that is said at once rather than after the whole wait."""
        refusals = self._reach.refusals
        deadline = time.monotonic() + LIST_TOPICS_TIMEOUT_S
        while True:
            left = deadline - time.monotonic()
            try:
                md = self._a.list_topics(timeout=max(0.1, min(1.0, left)))
                break
            except KafkaException as e:
                self._a.poll(0)  # serve the clients' errors: a refused TLS or SASL handshake
                if e.args[0].code() not in (*_UNREACHABLE, KafkaError._TIMED_OUT) or \
                        self._reach.refusals > refusals or time.monotonic() >= deadline:
                    raise TransportError(self._reach.explain("cannot list topics",
                                                             e.args[0])) from e
        return {name: len(t.partitions) for name, t in md.topics.items()
                if not name.startswith("__")}

    def delete_topics(self, names: Sequence[str]) -> None:
        if not names:
            return
        for name, fut in self._a.delete_topics(list(names), operation_timeout=30).items():
            try:
                fut.result(30)
            except KafkaException as e:
                raise TransportError(f"cannot delete topic {name}: {e}") from e

    def delete_group_offsets(self, group_id: str, partitions: Sequence[TopicPartition]) -> None:
        # OffsetDelete is not supported by every broker (see notes); committing the
        # beginning of each partition has the same effect for a sink that restarts.
        c = KConsumer({**self._conf, "group.id": group_id, "enable.auto.commit": False})
        try:
            parts = [KTP(p.topic, p.partition, 0) for p in partitions]
            if parts:
                c.commit(offsets=parts, asynchronous=False)
        finally:
            c.close()


class KafkaTransport(Transport):
    name = "kafka"

    def __init__(self, bootstrap_servers: Sequence[str] | str, *,
                 admin_config: Mapping[str, Any] | None = None,
                 security: Mapping[str, Any] | None = None,
                 member_ids: MemberIds | None = None,
                 consumer_defaults: Mapping[str, Any] | None = None):
        """`security`: the worker-level security.protocol, ssl.* and sasl.* settings, the
        base of every client's config (producer.*, consumer.*, admin.* and overrides
        replace them key by key). `member_ids`: a worker's record of the member ids its
        consumers held in their groups, which they join with again. `consumer_defaults`:
        worker-level settings of every consumer (its internal topics' too), under a
        consumer's own settings."""
        self.member_ids = member_ids
        self._consumer_defaults = dict(consumer_defaults or {})
        servers = bootstrap_servers if isinstance(bootstrap_servers, str) else ",".join(bootstrap_servers)
        self.bootstrap = servers
        self.reachability = Reachability(servers)
        self._base = {"bootstrap.servers": servers, "logger": CLIENT_LOG,
                      "error_cb": self.reachability.error_cb, **(security or {})}
        self._admin_conf = _clean({**self._base, **(admin_config or {})})
        self._admin = KafkaAdmin(self._admin_conf, self.reachability)

    @property
    def cluster_id(self) -> str:
        try:
            return self._admin._a.list_topics(timeout=5).cluster_id or "kafka"
        except KafkaException:
            return "kafka"

    def unreachable(self, timeout: float = 3.0) -> str | None:
        """A metadata request answered within `timeout`, or why not (its clients' last
        connection error: a refused certificate, a name that does not resolve)."""
        try:
            self._admin._a.list_topics(timeout=timeout)
        except KafkaException as e:
            err = e.args[0] if e.args and isinstance(e.args[0], KafkaError) else None
            return self.reachability.explain("no answer to a metadata request", err)
        self.reachability.last_ok = True
        return None

    def producer(self, config: Mapping[str, Any] | None = None) -> Producer:
        return KafkaProducer(_clean({**self._base, **PRODUCER_DEFAULTS, **(config or {})}))

    def consumer(self, group_id: str | None, config: Mapping[str, Any] | None = None) -> Consumer:
        user = {k: v for k, v in (config or {}).items() if not k.startswith(_PRIVATE)}
        conf = {**self._base, **CONSUMER_DEFAULTS, **self._consumer_defaults, **user}
        conf["group.id"] = group_id or f"kctl-reader-{uuid.uuid4().hex}"
        return KafkaConsumer(conf, partition_counts=self._admin.list_topics,
                             member_ids=self.member_ids if group_id else None)

    def admin(self, config: Mapping[str, Any] | None = None) -> Admin:
        if config is None:
            return self._admin
        return KafkaAdmin(_clean({**self._base, **config}), self.reachability)

    def close(self) -> None:
        self._admin.close()
        if self.member_ids is not None:
            self.member_ids.close()

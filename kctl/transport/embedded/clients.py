"""The embedded log's producer, consumer and admin clients (kctl's Transport interface).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kctl.api.records import RecordMetadata, TopicPartition
from kctl.errors import ConfigError, TransportError
from kctl.group.consumer_coordinator import ASSIGNMENT_STRATEGY_CONFIG
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
    TopicSpec,
)

if TYPE_CHECKING:
    import pyarrow as pa

    from kctl.transport.embedded.log import EmbeddedTransport

from kctl.transport.embedded.frames import murmur2
from kctl.transport.embedded.groups import DEFAULT_SESSION_TIMEOUT_MS
from kctl.transport.embedded.segments import _Partition


class EmbeddedProducer(Producer):
    """Buffers `send`s and writes them in one buffer per partition on poll/flush (or when full)."""

    def __init__(self, transport: EmbeddedTransport, config: Mapping[str, Any]):
        self._t = transport
        self._lock = threading.Lock()
        self._buffer: list[tuple[ProducerRecord, DeliveryCallback | None]] = []
        self._done: deque[tuple[DeliveryCallback, RecordMetadata | None, BaseException | None]] = deque()
        self._sticky: dict[str, int] = {}
        self._max_buffer = int(config.get("batch.num.records", 5000))
        self._closed = False

    def send(self, record: ProducerRecord, on_delivery: DeliveryCallback | None = None) -> None:
        if self._closed:
            raise TransportError("producer is closed")
        with self._lock:
            buffer = self._buffer
            buffer.append((record, on_delivery))
            if len(buffer) >= self._max_buffer:
                self._buffer = []
                self._write(buffer)

    def send_many(self, records: Sequence[ProducerRecord],
                  on_delivery: DeliveryCallback | None = None) -> None:
        if self._closed:
            raise TransportError("producer is closed")
        with self._lock:
            batch = [*self._buffer, *((r, on_delivery) for r in records)]
            self._buffer = []
            self._write(batch)

    def send_batch(self, topic: str, values: pa.Array, on_delivery: BatchCallback,
                   *, headers: HeaderColumns = (), keys: pa.Array | None = None) -> None:
        """One append per partition: keyless rows take one (sticky) partition, keyed rows
        the partition of their key (murmur2, as Kafka's default partitioner)."""
        if self._closed:
            raise TransportError("producer is closed")
        with self._lock:
            if self._buffer:  # what was sent before goes first
                batch, self._buffer = self._buffer, []
                self._write(batch)
            n = len(values)
            try:
                count = self._t.partition_count(topic, create=True)
                p = self._sticky.get(topic)
                if p is None or p >= count:
                    p = self._t.next_sticky(topic, count)
                self._sticky[topic] = (p + 1) % count
                now = self._t.now_ms()
                if keys is None or count == 1:
                    base = self._t.append_columns(topic, p, now, values, headers, keys)
                    result = BatchDelivery({}, {(topic, p): base + n})
                else:
                    result = self._append_keyed(topic, count, p, now, values, headers, keys)
            except Exception as e:
                result = BatchDelivery(dict.fromkeys(range(n), e), {})
            self._done.append((lambda md, err: on_delivery(result), None, None))

    def _append_keyed(self, topic: str, count: int, sticky: int, now: int, values: pa.Array,
                      headers: HeaderColumns, keys: pa.Array) -> BatchDelivery:
        """Rows of a keyed batch split by partition, each partition's rows in order."""
        import pyarrow as pa

        rows: dict[int, list[int]] = {}
        for i, k in enumerate(keys.to_pylist()):
            part = sticky if k is None else (murmur2(k) & 0x7FFFFFFF) % count
            rows.setdefault(part, []).append(i)
        ends: dict[tuple[str, int], int] = {}
        errors: dict[int, BaseException] = {}
        for part, idx in sorted(rows.items()):
            take = pa.array(idx, pa.int64())
            try:
                base = self._t.append_columns(
                    topic, part, now, values.take(take),
                    [(name, col.take(take)) for name, col in headers], keys.take(take))
                ends[(topic, part)] = base + len(idx)
            except Exception as e:
                errors.update(dict.fromkeys(idx, e))
        return BatchDelivery(errors, ends)

    def _write_buffered(self) -> None:
        with self._lock:
            if self._buffer:
                batch, self._buffer = self._buffer, []
                self._write(batch)

    def _write(self, batch: list[tuple[ProducerRecord, DeliveryCallback | None]]) -> None:
        now = self._t.now_ms()
        done = self._done
        counts: dict[str, int] = {}
        groups: dict[tuple[str, int], list[tuple[ProducerRecord, DeliveryCallback | None]]] = {}
        sticky = self._sticky
        for item in batch:
            rec = item[0]
            topic = rec.topic
            n = counts.get(topic)
            if n is None:
                try:
                    n = counts[topic] = self._t.partition_count(topic, create=True)
                except Exception as e:
                    if item[1] is not None:
                        done.append((item[1], None, e))
                    continue
            p = rec.partition
            if p is None:
                if rec.key is not None:
                    p = (murmur2(rec.key) & 0x7FFFFFFF) % n
                else:
                    p = sticky.get(topic)
                    if p is None or p >= n:
                        p = sticky[topic] = self._t.next_sticky(topic, n)
            elif not 0 <= p < n:
                if item[1] is not None:
                    done.append((item[1], None, TransportError(
                        f"partition {p} of {topic} does not exist ({n} partition(s))")))
                continue
            g = groups.get((topic, p))
            if g is None:
                g = groups[(topic, p)] = []
            g.append(item)
        for topic, n in counts.items():  # the next batch of keyless records moves on
            if topic in sticky:
                sticky[topic] = (sticky[topic] + 1) % n
        for (topic, p), recs in groups.items():
            items = [(now if r.timestamp is None else r.timestamp, r.key, r.value, r.headers)
                     for r, _ in recs]
            try:
                base = self._t.append(topic, p, items)
            except Exception as e:
                for _, cb in recs:
                    if cb is not None:
                        done.append((cb, None, e))
                continue
            for i, (_, cb) in enumerate(recs):
                if cb is not None:
                    done.append((cb, RecordMetadata(topic, p, base + i, items[i][0]), None))

    def _fire(self) -> int:
        fired = 0
        while True:
            try:
                cb, md, err = self._done.popleft()
            except IndexError:
                return fired
            cb(md, err)
            fired += 1

    def poll(self, timeout: float = 0.0) -> int:
        self._write_buffered()
        return self._fire()

    def flush(self, timeout: float | None = None) -> int:
        self._write_buffered()
        self._fire()
        return 0

    def close(self) -> None:
        if not self._closed:
            self.flush()
            self._closed = True


class _Fetch:
    __slots__ = ("hint", "offset")

    def __init__(self, offset: int):
        self.offset = offset
        self.hint: Any = None


class EmbeddedConsumer(Consumer):
    def __init__(self, transport: EmbeddedTransport, group_id: str | None,
                 config: Mapping[str, Any]):
        self._t = transport
        self.group_id = group_id
        self._lock = threading.RLock()
        self._fetch: dict[TopicPartition, _Fetch] = {}
        self._paused: set[TopicPartition] = set()
        self._member_id: str | None = None
        self._topics: list[str] = []
        self._on_assign: RebalanceCallback | None = None
        self._on_revoke: RebalanceCallback | None = None
        self._reset = str(config.get("auto.offset.reset", "earliest")).lower()
        if self._reset not in ("earliest", "latest", "none"):
            raise ConfigError(f"auto.offset.reset must be earliest, latest or none, not {self._reset!r}",
                              key="auto.offset.reset")
        # Resolved now so a bad strategy fails the consumer at once, not at its first rebalance.
        self._assignors = assignment_strategy(
            config.get(ASSIGNMENT_STRATEGY_CONFIG, transport.assignment_strategy))
        self._session_timeout_ms = int(config.get("session.timeout.ms", DEFAULT_SESSION_TIMEOUT_MS))
        if self._session_timeout_ms <= 0:
            raise ConfigError("session.timeout.ms must be positive", key="session.timeout.ms")
        self._revoke_all_epoch = 0
        self._rr = 0
        self._closed = False

    @property
    def member_id(self) -> str | None:
        return self._member_id

    # -- membership --------------------------------------------------------------------
    def subscribe(self, topics: Sequence[str], *, on_assign: RebalanceCallback | None = None,
                  on_revoke: RebalanceCallback | None = None,
                  on_lost: RebalanceCallback | None = None) -> None:
        """A member of the embedded log's groups is never evicted behind its back, so
        `on_lost` is not called."""
        with self._lock:
            self._check_open()
            if self._member_id is None and self._fetch:
                raise TransportError("consumer already has a manual assignment")
            if self.group_id is None:
                self.group_id = f"kctl-anonymous-{uuid.uuid4().hex[:12]}"
            self._topics = list(topics)
            self._on_assign, self._on_revoke = on_assign, on_revoke
            if self._member_id is None:
                self._member_id = self._t.groups.join(
                    self.group_id, self._topics, self._assignors,
                    session_timeout_ms=self._session_timeout_ms)
            else:
                self._t.groups.resubscribe(self.group_id, self._member_id, self._topics)

    def assign(self, partitions: Sequence[TopicPartition]) -> None:
        with self._lock:
            self._check_open()
            if self._member_id is not None:
                raise TransportError("consumer is subscribed to a group; cannot assign manually")
            old = self._fetch
            self._fetch = {tp: old.get(tp) or _Fetch(self._initial_position(tp)) for tp in partitions}
            self._paused &= set(self._fetch)

    def assignment(self) -> set[TopicPartition]:
        return set(self._fetch)

    def _initial_position(self, tp: TopicPartition) -> int:
        if self.group_id is not None:
            committed = self._t.committed_offset(self.group_id, tp)
            if committed is not None:
                return committed
        if self._reset == "latest":
            return self._t.end_offset(tp)
        if self._reset == "none":
            raise TransportError(f"no committed offset for {tp} in group {self.group_id} "
                                 "and auto.offset.reset=none")
        return self._t.start_offset(tp)

    def _sync_group(self) -> None:
        """Apply the group's current assignment: revoke first (everything held, after an
        eager rebalance), then claim what is free."""
        if self._member_id is None or self.group_id is None:
            return
        self._t.groups.heartbeat(self.group_id, self._member_id)
        target, epoch = self._t.groups.target(self.group_id, self._member_id)
        current = set(self._fetch)
        if epoch != self._revoke_all_epoch:
            self._revoke_all_epoch = epoch
            revoked = sorted(current)
        else:
            revoked = sorted(current - target)
        if revoked:
            try:
                if self._on_revoke is not None:
                    self._on_revoke(revoked)
            finally:
                for tp in revoked:
                    self._fetch.pop(tp, None)
                    self._paused.discard(tp)
                self._t.groups.release(self.group_id, self._member_id, revoked)
        gained = self._t.groups.claim(self.group_id, self._member_id, target - set(self._fetch))
        if gained:
            for tp in gained:
                self._fetch[tp] = _Fetch(self._initial_position(tp))
            if self._on_assign is not None:
                self._on_assign(gained)

    # -- fetching ----------------------------------------------------------------------
    def poll_batch(self, max_records: int, timeout: float) -> list[LogRecord]:
        return self._poll(lambda: self._read(max_records), timeout)

    def poll_columns(self, max_records: int, timeout: float) -> list[RecordColumns]:
        return self._poll(lambda: self._read_columns(max_records), timeout)

    def _poll(self, read: Callable[[], list[Any]], timeout: float) -> list[Any]:
        deadline = time.monotonic() + max(timeout, 0.0)
        with self._lock:
            self._check_open()
            while True:
                seq = self._t.data_seq
                self._sync_group()
                out = read()
                if out:
                    return out
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return out
                self._t.wait_for_data(seq, remaining)

    def _turn(self) -> list[tuple[TopicPartition, _Partition, _Fetch]]:
        """The fetchable partitions, starting at the next one each poll (round robin)."""
        parts = [tp for tp in self._fetch if tp not in self._paused]
        if not parts:
            return []
        self._rr = (self._rr + 1) % len(parts)
        out = []
        for tp in parts[self._rr:] + parts[:self._rr]:
            partition = self._t.partition(tp)
            if partition is not None:
                out.append((tp, partition, self._fetch[tp]))
        return out

    def _read(self, max_records: int) -> list[LogRecord]:
        out: list[LogRecord] = []
        for _, partition, f in self._turn():
            if len(out) >= max_records:
                break
            f.offset, f.hint = partition.read(f.offset, max_records - len(out), f.hint, out)
        return out

    def _read_columns(self, max_records: int) -> list[RecordColumns]:
        out: list[RecordColumns] = []
        left = max_records
        for _, partition, f in self._turn():
            if left <= 0:
                break
            f.offset, f.hint, cols = partition.read_columns(f.offset, left, f.hint)
            if cols is not None:
                out.append(cols)
                left -= len(cols)
        return out

    def seek(self, tp: TopicPartition, offset: int) -> None:
        with self._lock:
            f = self._fetch.get(tp)
            if f is None:
                raise TransportError(f"cannot seek {tp}: not assigned to this consumer")
            f.offset, f.hint = max(0, offset), None

    def position(self, tp: TopicPartition) -> int:
        with self._lock:
            f = self._fetch.get(tp)
            if f is None:
                raise TransportError(f"no position for {tp}: not assigned to this consumer")
            return f.offset

    def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        if self.group_id is None:
            return {tp: None for tp in partitions}
        return {tp: self._t.committed_offset(self.group_id, tp) for tp in partitions}

    def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        if self.group_id is None:
            raise TransportError("cannot commit offsets without a group id")
        if offsets:
            self._t.commit_offsets(self.group_id, offsets)

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        with self._lock:
            self._paused |= {tp for tp in partitions if tp in self._fetch}

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        with self._lock:
            self._paused -= set(partitions)

    def paused(self) -> set[TopicPartition]:
        return set(self._paused)

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self._t.end_offset(tp) for tp in partitions}

    def beginning_offsets(self, partitions: Iterable[TopicPartition]
                          ) -> dict[TopicPartition, int]:
        return {tp: self._t.start_offset(tp) for tp in partitions}

    def close(self) -> None:
        """Leave the group without callbacks; the remaining members take over its partitions."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._member_id is not None and self.group_id is not None:
                self._t.groups.leave(self.group_id, self._member_id)
            self._fetch = {}

    def _check_open(self) -> None:
        if self._closed:
            raise TransportError("consumer is closed")


class EmbeddedAdmin(Admin):
    def __init__(self, transport: EmbeddedTransport):
        self._t = transport

    def create_topics(self, specs: Sequence[TopicSpec], *, exist_ok: bool = True) -> None:
        for spec in specs:
            self._t.create_topic(spec, exist_ok=exist_ok)

    def list_topics(self) -> dict[str, int]:
        return {name: n for name, n in self._t.topics().items() if not name.startswith("__")}

    def describe_topic(self, name: str) -> TopicSpec:
        return self._t.describe_topic(name)

    def delete_topics(self, names: Sequence[str]) -> None:
        for name in names:
            self._t.delete_topic(name)

    def describe_groups(self, group_ids: Sequence[str]) -> dict[str, Any]:
        return {g: self._t.groups.describe(g) for g in group_ids}

    def delete_group_offsets(self, group_id: str, partitions: Sequence[TopicPartition]) -> None:
        self._t.delete_offsets(group_id, partitions)


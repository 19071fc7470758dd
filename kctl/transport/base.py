"""The transport interface: what the runtime needs from a log, shaped after Kafka's clients.

Two implementations sit behind it: the embedded durable log (standalone, no server) and
Kafka through confluent-kafka. The runtime never knows which one it talks to.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple

from kctl.api.records import RecordMetadata, TopicPartition

if TYPE_CHECKING:
    import pyarrow as pa

HeaderList = tuple[tuple[str, bytes | None], ...]
HeaderColumns = Sequence[tuple[str, "pa.Array"]]
"""Headers of a column batch: (name, binary array) pairs; every row carries each name once,
with its own value from the array (null: a header without a value)."""


def column_rows(values: pa.Array, headers: HeaderColumns = ()) -> tuple[
        list[bytes | None], list[HeaderList]]:
    """A column batch as per-row values and header lists (for transports that send rows)."""
    vals: list[bytes | None] = values.to_pylist()
    if not headers:
        return vals, [()] * len(vals)
    names = [name for name, _ in headers]
    cols = [col.to_pylist() for _, col in headers]
    return vals, [tuple(zip(names, row, strict=True)) for row in zip(*cols, strict=True)]


@dataclass(frozen=True, slots=True)
class ProducerRecord:
    topic: str
    value: bytes | None
    key: bytes | None = None
    partition: int | None = None  # None: hash of key (murmur2 like Kafka), or round robin
    headers: HeaderList = ()
    timestamp: int | None = None  # ms; None: the transport's clock


class LogRecord(NamedTuple):
    """A record as stored in a topic partition.

    A named tuple rather than a frozen dataclass: consumers build one per record read, and
    a tuple is built in C, three times faster.
    """

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: HeaderList = ()

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


DeliveryCallback = Callable[[RecordMetadata | None, BaseException | None], None]
"""Called once per record: (metadata, None) when acknowledged, (None, error) when not."""

RebalanceCallback = Callable[[list[TopicPartition]], None]


@dataclass(frozen=True)
class BatchDelivery:
    """How a `send_batch` ended, reported once when every row is settled."""

    errors: Mapping[int, BaseException]
    """Row index -> why that row was not written (empty when all were)."""
    ends: Mapping[tuple[str, int], int]
    """(topic, partition) -> the offset after the last row written there."""


BatchCallback = Callable[[BatchDelivery], None]


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int = 1
    replication_factor: int = 1
    config: Mapping[str, str] = field(default_factory=dict)  # e.g. {"cleanup.policy": "compact"}


class Producer(ABC):
    @abstractmethod
    def send(self, record: ProducerRecord, on_delivery: DeliveryCallback | None = None) -> None:
        """Queue a record; the callback fires from poll() or flush(), never before send returns."""

    def send_many(self, records: Sequence[ProducerRecord],
                  on_delivery: DeliveryCallback | None = None) -> None:
        for r in records:
            self.send(r, on_delivery)

    def send_batch(self, topic: str, values: pa.Array, on_delivery: BatchCallback,
                   *, headers: HeaderColumns = (), keys: pa.Array | None = None) -> None:
        """Queue rows for one topic in order, with one callback for all of them.

        The columnar path of a source task: values, headers and keys stay Arrow binary
        arrays, with no ProducerRecord or callback per row. Keyless rows go where keyless
        records go; `keys` (a binary array, one per row) partition rows as keyed records
        are partitioned. This default sends row by row; a transport that can append a batch
        at once overrides it.
        """
        rows, row_headers = column_rows(values, headers)
        row_keys: list[bytes | None] = keys.to_pylist() if keys is not None else [None] * len(rows)
        n = len(rows)
        if n == 0:
            on_delivery(BatchDelivery({}, {}))
            return
        errors: dict[int, BaseException] = {}
        ends: dict[tuple[str, int], int] = {}
        left = [n]

        def settled(i: int, md: RecordMetadata | None, err: BaseException | None) -> None:
            if err is not None:
                errors[i] = err
            elif md is not None:
                key = (md.topic, md.partition)
                if ends.get(key, -1) < md.offset + 1:
                    ends[key] = md.offset + 1
            left[0] -= 1
            if left[0] == 0:
                on_delivery(BatchDelivery(errors, ends))

        for i, v in enumerate(rows):
            record = ProducerRecord(topic, v, row_keys[i], None, row_headers[i])
            try:
                self.send(record, partial(settled, i))
            except Exception as e:  # refused before it was queued: that row failed
                settled(i, None, e)

    @abstractmethod
    def poll(self, timeout: float = 0.0) -> int:
        """Serve delivery callbacks; returns how many fired."""

    @abstractmethod
    def flush(self, timeout: float | None = None) -> int:
        """Wait until every queued record is acknowledged or failed; returns how many remain."""

    def unreachable(self) -> str | None:
        """Why the log cannot be reached now, in one line (None: it can). Asks the cluster,
        so `/health` tells the truth about the connection its tasks depend on."""
        return None

    @abstractmethod
    def close(self) -> None: ...


@dataclass(frozen=True, slots=True, eq=False)
class RecordColumns:
    """Consecutive records of one topic partition as columns: what `poll_columns` returns,
    so a columnar sink path builds no object per record. Row i is
    `LogRecord(topic, partition, offsets[i], timestamps[i], keys[i], values[i], headers[i])`.
    """

    topic: str
    partition: int
    offsets: Sequence[int]
    timestamps: Sequence[int]
    keys: pa.Array | None  # binary, null where a record has no key; None: no record has one
    values: pa.Array  # binary; null where a record's value is null
    headers: Sequence[HeaderList]

    def __len__(self) -> int:
        return len(self.offsets)

    def record(self, i: int) -> LogRecord:
        return LogRecord(self.topic, self.partition, self.offsets[i], self.timestamps[i],
                         None if self.keys is None else self.keys[i].as_py(),
                         self.values[i].as_py(), self.headers[i])

    def records(self) -> list[LogRecord]:
        keys: Iterable[bytes | None] = [None] * len(self) if self.keys is None else \
            self.keys.to_pylist()
        return [LogRecord(self.topic, self.partition, o, t, k, v, h) for o, t, k, v, h in
                zip(self.offsets, self.timestamps, keys, self.values.to_pylist(), self.headers,
                    strict=True)]


def columns_of(records: Sequence[LogRecord]) -> list[RecordColumns]:
    """Polled records as one RecordColumns per topic partition, in their order."""
    import pyarrow as pa

    runs: dict[tuple[str, int], list[LogRecord]] = {}
    for r in records:
        runs.setdefault((r.topic, r.partition), []).append(r)
    out = []
    for (topic, partition), run in runs.items():
        keys = [r.key for r in run]
        out.append(RecordColumns(topic, partition, [r.offset for r in run],
                                 [r.timestamp for r in run],
                                 None if keys.count(None) == len(keys) else
                                 pa.array(keys, pa.binary()),
                                 pa.array([r.value for r in run], pa.binary()),
                                 [r.headers for r in run]))
    return out


@dataclass(frozen=True)
class Stall:
    """Why a consumer receives nothing although it should, since when (ms since the epoch):
    what a task's status, `/health`, a metric and one log line tell until it recovers."""

    reason: str
    since_ms: int


class GenerationWatch:
    """Notices a group member that completes no generation for longer than `bound_s` (a
    rebalance timeout plus a session: what a round may take): `due(stable)` returns the
    seconds waited once the bound passed, then again after each further bound, else None;
    `since_ms` is when the member last left a stable generation (wall clock)."""

    def __init__(self, bound_s: float, clock: Callable[[], float],
                 wall_clock: Callable[[], float]):
        self.bound_s = bound_s
        self._clock, self._wall_clock = clock, wall_clock
        self._since: float | None = None
        self._checked = 0.0
        self.since_ms = 0

    @property
    def since(self) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.since_ms / 1000))

    def due(self, stable: bool) -> float | None:
        now = self._clock()
        if stable:
            self._since = None
            return None
        if self._since is None:
            self._since = self._checked = now
            self.since_ms = int(self._wall_clock() * 1000)
            return None
        if now - self._checked < self.bound_s:
            return None
        self._checked = now
        return now - self._since


class Consumer(ABC):
    """One consumer; `subscribe` joins a group whose partitions are shared by its members."""

    def stall(self) -> Stall | None:
        """Set while the consumer cannot get records it should (its group hands it nothing,
        or its partitions grow while it fetches nothing) and is trying to recover."""
        return None

    def refetch(self, reason: str) -> None:
        """Fetching stopped although the partitions grow: start fetching them again from
        the positions reached (a transport whose fetching cannot stall ignores it)."""

    @abstractmethod
    def subscribe(self, topics: Sequence[str], *, on_assign: RebalanceCallback | None = None,
                  on_revoke: RebalanceCallback | None = None,
                  on_lost: RebalanceCallback | None = None) -> None:
        """Join the group. `on_revoke` runs before partitions are handed to another member
        (commit there); `on_lost` when the group took them away already (the member was
        evicted: a commit would be refused), `on_revoke` when not given, as Kafka's
        onPartitionsLost. Callbacks run in the thread that polls."""

    @abstractmethod
    def assign(self, partitions: Sequence[TopicPartition]) -> None:
        """Manual assignment, no group (e.g. reading a compacted store topic)."""

    @abstractmethod
    def assignment(self) -> set[TopicPartition]: ...

    @abstractmethod
    def poll_batch(self, max_records: int, timeout: float) -> list[LogRecord]:
        """Up to max_records from the assigned, unpaused partitions; rebalance callbacks run here."""

    def poll_columns(self, max_records: int, timeout: float) -> list[RecordColumns]:
        """`poll_batch` as columns. A transport that stores records back to back overrides
        it to cut the columns out of what it read without a LogRecord per record."""
        return columns_of(self.poll_batch(max_records, timeout))

    @abstractmethod
    def seek(self, tp: TopicPartition, offset: int) -> None: ...

    @abstractmethod
    def position(self, tp: TopicPartition) -> int: ...

    @abstractmethod
    def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]: ...

    @abstractmethod
    def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Synchronously commit next-offsets-to-read for the group."""

    @abstractmethod
    def pause(self, partitions: Iterable[TopicPartition]) -> None: ...

    @abstractmethod
    def resume(self, partitions: Iterable[TopicPartition]) -> None: ...

    @abstractmethod
    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]: ...

    def beginning_offsets(self, partitions: Iterable[TopicPartition]
                          ) -> dict[TopicPartition, int]:
        """The first offset each partition still holds (past what retention removed); 0
        for a transport that does not say (a log that removes nothing)."""
        return {tp: 0 for tp in partitions}

    @abstractmethod
    def close(self) -> None:
        """Leave the group (its partitions go to the remaining members)."""


class Admin(ABC):
    @abstractmethod
    def create_topics(self, specs: Sequence[TopicSpec], *, exist_ok: bool = True) -> None: ...

    @abstractmethod
    def list_topics(self) -> dict[str, int]:
        """Topic name -> partition count."""

    @abstractmethod
    def delete_topics(self, names: Sequence[str]) -> None: ...

    @abstractmethod
    def describe_topic(self, name: str) -> TopicSpec:
        """Partitions and the topic-level configs set on it (NotFoundError when missing)."""

    def describe_groups(self, group_ids: Sequence[str]) -> dict[str, Any]:
        return {}

    def delete_group_offsets(self, group_id: str, partitions: Sequence[TopicPartition]) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Release connections; the transport calls it when it closes."""


class Transport(ABC):
    """A factory of clients for one log (the embedded one, or one Kafka cluster)."""

    name: str

    @abstractmethod
    def producer(self, config: Mapping[str, Any] | None = None) -> Producer: ...

    @abstractmethod
    def consumer(self, group_id: str | None, config: Mapping[str, Any] | None = None) -> Consumer: ...

    @abstractmethod
    def admin(self, config: Mapping[str, Any] | None = None) -> Admin:
        """The transport's own admin client; with `config`, a new one made with these
        settings over the transport's base (a connector's, as Kafka Connect opens one on
        a connector's behalf), which the caller closes."""

    def unreachable(self) -> str | None:
        """Why the log cannot be reached now, in one line (None: it can). Asks the cluster,
        so `/health` tells the truth about the connection its tasks depend on."""
        return None

    @abstractmethod
    def close(self) -> None: ...

"""Records that flow between connectors and the runtime, with headers."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from kctl.api.data import Schema
from kctl.errors import ConfigError


@dataclass(frozen=True, slots=True, order=True)
class TopicPartition:
    """One partition of a topic, everywhere in kctl (records, transports, assignors);
    sorts by topic then partition; str() is "T0-0"."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"

    @classmethod
    def parse(cls, text: str) -> TopicPartition:
        """Inverse of str(): the partition number follows the last dash."""
        topic, dash, number = text.rpartition("-")
        if not dash or not topic or not number.isdigit():
            raise ConfigError(f"not a topic partition (expected 'topic-N'): {text!r}", key=text)
        return cls(topic, int(number))


@dataclass(frozen=True, slots=True)
class Header:
    key: str
    value: Any
    schema: Schema | None = None


class Headers:
    """An ordered, multi-valued list of headers (Kafka headers may repeat a key)."""

    __slots__ = ("_items",)

    def __init__(self, items: Iterable[Header] | None = None):
        self._items: list[Header] = list(items or ())

    def add(self, key: str, value: Any, schema: Schema | None = None) -> Headers:
        self._items.append(Header(key, value, schema))
        return self

    def last_with_name(self, key: str) -> Header | None:
        for h in reversed(self._items):
            if h.key == key:
                return h
        return None

    def all_with_name(self, key: str) -> list[Header]:
        return [h for h in self._items if h.key == key]

    def remove(self, key: str) -> Headers:
        self._items = [h for h in self._items if h.key != key]
        return self

    def copy(self) -> Headers:
        return Headers(self._items)

    def __iter__(self) -> Iterator[Header]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __bool__(self) -> bool:
        return bool(self._items)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Headers) and self._items == other._items

    def __repr__(self) -> str:
        return f"Headers({self._items!r})"


class TimestampType(Enum):
    NO_TIMESTAMP_TYPE = "NoTimestampType"
    CREATE_TIME = "CreateTime"
    LOG_APPEND_TIME = "LogAppendTime"


@dataclass(frozen=True, slots=True)
class ConnectRecord:
    """Fields common to source and sink records; `new_record` returns a changed copy."""

    topic: str
    kafka_partition: int | None
    key_schema: Schema | None
    key: Any
    value_schema: Schema | None
    value: Any
    timestamp: int | None = None
    headers: Headers = field(default_factory=Headers)

    def new_record(self, **changes: Any) -> Any:
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True, slots=True)
class SourceRecord(ConnectRecord):
    """A record a source task produced; source_partition/offset say where it came from."""

    source_partition: Mapping[str, Any] = field(default_factory=dict)
    source_offset: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SinkRecord(ConnectRecord):
    """A record delivered to a sink task, with its position in the topic."""

    kafka_offset: int = -1
    timestamp_type: TimestampType = TimestampType.CREATE_TIME
    original_topic: str | None = None
    original_kafka_partition: int | None = None
    original_kafka_offset: int | None = None

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.kafka_partition or 0)


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    """What the transport acknowledged for a produced record (SourceTask.commit_record)."""

    topic: str
    partition: int
    offset: int
    timestamp: int | None = None


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    offset: int
    metadata: str = ""


# --- records as columns -----------------------------------------------------------------------
# A task that reads or writes many records at once (a Spark job, a file chunk) can hand them
# over as one Arrow column instead of one object per record: the runtime then converts and
# moves the whole column at once when nothing needs the records one by one (no transforms),
# and otherwise takes `records()`, so a batch always means exactly what its records mean.


@dataclass(frozen=True, slots=True)
class SourceBatch:
    """Consecutive records of one source partition, as columns.

    Row i is the record `SourceRecord(topic, None, key_schema, keys[i], value_schema,
    values[i], source_partition=source_partition, source_offset={k: offsets[k][i] for k in
    offsets})`. `values` is a pyarrow Array of `value_schema` (a StructArray for a STRUCT
    schema); `keys`, when not None, a pyarrow Array of `key_schema` (records keyed by a
    table's primary key, say), else the records have no key.
    """

    topic: str
    source_partition: Mapping[str, Any]
    value_schema: Schema
    values: Any  # pyarrow.Array
    offsets: Mapping[str, Sequence[Any]]
    key_schema: Schema | None = None
    keys: Any = None  # pyarrow.Array of key_schema, or None: no keys

    def __len__(self) -> int:
        return len(self.values)

    def offset(self, i: int) -> dict[str, Any]:
        return {k: col[i] for k, col in self.offsets.items()}

    def records(self) -> list[SourceRecord]:
        from kctl.api.arrow import array_to_connect

        topic, schema, part = self.topic, self.value_schema, self.source_partition
        names = list(self.offsets)
        rows = zip(*self.offsets.values(), strict=True) if names else ((),) * len(self)
        ks = self.key_schema
        keys = array_to_connect(self.keys, ks) if self.keys is not None and ks is not None \
            else [None] * len(self)
        return [SourceRecord(topic, None, ks if k is not None else None, k, schema, v,
                             source_partition=part,
                             source_offset=dict(zip(names, off, strict=True)))
                for k, v, off in zip(keys, array_to_connect(self.values, schema), rows,
                                     strict=True)]


@dataclass(frozen=True, slots=True)
class SinkBatch:
    """Consecutive records of one topic partition, decoded into columns.

    Row i is `SinkRecord(topic, partition, key_schema, keys[i], value_schema, values[i],
    timestamps[i], headers[i], kafka_offset=offsets[i])`; `headers[i]` holds the raw
    (name, bytes) pairs as they were on the log. `keys`, when not None, is a pyarrow Array
    of `key_schema` (every record has a key, e.g. a table's primary key); None: no record
    has one.
    """

    topic: str
    partition: int
    offsets: Sequence[int]
    timestamps: Sequence[int]
    headers: Sequence[tuple[tuple[str, bytes | None], ...]]
    value_schema: Schema
    values: Any  # pyarrow.Array
    key_schema: Schema | None = None
    keys: Any = None  # pyarrow.Array of key_schema, or None: no keys

    def __len__(self) -> int:
        return len(self.offsets)

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def slice(self, start: int, stop: int | None = None) -> SinkBatch:
        stop = len(self) if stop is None else stop
        return SinkBatch(self.topic, self.partition, self.offsets[start:stop],
                         self.timestamps[start:stop], self.headers[start:stop],
                         self.value_schema, self.values.slice(start, stop - start),
                         self.key_schema,
                         None if self.keys is None else self.keys.slice(start, stop - start))

    def records(self) -> list[SinkRecord]:
        from kctl.api.arrow import array_to_connect

        topic, partition, schema = self.topic, self.partition, self.value_schema
        ks = self.key_schema
        keys = array_to_connect(self.keys, ks) if self.keys is not None and ks is not None \
            else [None] * len(self)
        out = []
        for off, ts, hs, k, v in zip(self.offsets, self.timestamps, self.headers, keys,
                                     array_to_connect(self.values, schema), strict=True):
            headers = Headers()
            for hk, hv in hs:
                headers.add(hk, hv)
            out.append(SinkRecord(topic, partition, ks if self.keys is not None else None, k,
                                  schema, v, ts, headers,
                                  kafka_offset=off, timestamp_type=TimestampType.CREATE_TIME,
                                  original_topic=topic, original_kafka_partition=partition,
                                  original_kafka_offset=off))
        return out

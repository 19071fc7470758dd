"""Records that flow between connectors and the runtime, with headers."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from kctl.api.data import Schema


@dataclass(frozen=True, slots=True, order=True)
class TopicPartition:
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


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

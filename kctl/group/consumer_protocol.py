"""Kafka's ConsumerProtocol: how a consumer's Subscription and Assignment travel in
JoinGroup and SyncGroup (protocol type "consumer"), so kctl's assignors can run a group on
a Kafka cluster next to Java or librdkafka consumers' tooling (kafka-consumer-groups shows
its members and assignments)."""

from __future__ import annotations

from collections.abc import Iterable

from kctl.errors import ProtocolError
from kctl.group._wire import Reader, Writer
from kctl.group.assignors.consumer import Assignment, Subscription, TopicPartition

__all__ = ["decode_assignment", "decode_subscription", "encode_assignment",
           "encode_subscription"]

VERSION = 3  # Subscription v3: owned partitions (v1), generation (v2), rack (v3)


def _write_partitions(w: Writer, partitions: Iterable[TopicPartition]) -> None:
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    w.i32(len(by_topic))
    for topic in sorted(by_topic):
        w.string(topic)
        numbers = sorted(by_topic[topic])
        w.i32(len(numbers))
        for n in numbers:
            w.i32(n)


def _read_partitions(r: Reader) -> tuple[TopicPartition, ...]:
    out: list[TopicPartition] = []
    for _ in range(max(r.i32(), 0)):
        topic = r.string()
        out += [TopicPartition(topic, r.i32()) for _ in range(max(r.i32(), 0))]
    return tuple(sorted(out))


def encode_subscription(s: Subscription) -> bytes:
    w = Writer()
    w.i16(VERSION)
    w.i32(len(s.topics))
    for topic in s.topics:
        w.string(topic)
    w.nullable_bytes(s.user_data)
    _write_partitions(w, s.owned_partitions)
    w.i32(s.generation_id)
    w.nullable_string(s.rack_id)
    return w.getvalue()


def decode_subscription(data: bytes, group_instance_id: str | None = None) -> Subscription:
    r = Reader(data, "consumer subscription")
    version = r.i16()
    if version < 0:
        raise ProtocolError(f"unsupported consumer subscription version {version}")
    topics = tuple(r.string() for _ in range(max(r.i32(), 0)))
    user_data = r.nullable_bytes()
    owned: tuple[TopicPartition, ...] = ()
    generation, rack = -1, None
    if version >= 1 and not r.at_end:
        owned = _read_partitions(r)
    if version >= 2 and not r.at_end:
        generation = r.i32()
    if version >= 3 and not r.at_end:
        rack = r.nullable_string()
    return Subscription(topics, user_data, owned, generation, rack, group_instance_id)


def encode_assignment(a: Assignment) -> bytes:
    w = Writer()
    w.i16(VERSION)
    _write_partitions(w, a.partitions)
    w.nullable_bytes(a.user_data)
    return w.getvalue()


def decode_assignment(data: bytes) -> Assignment:
    r = Reader(data, "consumer assignment")
    version = r.i16()
    if version < 0:
        raise ProtocolError(f"unsupported consumer assignment version {version}")
    partitions = _read_partitions(r)
    user_data = r.nullable_bytes() if not r.at_end else None
    return Assignment(partitions, user_data)

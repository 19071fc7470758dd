"""A look inside any topic (`kctl topic ...`): its partitions, the schemas its values carry,
and its records decoded by a connector's converters, as `kcat -C` shows them.

Everything here only reads, and every answer is bounded (records, bytes, time waited), so a
remote user cannot make a worker hold a whole topic in memory: a reader that wants more asks
again from the `next` positions an answer gives (`kctl topic read --follow` does).
"""

from __future__ import annotations

import hashlib
import json
import time
from base64 import b64encode
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from datetime import time as dt_time
from decimal import Decimal
from typing import Any, Literal

from kctl.api.converter import Converter
from kctl.api.data import Schema, Struct
from kctl.api.records import TopicPartition
from kctl.errors import NotFoundError, ValidationError
from kctl.runtime.secrets import REDACTOR
from kctl.transport.base import Consumer, LogRecord, Transport

MAX_RECORDS = 1000
"""Most records one answer holds."""
MAX_BYTES = 4 * 1024 * 1024
"""Most bytes (keys, values and headers as stored) one answer holds; the first record is
always given, whatever its size, so a reader never stalls on a large one."""
MAX_WAIT_MS = 10_000
"""Longest a read waits for records that are not there yet (`--follow`)."""
DESCRIBE_SAMPLE = 2000
"""Records per partition whose value schemas `describe` looks at: the first and the last
half of this many, so a schema that changed lately is seen too."""

Start = Literal["beginning", "end", "offset", "last"]


@dataclass(frozen=True)
class ReadRequest:
    """Where to read and how much: `start` applies to each partition read, unless
    `positions` (partition -> next offset, from an earlier answer's `next`) says where."""

    start: Start = "beginning"
    offset: int = 0
    last: int = 0
    partition: int | None = None
    positions: Mapping[int, int] = field(default_factory=dict)
    max_records: int = 100
    max_bytes: int = MAX_BYTES
    wait_ms: int = 0


@dataclass(frozen=True)
class Decoders:
    """The key and value converters records are decoded with, and whose they are."""

    key: Converter
    value: Converter
    source: str  # "connector NAME", "options" or "worker defaults"


def plain(value: Any) -> Any:
    """A decoded Connect value as JSON-ready data: structs as objects, decimals as exact
    text, times in ISO-8601, bytes as UTF-8 text (base64 when they are not text)."""
    if isinstance(value, Struct):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, Mapping):
        return {str(plain(k)): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, datetime | date | dt_time):
        return value.isoformat()
    if isinstance(value, bytes | bytearray | memoryview):
        raw = bytes(value)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return "base64:" + b64encode(raw).decode()
    return value


def _text(raw: bytes | None) -> str | None:
    return None if raw is None else raw.decode("utf-8", "backslashreplace")


def _redacted(value: Any) -> Any:
    """The value with the secrets this process knows hidden in every text it holds: a
    topic may carry them (a connector's config, as Kafka Connect's config topic stores it),
    and no REST answer shows a secret."""
    if isinstance(value, str):
        return REDACTOR.redact(value)
    if isinstance(value, dict):
        return {k: _redacted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redacted(v) for v in value]
    return value


def schema_json(schema: Schema | None) -> dict[str, Any] | None:
    """Kafka's schema JSON (JsonConverter's envelope form) of a schema."""
    from kctl.runtime.converters.json_schema import JsonSchemaCodec

    return JsonSchemaCodec().as_json_schema(schema)


def schema_id(js: dict[str, Any] | None) -> str | None:
    """A short name for a schema, the same in every answer and on every worker."""
    if js is None:
        return None
    return hashlib.sha256(json.dumps(js, sort_keys=True).encode()).hexdigest()[:10]


def _decode(conv: Converter, topic: str, raw: bytes | None) -> tuple[Any, Schema | None]:
    sv = conv.to_connect_data(topic, raw)
    return plain(sv.value), sv.schema


def describe_record(record: LogRecord, decoders: Decoders) -> dict[str, Any]:
    """One record as `kctl topic read` shows it; a part its converter cannot decode is
    shown as text, with the converter's error."""
    out: dict[str, Any] = {
        "partition": record.partition, "offset": record.offset,
        "timestamp": record.timestamp,
        "time": datetime.fromtimestamp(record.timestamp / 1000, UTC).isoformat(
            timespec="milliseconds"),
        "headers": [[k, _text(v)] for k, v in record.headers],
        "key": None, "value": None, "schema": None, "errors": []}
    for part, conv, raw in (("key", decoders.key, record.key),
                            ("value", decoders.value, record.value)):
        try:
            out[part], schema = _decode(conv, record.topic, raw)
        except Exception as e:  # not what this converter reads: the bytes as text
            out[part] = _text(raw)
            out["errors"].append(f"{part}: {type(e).__name__}: {e}")
            continue
        if part == "value":
            out["schema"] = schema_id(schema_json(schema))
    return _redacted(out) if REDACTOR else out


def _size(record: LogRecord) -> int:
    return len(record.key or b"") + len(record.value or b"") + sum(
        len(k) + len(v or b"") for k, v in record.headers)


def _partitions(transport: Transport, topic: str) -> int:
    count = transport.admin().list_topics().get(topic)
    if count is None:
        raise NotFoundError(f"Topic {topic} not found")
    return count


def list_topics(transport: Transport) -> list[dict[str, Any]]:
    return [{"name": name, "partitions": n}
            for name, n in sorted(transport.admin().list_topics().items())]


def _bounds(consumer: Consumer, tps: list[TopicPartition], wait_s: float = 5.0
            ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
    """Each partition's start and end offsets, exact.

    A broker may answer "latest" short of the end until a fetch has carried the partition's
    high watermark (Tansu answers the end of a partition's first batch), so every partition
    that holds records is fetched from once (the caller seeks where it reads afterwards).
    """
    starts, ends = consumer.beginning_offsets(tps), consumer.end_offsets(tps)
    unfetched = {tp for tp in tps if ends[tp] > starts[tp]}
    if not unfetched:
        return starts, ends
    for tp in tps:
        consumer.seek(tp, starts[tp])
    deadline = time.monotonic() + wait_s
    while unfetched and time.monotonic() < deadline:
        unfetched -= {r.topic_partition for r in consumer.poll_batch(100, 0.2)}
    return starts, consumer.end_offsets(tps)


def describe_topic(transport: Transport, topic: str, value_converter: Converter,
                   sample: int = DESCRIBE_SAMPLE) -> dict[str, Any]:
    """Partitions with their start and end offsets, and the value schemas seen in the first
    and last records of each partition (`sample` per partition at most)."""
    n = _partitions(transport, topic)
    tps = [TopicPartition(topic, p) for p in range(n)]
    consumer = transport.consumer(None, {"kctl.passive": "true"})
    versions: dict[str | None, dict[str, Any]] = {}
    scanned = 0
    try:
        consumer.assign(tps)
        starts, ends = _bounds(consumer, tps)
        for tp in tps:
            start, end = starts[tp], ends[tp]
            half = max(1, sample // 2)
            ranges = [(start, min(end, start + half))]
            if end - half > start + half:
                ranges.append((end - half, end))
            else:
                ranges = [(start, min(end, start + 2 * half))]
            for lo, hi in ranges:
                for r in _read_range(consumer, tp, lo, hi):
                    scanned += 1
                    try:
                        schema = value_converter.to_connect_data(topic, r.value).schema
                    except Exception:  # not this converter's bytes: no schema to show
                        continue
                    js = schema_json(schema)
                    sid = schema_id(js)
                    seen = versions.get(sid)
                    if seen is None:
                        versions[sid] = {"id": sid, "first_partition": r.partition,
                                         "first_offset": r.offset, "first_timestamp":
                                         r.timestamp, "records": 1, "schema": js}
                    else:
                        seen["records"] += 1
                        if r.timestamp < seen["first_timestamp"]:
                            seen.update(first_partition=r.partition, first_offset=r.offset,
                                        first_timestamp=r.timestamp)
    finally:
        consumer.close()
    schemas = sorted(versions.values(), key=lambda v: (v["first_timestamp"],
                                                       v["first_partition"], v["first_offset"]))
    for i, v in enumerate(schemas, 1):
        v["version"] = i
    return {"name": topic,
            "partitions": [{"partition": tp.partition, "start_offset": starts[tp],
                            "end_offset": ends[tp], "records": ends[tp] - starts[tp]}
                           for tp in tps],
            "records_scanned": scanned, "schemas": schemas}


def _read_range(consumer: Consumer, tp: TopicPartition, lo: int, hi: int,
                stall_s: float = 10.0) -> list[LogRecord]:
    """The records of [lo, hi) of one partition (the consumer is assigned every partition
    of the topic; the others are paused meanwhile)."""
    if hi <= lo:
        return []
    others = [p for p in consumer.assignment() if p != tp]
    consumer.pause(others)
    consumer.resume([tp])
    consumer.seek(tp, lo)
    out: list[LogRecord] = []
    progress = time.monotonic()
    try:
        while consumer.position(tp) < hi and time.monotonic() - progress < stall_s:
            batch = [r for r in consumer.poll_batch(min(1000, hi - lo), 0.2)
                     if r.partition == tp.partition]
            if batch:
                progress = time.monotonic()
                out.extend(r for r in batch if r.offset < hi)
    finally:
        consumer.resume(others)
    return out


def _start_positions(consumer: Consumer, tps: list[TopicPartition], request: ReadRequest
                     ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
    starts, ends = _bounds(consumer, tps)
    out = {}
    for tp in tps:
        if tp.partition in request.positions:
            at = request.positions[tp.partition]
        elif request.start == "end":
            at = ends[tp]
        elif request.start == "offset":
            at = request.offset
        elif request.start == "last":
            at = ends[tp] - request.last
        else:
            at = starts[tp]
        # never moved back to an end a broker may still answer short: a position past the
        # end only waits for records to come
        out[tp] = max(at, starts[tp])
    return out, ends


def read_records(transport: Transport, topic: str, request: ReadRequest,
                 decoders: Decoders) -> dict[str, Any]:
    """Records of `topic` from where `request` says, decoded, in offset order per partition
    and time order across them; `next` says where to read on (the end of what was read)."""
    if request.max_records < 1 or request.max_bytes < 1 or request.wait_ms < 0:
        raise ValidationError("max, max_bytes and wait_ms must be positive",
                              {"max": ["must be at least 1"]})
    n = _partitions(transport, topic)
    if request.partition is not None and not 0 <= request.partition < n:
        raise NotFoundError(f"Topic {topic} has no partition {request.partition} "
                            f"(it has {n})")
    limit = min(request.max_records, MAX_RECORDS)
    max_bytes = min(request.max_bytes, MAX_BYTES)
    wait_s = min(request.wait_ms, MAX_WAIT_MS) / 1000
    tps = [TopicPartition(topic, p) for p in range(n)
           if request.partition is None or p == request.partition]
    consumer = transport.consumer(None, {"kctl.passive": "true"})
    records: list[LogRecord] = []
    size = 0
    truncated = False
    try:
        consumer.assign(tps)
        positions, ends = _start_positions(consumer, tps, request)
        for tp, at in positions.items():
            consumer.seek(tp, at)
        deadline = time.monotonic() + wait_s
        stall = time.monotonic() + 10.0  # the end is known; a slow broker may lag behind it
        while len(records) < limit and not truncated:
            pending = [tp for tp in tps if positions[tp] < ends[tp]]
            now = time.monotonic()
            if not pending and now >= deadline:
                break
            if pending and now >= max(deadline, stall):
                break
            batch = consumer.poll_batch(limit - len(records), 0.2)
            for r in batch:
                tp = r.topic_partition
                if tp not in positions or r.offset < positions[tp]:
                    continue
                if records and size + _size(r) > max_bytes:
                    truncated = True
                    break
                records.append(r)
                size += _size(r)
                positions[tp] = r.offset + 1
                if len(records) >= limit:
                    break
            if batch:
                stall = time.monotonic() + 10.0
            if not pending or not batch:
                ends = consumer.end_offsets(tps)
        ends = consumer.end_offsets(tps)
    finally:
        consumer.close()
    records.sort(key=lambda r: (r.timestamp, r.partition, r.offset))
    return {"topic": topic, "decoded_by": decoders.source,
            "records": [describe_record(r, decoders) for r in records],
            "next": {str(tp.partition): positions[tp] for tp in tps},
            "end": {str(tp.partition): ends[tp] for tp in tps},
            "more": any(positions[tp] < ends[tp] for tp in tps),
            "limits": {"max_records": MAX_RECORDS, "max_bytes": MAX_BYTES,
                       "max_wait_ms": MAX_WAIT_MS}}

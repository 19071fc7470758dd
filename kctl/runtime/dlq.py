"""Reading and replaying a connector's dead letter queue (`kctl dlq show|replay`).

Sink DLQ records hold the consumed bytes: replay re-produces them to their original topic
(or another), so the sink consumes them again. Source DLQ records failed before they were
produced: replay decodes them and sends them through the connector's *current* transforms
and converters, so a fixed transform config lets them through.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from kctl.api.records import TopicPartition
from kctl.runtime.error_handling import HEADER_PREFIX
from kctl.transport.base import LogRecord, Producer, ProducerRecord, Transport

log = logging.getLogger(__name__)


def read_topic(transport: Transport, topic: str, *, limit: int | None = None,
               stall_s: float = 30.0) -> list[LogRecord]:
    """Everything in `topic` from the beginning to the end it has while it is read.

    Each partition is read until the consumer's position reaches its end offset, so a broker
    slow to answer makes this wait rather than return early with nothing. Only when no
    partition makes progress for `stall_s` does it give up, with what it has read.
    """
    partitions = transport.admin().list_topics().get(topic)
    if partitions is None:
        return []
    consumer = transport.consumer(None, {"kctl.passive": "true"})
    out: list[LogRecord] = []
    try:
        pending = {TopicPartition(topic, p) for p in range(partitions)}
        consumer.assign(sorted(pending))
        progress = time.monotonic()
        while pending and (limit is None or len(out) < limit):
            batch = consumer.poll_batch(1000, 0.2)
            if batch:
                out.extend(batch)
                progress = time.monotonic()
            ends = consumer.end_offsets(pending)
            pending = {tp for tp in pending if consumer.position(tp) < ends[tp]}
            if pending and time.monotonic() - progress > stall_s:
                log.warning("Reading %s: no progress for %.0fs on %s; returning %d record(s)",
                            topic, stall_s, sorted(pending), len(out))
                break
    finally:
        consumer.close()
    out.sort(key=lambda r: (r.timestamp, r.partition, r.offset))
    return out[:limit] if limit is not None else out


def _h(record: LogRecord, name: str) -> str | None:
    for k, v in record.headers:
        if k == HEADER_PREFIX + name:
            return None if v is None else v.decode("utf-8", "replace")
    return None


def _preview(b: bytes | None, width: int = 80) -> str | None:
    if b is None:
        return None
    s = b.decode("utf-8", "backslashreplace")
    return s if len(s) <= width else s[: width - 1] + "…"


def describe(record: LogRecord) -> dict[str, Any]:
    return {
        "dlq_offset": record.offset,
        "dlq_partition": record.partition,
        "time": datetime.fromtimestamp(record.timestamp / 1000, UTC).isoformat(timespec="milliseconds"),
        "stage": _h(record, "stage"),
        "exception": _h(record, "exception.class.name"),
        "message": _h(record, "exception.message"),
        "topic": _h(record, "topic"),
        "partition": _h(record, "partition"),
        "offset": _h(record, "offset"),
        "source_partition": _h(record, "source.partition"),
        "source_offset": _h(record, "source.offset"),
        "key": _preview(record.key),
        "value": _preview(record.value),
        "headers": {k: None if v is None else v.decode("utf-8", "replace")
                    for k, v in record.headers if k.startswith(HEADER_PREFIX)},
    }


def replay(records: list[LogRecord], transport: Transport, *, to_topic: str | None,
           is_source: bool,
           resend_source: Callable[[LogRecord, str], ProducerRecord | None]) -> int:
    """Re-send DLQ records; returns how many were produced.

    The producer is the connector's (worker `producer.*` under its `producer.override.*`)
    when `resend_source` can make one (`new_producer`, as the worker's SourceReplayer can),
    so a replay writes with the same settings as the task did.
    """
    new_producer: Callable[[], Producer] | None = getattr(resend_source, "new_producer", None)
    producer = new_producer() if new_producer is not None else transport.producer()
    sent = 0
    errors: list[BaseException] = []
    try:
        for r in records:
            original_topic = to_topic or _h(r, "topic")
            if not original_topic:
                continue
            headers = tuple((k, v) for k, v in r.headers if not k.startswith(HEADER_PREFIX))
            if is_source:
                if _h(r, "stage") == "TASK_POLL":
                    continue  # raw input the source could not parse: fix it at the source
                pr = resend_source(r, original_topic)
                if pr is None:
                    continue
            else:
                pr = ProducerRecord(original_topic, r.value, r.key, headers=headers)
            producer.send(pr, lambda md, err: err is not None and errors.append(err))
            sent += 1
        producer.flush(30)
    finally:
        producer.close()
    if errors:
        raise errors[0]
    return sent

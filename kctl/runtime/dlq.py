"""Reading, replaying and purging a connector's dead letter queue (`kctl dlq ...`).

Sink DLQ records hold the consumed bytes: replay re-produces them to their original topic
(or another), so the sink consumes them again. Source DLQ records failed before they were
produced: replay decodes them and sends them through the connector's *current* transforms
and converters, so a fixed transform config lets them through.

Purging does not delete records (a task may be writing to the topic at that moment): it
commits the topic's end offsets under the group `kctl-dlq-<connector>`, and reading and
replaying start there. Retention reclaims the space as for any topic.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kctl.api.records import TopicPartition
from kctl.runtime.error_handling import HEADER_PREFIX
from kctl.transport.base import LogRecord, Producer, ProducerRecord, Transport

log = logging.getLogger(__name__)


def purge_group(connector: str) -> str:
    """The group whose committed offsets mark where a connector's DLQ starts after a purge."""
    return f"kctl-dlq-{connector}"


def start_offsets(transport: Transport, topic: str, group: str) -> dict[TopicPartition, int]:
    """Where reading starts: the offsets a purge committed (none: the beginning)."""
    partitions = transport.admin().list_topics().get(topic)
    if partitions is None:
        return {}
    consumer = transport.consumer(group, {"kctl.passive": "true"})
    try:
        committed = consumer.committed([TopicPartition(topic, p) for p in range(partitions)])
    finally:
        consumer.close()
    return {tp: o for tp, o in committed.items() if o is not None}


def purge(transport: Transport, topic: str, group: str) -> int:
    """Hide everything the DLQ holds now from later reads and replays; returns how many
    records that hides."""
    partitions = transport.admin().list_topics().get(topic)
    if partitions is None:
        return 0
    starts = start_offsets(transport, topic, group)
    consumer = transport.consumer(group, {"kctl.passive": "true"})
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        ends = consumer.end_offsets(tps)
        consumer.commit(ends)
    finally:
        consumer.close()
    # offsets, not a count of what is left: retention may have removed some already
    return sum(max(0, ends[tp] - starts.get(tp, 0)) for tp in tps)


def read_topic(transport: Transport, topic: str, *, limit: int | None = None,
               stall_s: float = 30.0,
               start: Mapping[TopicPartition, int] | None = None) -> list[LogRecord]:
    """Everything in `topic` from the beginning (or `start`) to the end it has while it is
    read.

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
        for tp, offset in (start or {}).items():
            if tp in pending:
                consumer.seek(tp, offset)
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


def _text(b: bytes | None) -> str | None:
    """The bytes as text, whole (JSON and YAML are never truncated; tables preview)."""
    return None if b is None else b.decode("utf-8", "backslashreplace")


def envelope_payload(text: str | None) -> str | None:
    """The payload of a JsonConverter envelope (`{"schema": ..., "payload": ...}`) as JSON
    text: what was rejected, without the schema that comes first and hides it in a
    preview. None when the text is not such an envelope."""
    if not text or not text.startswith("{"):
        return None
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    if not isinstance(doc, dict) or set(doc) != {"schema", "payload"}:
        return None
    return json.dumps(doc["payload"], ensure_ascii=False, separators=(", ", ": "))


def describe(record: LogRecord) -> dict[str, Any]:
    key, value = _text(record.key), _text(record.value)
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
        "key": key,
        "value": value,
        "key_payload": envelope_payload(key),
        "value_payload": envelope_payload(value),
        "headers": {k: None if v is None else v.decode("utf-8", "replace")
                    for k, v in record.headers if k.startswith(HEADER_PREFIX)},
    }


NO_TOPIC = ("the record names no original topic (context headers were off: set "
            "errors.deadletterqueue.context.headers.enable=true, or replay with --to TOPIC)")
RAW_INPUT = ("raw input the source could not parse (stage TASK_POLL): fix it at the source "
             "and let the connector read it again")
DROPPED = "the connector's current transforms drop it"


@dataclass
class ReplayReport:
    """What a replay did with each DLQ record: sent, skipped (with why) or failed."""

    replayed: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    failed: int = 0
    errors: Counter[str] = field(default_factory=Counter)

    @property
    def total(self) -> int:
        return self.replayed + sum(self.skipped.values()) + self.failed

    def to_json(self) -> dict[str, Any]:
        return {"replayed": self.replayed, "skipped": sum(self.skipped.values()),
                "failed": self.failed, "total": self.total,
                "skipped_reasons": [{"reason": r, "count": n}
                                    for r, n in self.skipped.most_common()],
                "errors": [{"error": e, "count": n} for e, n in self.errors.most_common()]}


def replay(records: list[LogRecord], transport: Transport, *, to_topic: str | None,
           is_source: bool,
           resend_source: Callable[[LogRecord, str], ProducerRecord | None]) -> ReplayReport:
    """Re-send DLQ records and say what happened to each.

    The producer is the connector's (worker `producer.*` under its `producer.override.*`)
    when `resend_source` can make one (`new_producer`, as the worker's SourceReplayer can),
    so a replay writes with the same settings as the task did. A record that cannot be
    re-encoded or sent counts as failed with its error; the others still go.
    """
    new_producer: Callable[[], Producer] | None = getattr(resend_source, "new_producer", None)
    producer = new_producer() if new_producer is not None else transport.producer()
    report = ReplayReport()
    send_errors: list[BaseException] = []

    def fail(error: BaseException) -> None:
        report.failed += 1
        report.errors[f"{type(error).__name__}: {error}"] += 1

    try:
        for r in records:
            original_topic = to_topic or _h(r, "topic")
            if not original_topic:
                report.skipped[NO_TOPIC] += 1
                continue
            headers = tuple((k, v) for k, v in r.headers if not k.startswith(HEADER_PREFIX))
            if is_source:
                if _h(r, "stage") == "TASK_POLL":
                    report.skipped[RAW_INPUT] += 1
                    continue
                try:
                    pr = resend_source(r, original_topic)
                except Exception as e:  # a record the current converters cannot take
                    fail(e)
                    continue
                if pr is None:
                    report.skipped[DROPPED] += 1
                    continue
            else:
                pr = ProducerRecord(original_topic, r.value, r.key, headers=headers)
            try:
                producer.send(pr, lambda md, err: err is not None and send_errors.append(err))
            except Exception as e:
                fail(e)
                continue
            report.replayed += 1
        producer.flush(30)
    finally:
        producer.close()
    for error in send_errors:  # acknowledged as failed after they were counted as sent
        report.replayed -= 1
        fail(error)
    return report

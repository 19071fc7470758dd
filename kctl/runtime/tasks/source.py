"""WorkerSourceTask: poll, transform, convert, produce, commit the acknowledged offsets."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kctl.api.connector import (
    OffsetStorageReader,
    SourceTask,
    SparkProvider,
)
from kctl.api.converter import Converter
from kctl.api.records import (
    RecordMetadata,
    SourceBatch,
    SourceRecord,
)
from kctl.errors import ConnectError, TransportError
from kctl.runtime.error_handling import (
    FAILED,
    DeadLetterQueueReporter,
    RetryWithToleranceOperator,
    Stage,
)
from kctl.runtime.source_positions import (
    ExactlyOncePositions,
    NoSourcePositions,
    SourcePositions,
)
from kctl.runtime.tasks.base import (
    StatusListener,
    TaskSnapshot,
    Transforms,
    WorkerTask,
    _class_name,
    _close_transforms,
    _header_bytes,
    _NoTransforms,
    _raise,
    _transform_class,
)
from kctl.runtime.tasks.contexts import _SourceErrantReporter, _SourceTaskContext
from kctl.runtime.tasks.submitted import SubmittedRecords
from kctl.states import TaskId
from kctl.transport.base import (
    BatchDelivery,
    Consumer,
    Producer,
    ProducerRecord,
    Stall,
)

log = logging.getLogger(__name__)

# Records in flight and no acknowledgement for this long: the producer cannot deliver
# (an acknowledgement takes milliseconds; librdkafka retries for delivery.timeout.ms)
DELIVERY_STALL_S = 30.0
# Records (or columnar batches) sent and not yet acknowledged, at most: a task that produces
# faster than the cluster acknowledges waits, as Kafka's producer blocks when its buffer is
# full, so a stop's final flush has about a second of acknowledgements to wait for, not the
# million records librdkafka would queue (an unthrottled DataGen task then outlived its
# shutdown timeout at every routine revocation)
MAX_IN_FLIGHT = 100_000


class WorkerSourceTask(WorkerTask):
    def __init__(
        self,
        task_id: TaskId,
        task: SourceTask,
        props: Mapping[str, str],
        *,
        status: StatusListener,
        producer: Producer,
        key_converter: Converter,
        value_converter: Converter,
        transforms: Transforms | None,
        offset_reader: OffsetStorageReader,
        offset_writer: Any,
        operator: RetryWithToleranceOperator,
        spark: SparkProvider,
        paused: bool = False,
        commit_interval_ms: int = 10000,
        commit_timeout_ms: int = 5000,
        ensure_topic: Callable[[str], None] = lambda t: None,
        partition_count: Callable[[str], int] = lambda t: 1,
        exactly_once: bool = False,
        log_reader: Callable[[], Consumer] | None = None,
        stored_offsets: Callable[[], list[tuple[dict, dict | None]]] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        super().__init__(task_id, status, paused=paused, commit_interval_ms=commit_interval_ms,
                         clock=clock)
        self._next_commit: float | None = None
        self.task = task
        self.props = props
        self.producer = producer
        self.key_converter = key_converter
        self.value_converter = value_converter
        self.transforms = transforms or _NoTransforms()
        self.offset_reader = offset_reader
        self.offset_writer = offset_writer
        self.operator = operator
        self.spark = spark
        self.commit_timeout = commit_timeout_ms / 1000
        self.ensure_topic = ensure_topic
        self.submitted = SubmittedRecords()
        self._produce_error: BaseException | None = None
        self._known_topics: set[str] = set()
        self._unsent: list[tuple[ProducerRecord, list, SourceRecord]] = []
        self.records_sent = 0
        self.columns_sent = 0  # of records_sent, how many went as columns
        self._columnar_ok: bool | None = None
        self._acked_seen = 0
        self._acked_at = self.clock()
        self.positions: SourcePositions = ExactlyOncePositions(
            task_id, offset_writer=offset_writer, commit_timeout=self.commit_timeout,
            log_reader=log_reader, stored_offsets=stored_offsets,
            partition_count=partition_count, flush_sent=self._flush_sent,
        ) if exactly_once else NoSourcePositions()

    def _flush_sent(self) -> bool:
        """Send what was converted and wait for the log (before a DLQ write that must come
        after them): True when everything sent is acknowledged."""
        self._send_unsent()
        return self.producer.flush(self.commit_timeout) == 0

    def snapshot(self) -> TaskSnapshot:
        return self.counters.snapshot("source", delivered=self.records_sent,
                                      errors=self.operator.counters(), connector_task=self.task)

    def initialize_and_start(self) -> None:
        self.positions.recover()
        if self.positions.tracker is not None:
            for reporter in self.operator.reporters:
                if isinstance(reporter, DeadLetterQueueReporter):
                    reporter.tracker = self.positions.tracker
        self.task.initialize(_SourceTaskContext(self.props, self.offset_reader, self.spark,
                                                _SourceErrantReporter(self)))
        self.task.start(self.props)

    def execute(self) -> None:
        while self.wait_if_paused():
            self.step()

    def step(self) -> int:
        """One turn of the loop: poll, send, and commit once the interval has passed
        (kctl.testing turns it from the test's thread); returns the records polled."""
        if self._next_commit is None:
            self._next_commit = self.clock() + self.commit_interval
        # A failing poll() is never skipped: that would lose whatever it had read.
        # Retriable errors are retried; bad input goes through the errant reporter.
        records = self.operator.execute(self.task.poll, Stage.TASK_POLL, _class_name(self.task),
                                        tolerate=False)
        moved = 0
        if records and records is not FAILED:
            moved = sum(len(r) if type(r) is SourceBatch else 1 for r in records)
            self.counters.batch(moved)
            self._wait_for_room()
            self._send(records)
        self.idle_release.tick(moved)
        self.producer.poll(0)
        if self._produce_error is not None:
            raise ConnectError(f"Failed to produce records: {self._produce_error}") \
                from self._produce_error
        if self.clock() >= self._next_commit:
            self.commit_offsets(wait=False)
            self._next_commit = self.clock() + self.commit_interval
        self._check_delivery()
        return moved

    def _wait_for_room(self) -> None:
        """Polled records wait while MAX_IN_FLIGHT are unacknowledged. The wait is between
        poll and send, so the next batch is read while the last one is acknowledged (waiting
        after the send made a batch the size of the limit wait for its own acks before the
        next read)."""
        while self.submitted.in_flight >= MAX_IN_FLIGHT and not self.stopping \
                and self._produce_error is None:
            self.producer.poll(0.05)
            self._check_delivery()

    def _check_delivery(self) -> None:
        """Records sent and none acknowledged for DELIVERY_STALL_S: the producer cannot
        deliver (the cluster is unreachable, the topic refuses them), and the task says so
        until acknowledgements come again (the producer keeps retrying)."""
        now = self.clock()
        submitted = self.submitted
        if submitted.in_flight == 0 or submitted.acked != self._acked_seen:
            self._acked_seen, self._acked_at = submitted.acked, now
            self.note_stall(None)
            return
        waited = now - self._acked_at
        if waited >= DELIVERY_STALL_S and self.counters.stall is None:
            self.note_stall(Stall(
                f"{submitted.in_flight} sends to the Kafka cluster are not acknowledged and "
                f"none was in {waited:.0f} s; the producer keeps trying",
                int(time.time() * 1000 - waited * 1000)))

    def _send(self, items: Sequence[SourceRecord | SourceBatch]) -> None:
        records: list[SourceRecord] = []
        for item in items:
            if type(item) is SourceBatch:
                if records:
                    self._send_records(records)
                    records = []
                if not self._send_columns(item):
                    self._send_records(item.records())
            else:
                records.append(item)  # type: ignore[arg-type]
        if records:
            self._send_records(records)
        self._send_unsent()

    def _columnar(self) -> bool:
        """Whether batches may skip per-record work: nothing sees records one by one."""
        ok = self._columnar_ok
        if ok is None:
            chain = self.transforms
            ok = self._columnar_ok = (
                (isinstance(chain, _NoTransforms) or len(getattr(chain, "stages", (0,))) == 0)
                and type(self.task).commit_record is SourceTask.commit_record)
        return ok

    def _send_columns(self, batch: SourceBatch) -> bool:
        """Convert and produce a batch as columns; False when it must go record by record
        (transforms, a converter without a columnar form, or data only the per-record
        path can report precisely). Nothing is sent before that is decided."""
        n = len(batch)
        if n == 0 or not self._columnar():
            return n == 0
        topic = batch.topic
        keys = None
        try:
            if batch.keys is None:
                if self.key_converter.from_connect_data(topic, None, None) is not None:
                    return False
            else:
                if batch.key_schema is None:
                    return False
                keys = self.key_converter.from_arrow(topic, batch.key_schema, batch.keys)
                if keys is None or len(keys) != n:
                    return False
            values = self.value_converter.from_arrow(topic, batch.value_schema, batch.values)
        except Exception:
            return False
        if values is None or len(values) != n:
            return False
        if topic not in self._known_topics:
            self.ensure_topic(topic)
            self._known_topics.add(topic)
            self.positions.before_first_write(topic)
        headers = self.positions.batch_headers(batch)
        self._send_unsent()  # records before this batch go first
        entry = self.submitted.submit_batch(batch)
        if keys is None:
            self.producer.send_batch(topic, values, self._batch_callback(entry, batch),
                                     headers=headers)
        else:
            self.producer.send_batch(topic, values, self._batch_callback(entry, batch),
                                     headers=headers, keys=keys)
        self.records_sent += n
        self.columns_sent += n
        return True

    def _batch_callback(self, entry: list, batch: SourceBatch) -> Callable:
        def on_delivery(result: BatchDelivery) -> None:
            for (topic, partition), end in result.ends.items():
                self.positions.delivered(topic, partition, end)
            if not result.errors:
                self.submitted.ack(entry)
                return
            records = batch.records()
            for i, err in sorted(result.errors.items()):
                try:
                    self.operator.execute(lambda e=err: _raise(e), Stage.KAFKA_PRODUCE,
                                          _class_name(self.producer), source=records[i])
                except ConnectError as e:
                    self._produce_error = e
                    return
            self.submitted.ack(entry)  # every failed row was tolerated (dead-lettered)
        return on_delivery

    def _send_records(self, records: Sequence[SourceRecord]) -> None:
        op = self.operator
        transforms = self.transforms
        kc, vc = self.key_converter, self.value_converter
        kc_name, vc_name = _class_name(kc), _class_name(vc)
        for rec in records:
            entry = self.submitted.submit(rec)
            tr = op.execute(lambda r=rec: transforms.apply(r), Stage.TRANSFORMATION,
                            _transform_class(transforms), source=rec)
            if tr is None or tr is FAILED:  # filtered or dead-lettered: done with it
                self.submitted.ack(entry)
                self.task.commit_record(rec, None)
                continue
            topic = tr.topic
            key = op.execute(lambda t=tr: kc.from_connect_data(t.topic, t.key_schema, t.key, t.headers),
                             Stage.KEY_CONVERTER, kc_name, source=rec)
            if key is FAILED:
                self.submitted.ack(entry)
                self.task.commit_record(rec, None)
                continue
            value = op.execute(lambda t=tr: vc.from_connect_data(t.topic, t.value_schema, t.value, t.headers),
                               Stage.VALUE_CONVERTER, vc_name, source=rec)
            if value is FAILED:
                self.submitted.ack(entry)
                self.task.commit_record(rec, None)
                continue
            headers: tuple = ()
            if tr.headers:
                headers = tuple((h.key, _header_bytes(h.value)) for h in tr.headers)
            headers = (*headers, *self.positions.record_headers(rec))
            if topic not in self._known_topics:
                self.ensure_topic(topic)
                self._known_topics.add(topic)
                self.positions.before_first_write(topic)
            # (a DLQ write later in this batch sends these first: see dlq_headers)
            self._unsent.append((ProducerRecord(topic, value, key, tr.kafka_partition,
                                                headers, tr.timestamp), entry, rec))

    def _send_unsent(self) -> None:
        """Converted records are sent together after the batch, or before a DLQ write."""
        out, self._unsent = self._unsent, []
        for pr, entry, rec in out:
            on_delivery = self._callback(entry, rec)
            try:
                self.producer.send(pr, on_delivery)
            except TransportError as e:
                # refused before it was queued (e.g. larger than message.max.bytes): the same
                # stage, tolerance and DLQ as a record whose delivery failed
                on_delivery(None, e)
        self.records_sent += len(out)

    def _callback(self, entry: list, rec: SourceRecord) -> Callable:
        def on_delivery(md: RecordMetadata | None, err: BaseException | None) -> None:
            if err is None:
                self.submitted.ack(entry)
                if md is not None:
                    self.positions.delivered(md.topic, md.partition, md.offset + 1)
                try:
                    self.task.commit_record(rec, md)
                except Exception as e:
                    log.warning("commit_record failed for %s: %s", self.id, e)
                return
            try:
                result = self.operator.execute(lambda: _raise(err), Stage.KAFKA_PRODUCE,
                                               _class_name(self.producer), source=rec)
            except ConnectError as e:
                self._produce_error = e
                return
            if result is FAILED:
                self.submitted.ack(entry)
        return on_delivery

    def commit_offsets(self, wait: bool = True) -> bool:
        """Write offsets of acknowledged records; returns False when the flush timed out
        or the offsets could not be written.

        `wait=False` (the periodic commit, as Kafka Connect's since KIP-618's
        SubmittedRecords) commits what is acknowledged without waiting for the rest, so
        the task goes on reading while the broker acknowledges: waiting for 100k records'
        acks held the source 0.5-0.6 s a commit on the test broker. The exactly-once
        positions are written only when nothing is outstanding, as before; until then a
        restart reads the log from the last ones written, which only takes longer.
        """
        started = time.monotonic()
        ok = False
        try:
            ok = self._commit_offsets(wait)
            return ok
        finally:
            self.counters.committed(time.monotonic() - started, ok)

    def _commit_offsets(self, wait: bool = True) -> bool:
        remaining = self.producer.flush(self.commit_timeout if wait else 0)
        committable = self.submitted.committable()
        for partition, offset in committable.values():
            self.offset_writer.offset(partition, offset)
        if remaining == 0 and committable:
            # everything sent is acknowledged: positions and offsets describe the same point
            self.positions.commit()
        if committable and self.offset_writer.begin_flush():
            try:
                self.offset_writer.do_flush().result(self.commit_timeout)
            except Exception as e:
                self.offset_writer.cancel_flush()
                log.error("Offset commit failed for %s: %s", self.id, e)
                return False
        try:
            self.task.commit()
        except Exception as e:
            log.warning("SourceTask.commit failed for %s: %s", self.id, e)
        return remaining == 0 or not wait

    def close(self, failed: bool) -> None:
        try:
            if not failed:
                self.commit_offsets()
            else:
                # Records acknowledged before the failure are safe to commit.
                self.producer.flush(self.commit_timeout)
                committable = self.submitted.committable()
                for partition, offset in committable.values():
                    self.offset_writer.offset(partition, offset)
                if committable and self.offset_writer.begin_flush():
                    self.offset_writer.do_flush().result(self.commit_timeout)
        finally:
            try:
                self.task.stop()
            finally:
                _close_transforms(self.transforms)
                try:
                    self.producer.close()
                finally:
                    self.operator.close()


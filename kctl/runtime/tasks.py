"""The task loops: WorkerSourceTask (poll, transform, convert, produce, commit acknowledged
offsets) and WorkerSinkTask (fetch, convert, transform, put, flush, commit).

Each runs in its own thread; state changes go to a StatusListener. Every step that can fail
per record runs through the RetryWithToleranceOperator with its Kafka Connect stage.
"""

from __future__ import annotations

import bisect
import collections
import logging
import re
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from kctl.api.connector import (
    OffsetStorageReader,
    SinkTask,
    SourceTask,
    SparkProvider,
    partition_key,
)
from kctl.api.converter import Converter
from kctl.api.records import (
    Headers,
    OffsetAndMetadata,
    RecordMetadata,
    SinkBatch,
    SinkRecord,
    SourceBatch,
    SourceRecord,
    TimestampType,
    TopicPartition,
)
from kctl.errors import ConnectError, RetriableError, TransportError
from kctl.runtime.error_handling import (
    FAILED,
    DeadLetterQueueReporter,
    RetryWithToleranceOperator,
    Stage,
    Tolerance,
    source_record_payload,
)
from kctl.runtime.source_positions import (
    ExactlyOncePositions,
    NoSourcePositions,
    SourcePositions,
)
from kctl.states import State, TaskId
from kctl.transport.base import (
    BatchDelivery,
    Consumer,
    LogRecord,
    Producer,
    ProducerRecord,
    RecordColumns,
)

log = logging.getLogger(__name__)


class StatusListener(Protocol):
    def on_task_state(self, task: TaskId, state: State, trace: str | None = None) -> None: ...

    def on_topic_used(self, connector: str, topic: str) -> None: ...


class Transforms(Protocol):
    def apply(self, record: Any) -> Any: ...


class _NoTransforms:
    def apply(self, record: Any) -> Any:
        return record


def _trace(e: BaseException) -> str:
    return "".join(traceback.format_exception(e))


def _class_name(obj: Any) -> str:
    return f"{type(obj).__module__}.{type(obj).__qualname__}"


def _transform_class(chain: Any) -> Callable[[], str]:
    """The class of the transform that failed (as Kafka reports it), not the chain's."""

    def name() -> str:
        stage = getattr(chain, "failed_stage", None)
        return stage.class_name if stage is not None else _class_name(chain)

    return name


def _close_transforms(chain: Any) -> None:
    close = getattr(chain, "close", None)
    if close is not None:
        try:
            close()
        except Exception as e:
            log.warning("closing transforms failed: %s", e)


class WorkerTask:
    """Lifecycle shared by both loops: thread, pause/resume, stop, failure reporting."""

    def __init__(self, task_id: TaskId, status: StatusListener, *, paused: bool,
                 commit_interval_ms: int, clock: Callable[[], float] = time.monotonic):
        self.id = task_id
        self.status = status
        self.clock = clock
        self.commit_interval = commit_interval_ms / 1000
        self._paused = paused
        self._stopping = threading.Event()
        self._abandoned = False
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, name=f"task-{task_id}", daemon=True)
        self.failed: BaseException | None = None
        self.started_count = 0

    # -- control (any thread) --------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()

    def pause(self) -> None:
        with self._cond:
            self._paused = True
            self._cond.notify_all()

    def resume(self) -> None:
        with self._cond:
            self._paused = False
            self._cond.notify_all()

    def stop(self) -> None:
        self._stopping.set()
        with self._cond:
            self._cond.notify_all()

    def join(self, timeout: float) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def abandon(self) -> None:
        """The worker gave up waiting: a restarted task may already run under this id, so
        whatever this thread does when it finally ends must not overwrite its status."""
        self._abandoned = True

    def _report(self, state: State, trace: str | None = None) -> None:
        if not self._abandoned:
            self.status.on_task_state(self.id, state, trace)

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def wait_unless_stopping(self, seconds: float) -> bool:
        """Sleep for a backoff, waking at once when a stop is requested; True if stopping."""
        return self._stopping.wait(seconds)

    # -- task thread ---------------------------------------------------------------------
    def _run(self) -> None:
        try:
            self.initialize_and_start()
            self._report(State.PAUSED if self._paused else State.RUNNING)
            self.execute()
        except BaseException as e:  # a task failure must never take the worker down
            self.failed = e
            log.error("Task %s failed: %s", self.id, e, exc_info=e)
            self._report(State.FAILED, _trace(e))
            try:
                self.close(failed=True)
            except BaseException as ce:
                log.warning("Task %s failed to close: %s", self.id, ce)
            return
        try:
            self.close(failed=False)
        except BaseException as e:
            log.error("Task %s failed while stopping: %s", self.id, e, exc_info=e)
            self._report(State.FAILED, _trace(e))
            return
        self._report(State.UNASSIGNED)

    def wait_if_paused(self) -> bool:
        """Block while paused; returns True when the loop should go on."""
        if not self._paused:
            return not self.stopping
        self.on_pause()
        self._report(State.PAUSED)
        with self._cond:
            while self._paused and not self.stopping:
                self._cond.wait(0.5)
                self.while_paused()
        if not self.stopping:
            self.on_resume()
            self._report(State.RUNNING)
        return not self.stopping

    def on_pause(self) -> None:
        pass

    def on_resume(self) -> None:
        pass

    def while_paused(self) -> None:
        pass

    def initialize_and_start(self) -> None:
        raise NotImplementedError

    def execute(self) -> None:
        raise NotImplementedError

    def close(self, failed: bool) -> None:
        raise NotImplementedError


class _SourceTaskContext:
    def __init__(self, configs: Mapping[str, str], reader: OffsetStorageReader,
                 spark: SparkProvider, reporter: _SourceErrantReporter):
        self._configs = configs
        self._reader = reader
        self._spark = spark
        self._reporter = reporter

    def errant_record_reporter(self) -> _SourceErrantReporter:
        return self._reporter

    @property
    def configs(self) -> Mapping[str, str]:
        return self._configs

    @property
    def offset_storage_reader(self) -> OffsetStorageReader:
        return self._reader

    def spark(self) -> Any:
        return self._spark.spark()


class _SourceErrantReporter:
    """Input a source could not turn into a record (stage TASK_POLL) takes its place in
    the partition's order: dead-lettered, then acknowledged, so the offset moves past it
    only once everything before it is acknowledged too."""

    def __init__(self, owner: WorkerSourceTask):
        self._owner = owner

    def report(self, record: SourceRecord, error: BaseException) -> None:
        owner = self._owner
        if owner.operator.tolerance is Tolerance.NONE:
            raise error  # poll() fails, and with it the task, naming the input
        entry = owner.submitted.submit(record)
        owner.operator.execute(lambda: _raise(error), Stage.TASK_POLL,
                               _class_name(owner.task), source=record)
        owner.submitted.ack(entry)
        owner.task.commit_record(record, None)


class SubmittedRecords:
    """Records in flight per source partition; offsets advance only over an acked prefix."""

    def __init__(self) -> None:
        self._pending: dict[tuple, collections.deque[list]] = {}
        self._partitions: dict[tuple, Mapping[str, Any]] = {}
        self._committable: dict[tuple, Mapping[str, Any]] = {}
        self.in_flight = 0

    def submit(self, record: SourceRecord) -> list:
        return self._submit(record.source_partition, record.source_offset)

    def submit_batch(self, batch: SourceBatch) -> list:
        """One entry for all rows: the offset moves to the last row once all are acked."""
        return self._submit(batch.source_partition, batch.offset(len(batch) - 1))

    def _submit(self, partition: Mapping[str, Any], offset: Mapping[str, Any]) -> list:
        key = partition_key(partition)
        entry = [offset, False]
        dq = self._pending.get(key)
        if dq is None:
            dq = self._pending[key] = collections.deque()
            self._partitions[key] = partition
        dq.append(entry)
        self.in_flight += 1
        return entry

    def ack(self, entry: list) -> None:
        if not entry[1]:
            entry[1] = True
            self.in_flight -= 1

    def committable(self) -> dict[tuple, tuple[Mapping[str, Any], Mapping[str, Any]]]:
        """Pop acked prefixes; return {key: (partition, latest offset)} that advanced."""
        out = {}
        for key, dq in self._pending.items():
            last = None
            while dq and dq[0][1]:
                last = dq.popleft()[0]
            if last is not None:
                out[key] = (self._partitions[key], last)
        return out




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
    ):
        super().__init__(task_id, status, paused=paused, commit_interval_ms=commit_interval_ms)
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
        next_commit = self.clock() + self.commit_interval
        task_class = _class_name(self.task)
        while self.wait_if_paused():
            # A failing poll() is never skipped: that would lose whatever it had read.
            # Retriable errors are retried; bad input goes through the errant reporter.
            records = self.operator.execute(self.task.poll, Stage.TASK_POLL, task_class,
                                            tolerate=False)
            if records and records is not FAILED:
                self._send(records)
            self.producer.poll(0)
            if self._produce_error is not None:
                raise ConnectError(f"Failed to produce records: {self._produce_error}") \
                    from self._produce_error
            if self.clock() >= next_commit:
                self.commit_offsets()
                next_commit = self.clock() + self.commit_interval

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
        try:
            if self.key_converter.from_connect_data(topic, None, None) is not None:
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
        self.producer.send_batch(topic, values, self._batch_callback(entry, batch),
                                 headers=headers)
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

    def commit_offsets(self) -> bool:
        """Write offsets of acknowledged records; returns False when the flush timed out."""
        remaining = self.producer.flush(self.commit_timeout)
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
        return remaining == 0

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


def _raise(err: BaseException) -> Any:
    raise err


def _header_bytes(v: Any) -> bytes | None:
    if v is None or isinstance(v, bytes):
        return v
    return str(v).encode()


# --- sink ----------------------------------------------------------------------------------


class _SinkTaskContext:
    def __init__(self, owner: WorkerSinkTask):
        self._owner = owner

    @property
    def configs(self) -> Mapping[str, str]:
        return self._owner.props

    def offset(self, offsets: Mapping[TopicPartition, int]) -> None:
        self._owner.rewinds.update(offsets)

    def timeout(self, timeout_ms: int) -> None:
        self._owner.retry_timeout_ms = timeout_ms

    def assignment(self) -> set[TopicPartition]:
        return set(self._owner.consumer.assignment())

    def pause(self, *partitions: TopicPartition) -> None:
        self._owner.consumer.pause(partitions)

    def resume(self, *partitions: TopicPartition) -> None:
        self._owner.consumer.resume(partitions)

    def request_commit(self) -> None:
        self._owner.commit_requested = True

    def errant_record_reporter(self) -> Any:
        return self._owner.errant_reporter

    def spark(self) -> Any:
        return self._owner.spark.spark()


class _ErrantRecordReporter:
    """KIP-610: a sink reports one record; it goes through the same tolerance and DLQ.

    A record of the batch being put is dead-lettered as the bytes that were consumed. A
    sink may also report later (one that buffers and finds the problem when it flushes);
    then the record is serialised again with the task's converters, as Kafka Connect does,
    so it reaches the DLQ whenever it is reported.
    """

    def __init__(self, owner: WorkerSinkTask):
        self._owner = owner

    def report(self, record: SinkRecord, error: BaseException) -> None:
        owner = self._owner
        where = _original_position(record)
        consumed = owner.originals.get(where) or owner.reserialise(record, where)
        owner.operator.execute(lambda: _raise(error), Stage.TASK_PUT,
                               _class_name(owner.task), consumed=consumed)


class _PolledRecords:
    """(topic, partition, offset) -> the record as polled, found when asked for: a
    columnar poll has no record objects to index up front."""

    def __init__(self, polled: list[RecordColumns]):
        self._polled = polled

    def get(self, where: tuple[str, int, int]) -> LogRecord | None:
        topic, partition, offset = where
        for run in self._polled:
            if run.topic == topic and run.partition == partition:
                i = bisect.bisect_left(run.offsets, offset)
                if i < len(run) and run.offsets[i] == offset:
                    return run.record(i)
        return None


def _original_position(record: SinkRecord) -> tuple[str, int, int]:
    """Where the record was consumed, even when a transform renamed its topic."""
    partition = (record.original_kafka_partition if record.original_kafka_partition is not None
                 else record.kafka_partition)
    offset = (record.original_kafka_offset if record.original_kafka_offset is not None
              else record.kafka_offset)
    return record.original_topic or record.topic, partition or 0, offset


class WorkerSinkTask(WorkerTask):
    def __init__(
        self,
        task_id: TaskId,
        task: SinkTask,
        props: Mapping[str, str],
        *,
        status: StatusListener,
        consumer: Consumer,
        topics: Sequence[str],
        topics_regex: str | None,
        list_topics: Callable[[], Sequence[str]],
        key_converter: Converter,
        value_converter: Converter,
        transforms: Transforms | None,
        operator: RetryWithToleranceOperator,
        spark: SparkProvider,
        paused: bool = False,
        commit_interval_ms: int = 10000,
        max_poll_records: int = 10000,
        has_reporters: bool = False,
    ):
        super().__init__(task_id, status, paused=paused, commit_interval_ms=commit_interval_ms)
        self.task = task
        self.props = props
        self.consumer = consumer
        self.topics = list(topics)
        self.topics_regex = re.compile(topics_regex) if topics_regex else None
        self.list_topics = list_topics
        self.key_converter = key_converter
        self.value_converter = value_converter
        self.transforms = transforms or _NoTransforms()
        self.operator = operator
        self.spark = spark
        self.max_poll_records = max_poll_records
        self.rewinds: dict[TopicPartition, int] = {}
        self.current: dict[TopicPartition, int] = {}
        self.committed: dict[TopicPartition, int] = {}
        self.retry_timeout_ms = 0
        self.commit_requested = False
        self.errant_reporter = _ErrantRecordReporter(self) if has_reporters else None
        self.originals: Mapping[tuple[str, int, int], LogRecord] | _PolledRecords = {}
        self._subscribed: set[str] = set()
        self.records_put = 0
        self._columnar_ok: bool | None = None

    def initialize_and_start(self) -> None:
        self.task.initialize(_SinkTaskContext(self))
        self.task.start(self.props)
        self._subscribe()

    def _subscribe(self) -> None:
        topics = set(self.topics)
        if self.topics_regex is not None:
            topics |= {t for t in self.list_topics() if self.topics_regex.fullmatch(t)}
        if topics != self._subscribed:
            self._subscribed = topics
            self.consumer.subscribe(sorted(topics), on_assign=self._on_assign,
                                    on_revoke=self._on_revoke)

    def _on_assign(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self.current[tp] = self.consumer.position(tp)
            self.committed[tp] = self.current[tp]
        self.task.open(partitions)
        self._apply_rewinds()

    def _on_revoke(self, partitions: list[TopicPartition]) -> None:
        self._commit(partitions)
        self.task.close(partitions)
        for tp in partitions:
            self.current.pop(tp, None)
            self.committed.pop(tp, None)

    def _apply_rewinds(self) -> None:
        if not self.rewinds:
            return
        assigned = self.consumer.assignment()
        for tp, off in list(self.rewinds.items()):
            if tp in assigned:
                self.consumer.seek(tp, off)
                self.current[tp] = off
                del self.rewinds[tp]

    def on_pause(self) -> None:
        self.consumer.pause(self.consumer.assignment())

    def on_resume(self) -> None:
        self.consumer.resume(self.consumer.assignment())

    def while_paused(self) -> None:
        self.consumer.poll_batch(1, 0)  # keeps group membership alive on a real broker

    def execute(self) -> None:
        next_commit = self.clock() + self.commit_interval
        next_topic_scan = self.clock() + 5
        while self.wait_if_paused():
            if self._columnar():
                polled = self.consumer.poll_columns(self.max_poll_records, 0.2)
                self._apply_rewinds()
                if polled:
                    self._deliver_columns(polled)
            else:
                batch = self.consumer.poll_batch(self.max_poll_records, 0.2)
                self._apply_rewinds()
                if batch:
                    self._deliver(batch)
            now = self.clock()
            if now >= next_commit or self.commit_requested:
                self.commit_requested = False
                self._commit(None)
                next_commit = self.clock() + self.commit_interval
            if self.topics_regex is not None and now >= next_topic_scan:
                self._subscribe()
                next_topic_scan = now + 5

    def _convert(self, rec: LogRecord) -> Any:
        op = self.operator
        kc, vc = self.key_converter, self.value_converter
        key = op.execute(lambda: kc.to_connect_data(rec.topic, rec.key), Stage.KEY_CONVERTER,
                         _class_name(kc), consumed=rec)
        if key is FAILED:
            return FAILED
        value = op.execute(lambda: vc.to_connect_data(rec.topic, rec.value), Stage.VALUE_CONVERTER,
                           _class_name(vc), consumed=rec)
        if value is FAILED:
            return FAILED
        headers = Headers()
        for hk, hv in rec.headers:
            headers.add(hk, hv)
        sr = SinkRecord(rec.topic, rec.partition, key.schema, key.value, value.schema, value.value,
                        rec.timestamp, headers, kafka_offset=rec.offset,
                        timestamp_type=TimestampType.CREATE_TIME, original_topic=rec.topic,
                        original_kafka_partition=rec.partition, original_kafka_offset=rec.offset)
        return op.execute(lambda: self.transforms.apply(sr), Stage.TRANSFORMATION,
                          _transform_class(self.transforms), consumed=rec)

    def reserialise(self, record: SinkRecord, where: tuple[str, int, int]) -> LogRecord:
        """The bytes of a reported record that is no longer in the current batch: encoded
        with the task's converters, or as plain JSON when they cannot encode it."""
        topic, partition, offset = where
        try:
            key = self.key_converter.from_connect_data(record.topic, record.key_schema,
                                                       record.key, record.headers)
            value = self.value_converter.from_connect_data(record.topic, record.value_schema,
                                                           record.value, record.headers)
        except Exception as e:
            log.warning("Task %s: converters could not encode the reported record at %s-%d@%d "
                        "(%s); dead-lettering it as plain JSON", self.id, topic, partition,
                        offset, e)
            key, value = source_record_payload(record)
        headers = tuple((h.key, _header_bytes(h.value)) for h in record.headers)
        return LogRecord(topic, partition, offset, record.timestamp or 0, key, value, headers)

    def _deliver(self, batch: list[LogRecord]) -> None:
        """Record by record: converters, transforms, then the task's put."""
        if self.errant_reporter is not None:
            self.originals = {(r.topic, r.partition, r.offset): r for r in batch}
        ends = {(r.topic, r.partition): r.offset for r in batch}
        self._hand_over([], self._convert_all(batch), ends)

    def _deliver_columns(self, polled: list[RecordColumns]) -> None:
        """Each partition's records as one column when the converters can decode them so
        (the task's put_batch), else record by record."""
        if self.errant_reporter is not None:
            self.originals = _PolledRecords(polled)
        records: list[SinkRecord] = []
        columns: list[SinkBatch] = []
        for run in polled:
            decoded = self._decode_columns(run)
            if decoded is not None:
                columns.append(decoded)
            else:
                records.extend(self._convert_all(run.records()))
        self._hand_over(columns, records, {(r.topic, r.partition): r.offsets[-1] for r in polled})

    def _hand_over(self, columns: list[SinkBatch], records: list[SinkRecord],
                   ends: Mapping[tuple[str, int], int]) -> None:
        """Put, then move each partition's position past the last offset polled."""
        pending = collections.deque(columns)

        def put_columns() -> None:  # a retry resumes at the batch that failed
            while pending:
                self.task.put_batch(pending[0])
                pending.popleft()

        if columns and not self._put(put_columns, sum(map(len, columns))):
            return  # stopped before the sink took the batch: its offsets stay uncommitted
        if records and not self._put(lambda: self.task.put(records), len(records)):
            return
        for (topic, partition), last in ends.items():
            self.current[TopicPartition(topic, partition)] = last + 1
        self.records_put += len(records) + sum(map(len, columns))

    def _convert_all(self, batch: Sequence[LogRecord]) -> list[SinkRecord]:
        out = []
        for rec in batch:
            sr = self._convert(rec)
            if sr is not None and sr is not FAILED:
                out.append(sr)
        return out

    def _columnar(self) -> bool:
        """Whether records may reach the task as columns: it takes them (`put_batch`) and
        nothing needs them one by one (no transforms)."""
        ok = self._columnar_ok
        if ok is None:
            chain = self.transforms
            ok = self._columnar_ok = (
                (isinstance(chain, _NoTransforms) or len(getattr(chain, "stages", (0,))) == 0)
                and type(self.task).put_batch is not SinkTask.put_batch)
        return ok

    def _decode_columns(self, run: RecordColumns) -> SinkBatch | None:
        """Keyless records of one partition decoded as one column, or None (then they go
        record by record, where a bad one gets its precise error and tolerance)."""
        topic = run.topic
        if run.keys is not None:  # some record has a key
            return None
        try:
            key = self.key_converter.to_connect_data(topic, None)
            if key.schema is not None or key.value is not None:
                return None
            decoded = self.value_converter.to_arrow(topic, run.values)
        except Exception:
            return None
        if decoded is None or len(decoded[1]) != len(run):
            return None
        schema, values = decoded
        return SinkBatch(topic, run.partition, run.offsets, run.timestamps, run.headers,
                         schema, values)

    def _put(self, put: Callable[[], Any], count: int) -> bool:
        """Retriable put failures redeliver the same batch with backoff (as Kafka Connect).

        Returns False when the task is asked to stop while it waits to retry: the batch is
        then not delivered, so its offsets are not committed and a restart delivers it.
        """
        attempt = 0
        while True:
            attempt += 1
            try:
                put()
                return True
            except RetriableError as e:
                delay = self.retry_timeout_ms / 1000 if self.retry_timeout_ms else \
                    self.operator.backoff_ms(attempt) / 1000
                log.warning("Retriable put failure in %s (attempt %d): %s", self.id, attempt, e)
                if self.wait_unless_stopping(min(delay, 10.0)):
                    log.info("Task %s stopping; %d undelivered record(s) will be redelivered",
                             self.id, count)
                    return False
            except Exception as e:
                raise ConnectError(f"Exiting WorkerSinkTask due to unrecoverable exception: {e}") from e

    def _commit(self, partitions: Sequence[TopicPartition] | None) -> None:
        tps = list(self.current) if partitions is None else list(partitions)
        current = {tp: OffsetAndMetadata(self.current[tp]) for tp in tps if tp in self.current}
        if not current:
            return
        to_commit = self.task.pre_commit(current)
        offsets = {tp: om.offset for tp, om in to_commit.items()
                   if tp in current and self.committed.get(tp) != om.offset}
        if offsets:
            self.consumer.commit(offsets)
            self.committed.update(offsets)

    def close(self, failed: bool) -> None:
        try:
            if not failed:
                self._commit(None)
            assigned = sorted(self.consumer.assignment())
            if assigned:
                self.task.close(assigned)
        finally:
            try:
                self.task.stop()
            finally:
                _close_transforms(self.transforms)
                try:
                    self.consumer.close()
                finally:
                    self.operator.close()

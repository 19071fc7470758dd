"""WorkerSinkTask: fetch, convert, transform, put, flush, commit what the task says is safe."""

from __future__ import annotations

import collections
import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kctl.api.connector import (
    SinkTask,
    SparkProvider,
)
from kctl.api.converter import Converter
from kctl.api.records import (
    Headers,
    OffsetAndMetadata,
    SinkBatch,
    SinkRecord,
    TimestampType,
    TopicPartition,
)
from kctl.errors import ConnectError, RetriableError, TransportError
from kctl.runtime.error_handling import (
    FAILED,
    RetryWithToleranceOperator,
    Stage,
    source_record_payload,
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
    _transform_class,
)
from kctl.runtime.tasks.contexts import _ErrantRecordReporter, _PolledRecords, _SinkTaskContext
from kctl.states import TaskId
from kctl.transport.base import (
    Consumer,
    LogRecord,
    RecordColumns,
    Stall,
)

log = logging.getLogger(__name__)

LAG_CHECK_INTERVAL_S = 5.0  # how often a sink task asks for its partitions' end offsets
# Partitions that have records to read and none arrive for this long: the fetching has
# stalled (a consumer that fetches waits fetch.wait.max.ms, well under a second)
FETCH_STALL_S = 30.0


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
        clock: Callable[[], float] = time.monotonic,
    ):
        super().__init__(task_id, status, paused=paused, commit_interval_ms=commit_interval_ms,
                         clock=clock)
        self._next: tuple[float, float, float] | None = None  # commit, topic scan, lag check
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
        self.task_paused: set[TopicPartition] = set()  # by the task (its context's pause)
        self._last_records = self.clock()
        self._fetch_stall: Stall | None = None

    def snapshot(self) -> TaskSnapshot:
        return self.counters.snapshot("sink", delivered=self.records_put,
                                      errors=self.operator.counters(), connector_task=self.task)

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
                                    on_revoke=self._on_revoke, on_lost=self._on_lost)

    def _on_assign(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self.current[tp] = self.consumer.position(tp)
            self.committed[tp] = self.current[tp]
        self.task.open(partitions)
        self._apply_rewinds()
        if self._paused:
            # handed partitions while paused (by the poll that keeps it in its group): none
            # may be read before the resume, or the record set aside would be skipped
            self.consumer.pause(partitions)

    def _on_revoke(self, partitions: list[TopicPartition]) -> None:
        self._commit(partitions)
        self._close_partitions(partitions)

    def _on_lost(self, partitions: list[TopicPartition]) -> None:
        """The group gave them to another member already (this one was evicted, e.g. it
        stalled past the session timeout): close without committing, as Kafka Connect."""
        log.warning("Task %s lost %s to a rebalance; closing them without committing",
                    self.id, ", ".join(map(str, partitions)))
        self._close_partitions(partitions)

    def _close_partitions(self, partitions: list[TopicPartition]) -> None:
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
        """Poll to run rebalances (and keep an embedded group's membership); a record read
        anyway is put back, so the resume starts at it."""
        first: dict[TopicPartition, int] = {}
        for r in self.consumer.poll_batch(1, 0):
            first.setdefault(r.topic_partition, r.offset)
        for tp, offset in first.items():
            log.debug("Task %s read %s@%d while paused; rewinding", self.id, tp, offset)
            self.consumer.seek(tp, offset)

    def execute(self) -> None:
        while self.wait_if_paused():
            self.step()

    def step(self) -> int:
        """One turn of the loop: poll, put, and commit once the interval has passed (or
        the task asked); kctl.testing turns it from the test's thread. Returns the records
        read."""
        if self._next is None:
            now = self.clock()
            self._next = (now + self.commit_interval, now + 5, now + LAG_CHECK_INTERVAL_S)
        next_commit, next_topic_scan, next_lag_check = self._next
        if self._columnar():
            polled = self.consumer.poll_columns(self.max_poll_records, 0.2)
            self._apply_rewinds()
            read = sum(map(len, polled))
            if polled:
                self._last_records = self.clock()
                self._fetch_stall = None
                self.counters.batch(read)
                self._deliver_columns(polled)
            else:
                self._put_nothing()
        else:
            batch = self.consumer.poll_batch(self.max_poll_records, 0.2)
            self._apply_rewinds()
            read = len(batch)
            if batch:
                self._last_records = self.clock()
                self._fetch_stall = None
                self.counters.batch(read)
                self._deliver(batch)
            else:
                self._put_nothing()
        self.idle_release.tick(read)
        now = self.clock()
        if now >= next_commit or self.commit_requested:
            self.commit_requested = False
            self._commit(None)
            next_commit = self.clock() + self.commit_interval
        if now >= next_lag_check:
            self._measure_lag()
            self._check_fetching(now)
            next_lag_check = now + LAG_CHECK_INTERVAL_S
        self.note_stall(self.consumer.stall() or self._fetch_stall)
        if self.topics_regex is not None and now >= next_topic_scan:
            self._subscribe()
            next_topic_scan = now + 5
        self._next = (next_commit, next_topic_scan, next_lag_check)
        return read

    def commit_offsets(self) -> None:
        """Commit now what `pre_commit` says is safe (the periodic commit, on demand)."""
        self._commit(None)

    def _put_nothing(self) -> None:
        """An empty poll is an empty put, as Kafka Connect does: a sink that writes on time
        (FileSink's rotate.interval.ms, JdbcSink's buffer) sees the clock between batches,
        not only when records or the next offset commit come."""
        self._put(lambda: self.task.put([]), 0)

    def _measure_lag(self) -> None:
        """Records behind the end of each assigned partition (for `/metrics`); a failure
        to ask only leaves the last figures."""
        positions = dict(self.current)
        if not positions:
            return
        try:
            ends = self.consumer.end_offsets(list(positions))
        except Exception as e:
            log.debug("Task %s: could not read end offsets for lag: %s", self.id, e)
            return
        self.counters.lag = {tp: max(0, ends[tp] - pos) for tp, pos in positions.items()
                             if tp in ends}

    def _check_fetching(self, now: float) -> None:
        """Partitions behind their end while nothing arrived for FETCH_STALL_S: the
        consumer fetches again from a new client, and the task says it is stalled until
        records come."""
        if now - self._last_records < FETCH_STALL_S:
            self._fetch_stall = None
            return
        behind = sorted(tp for tp, n in self.counters.lag.items()
                        if n > 0 and tp not in self.task_paused)
        if not behind:
            self._fetch_stall = None
            return
        idle = now - self._last_records
        if self._fetch_stall is None:
            self._fetch_stall = Stall(
                f"{', '.join(map(str, behind))} have "
                f"{sum(self.counters.lag[tp] for tp in behind)} records to read and none "
                f"arrived in {idle:.0f} s; fetching them again from a new client",
                int(time.time() * 1000 - idle * 1000))
        self._last_records = now  # the next attempt gets as long
        try:
            self.consumer.refetch(f"nothing fetched in {idle:.0f} s while "
                                  f"{', '.join(map(str, behind))} have records")
        except Exception as e:  # the next check tries again
            log.warning("Task %s: fetching again failed: %s", self.id, e)

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
        """The records of one partition decoded as columns (values, and keys when every
        record has one), or None: then they go record by record, where a bad one gets its
        precise error and tolerance."""
        topic = run.topic
        n = len(run)
        try:
            if run.keys is None:
                key = self.key_converter.to_connect_data(topic, None)
                if key.schema is not None or key.value is not None:
                    return None
                key_schema, keys = None, None
            else:
                decoded_keys = self.key_converter.to_arrow(topic, run.keys)
                if decoded_keys is None or len(decoded_keys[1]) != n:
                    return None
                key_schema, keys = decoded_keys
            decoded = self.value_converter.to_arrow(topic, run.values)
        except Exception:
            return None
        if decoded is None or len(decoded[1]) != n:
            return None
        schema, values = decoded
        return SinkBatch(topic, run.partition, run.offsets, run.timestamps, run.headers,
                         schema, values, key_schema, keys)

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
        started = time.monotonic()
        ok = False
        try:
            to_commit = self.task.pre_commit(current)
            offsets = {tp: om.offset for tp, om in to_commit.items()
                       if tp in current and self.committed.get(tp) != om.offset}
            if offsets:
                try:
                    self.consumer.commit(offsets)
                except TransportError as e:
                    # as Kafka Connect: a commit the group refuses (CommitFailedError: the
                    # partitions are moving, this member was fenced out of its generation)
                    # or that does not arrive is not the task's failure; the offsets stay
                    # uncommitted, for the next commit or the partitions' next owner
                    log.warning("Task %s: offset commit failed (retried with the next "
                                "commit): %s", self.id, e)
                    return
                self.committed.update(offsets)
            ok = True
        finally:
            self.counters.committed(time.monotonic() - started, ok)

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


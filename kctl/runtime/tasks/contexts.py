"""What a task sees of the worker: its contexts and errant record reporters (Kafka's
WorkerSourceTaskContext, WorkerSinkTaskContext, WorkerErrantRecordReporter)."""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kctl.api.connector import (
    OffsetStorageReader,
    SparkProvider,
)
from kctl.api.records import (
    SinkRecord,
    SourceRecord,
    TopicPartition,
)
from kctl.runtime.error_handling import (
    Stage,
    Tolerance,
)
from kctl.runtime.tasks.base import _class_name, _raise
from kctl.transport.base import (
    LogRecord,
    RecordColumns,
)

if TYPE_CHECKING:  # the task loops own their contexts
    from kctl.runtime.tasks.sink import WorkerSinkTask
    from kctl.runtime.tasks.source import WorkerSourceTask


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
        self._owner.task_paused.update(partitions)
        self._owner.consumer.pause(partitions)

    def resume(self, *partitions: TopicPartition) -> None:
        self._owner.task_paused.difference_update(partitions)
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


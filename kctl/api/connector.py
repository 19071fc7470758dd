"""The connector SPI: connectors split a job into task configs; tasks move the data.

Connectors in `kctl.connectors` and third-party plugins import only `kctl.api`; the
runtime hands them contexts through which they reach offsets, Spark and the worker.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from kctl.api.config import ConfigDef, ConfigValue
from kctl.api.records import (
    OffsetAndMetadata,
    RecordMetadata,
    SinkBatch,
    SinkRecord,
    SourceBatch,
    SourceRecord,
    TopicPartition,
)

if TYPE_CHECKING:  # pyspark is heavy: import it only where a task really runs
    from pyspark.sql import SparkSession


class OffsetStorageReader(Protocol):
    """Committed source offsets for this connector; read them in one batch when possible."""

    def offset(self, partition: Mapping[str, Any]) -> dict[str, Any] | None: ...

    def offsets(
        self, partitions: Sequence[Mapping[str, Any]]
    ) -> dict[tuple[tuple[str, Any], ...], dict[str, Any] | None]:
        """Keys are `partition_key(p)` of each requested partition."""
        ...


def partition_key(partition: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    """A hashable, order-independent key for a source partition dict."""
    return tuple(sorted(partition.items()))


class SparkProvider(Protocol):
    """The worker's one long-lived SparkSession, created on first use.

    Import pyspark modules only once `spark()` has returned: the worker imports pyspark
    while it builds the session, and two threads importing pyspark at once can hit
    Python's import-lock deadlock detection and fail a task.
    """

    def spark(self) -> SparkSession: ...


class ConnectorContext(SparkProvider, Protocol):
    def request_task_reconfiguration(self) -> None:
        """Ask the runtime to call task_configs() again (e.g. a new table or file appeared)."""
        ...

    def raise_error(self, error: BaseException) -> None:
        """Fail the connector from a background thread of its own."""
        ...

    def warn(self, message: str | None) -> None:
        """Say something the user should see although nothing failed (shown as the trace
        of the RUNNING connector in its status); None takes it back. A kctl addition."""
        ...

    @property
    def offset_storage_reader(self) -> OffsetStorageReader: ...


class Connector(ABC):
    """Splits a job into up to `max_tasks` task configs; does not move data itself."""

    context: ConnectorContext

    def initialize(self, context: ConnectorContext) -> None:
        self.context = context

    def version(self) -> str:
        return "0.1.0"

    @abstractmethod
    def start(self, props: Mapping[str, str]) -> None: ...

    @abstractmethod
    def task_class(self) -> type[Task]: ...

    @abstractmethod
    def task_configs(self, max_tasks: int) -> list[dict[str, str]]: ...

    @abstractmethod
    def stop(self) -> None: ...

    @abstractmethod
    def config(self) -> ConfigDef: ...

    def validate(self, props: Mapping[str, Any]) -> list[ConfigValue]:
        """Per-key validation; override to add cross-field checks."""
        return self.config().validate(props)

    def local_paths(self, props: Mapping[str, Any]) -> dict[str, str]:
        """The config keys that name files or directories on the worker's host (key ->
        path), which the worker checks against its file.connector.allowed.paths."""
        return {}


class SourceConnector(Connector, ABC):
    def exactly_once_support(self) -> bool | None:
        return None


class SinkConnector(Connector, ABC):
    pass


# --- tasks -------------------------------------------------------------------------------


class Task(ABC):
    def version(self) -> str:
        return "0.1.0"

    @abstractmethod
    def start(self, props: Mapping[str, str]) -> None: ...

    @abstractmethod
    def stop(self) -> None: ...


class SourceErrantRecordReporter(Protocol):
    """Beyond Kafka Connect: a source hands over input it cannot turn into a record.

    Call it from `poll()` for such input *instead of* returning a record for it, and only
    for input that comes after every record already returned: reports made during a
    `poll()` are ordered before the records that call returns. `record` carries what is
    known (the raw input as value, its source partition and the offset just past it).
    With `errors.tolerance=none` the call raises and the task fails naming the error;
    with `all` the record goes to the error log and dead letter queue, and the source
    offset moves past it once everything before it is acknowledged.
    """

    def report(self, record: SourceRecord, error: BaseException) -> None: ...


class SourceTaskContext(SparkProvider, Protocol):
    @property
    def offset_storage_reader(self) -> OffsetStorageReader: ...

    @property
    def configs(self) -> Mapping[str, str]: ...

    def errant_record_reporter(self) -> SourceErrantRecordReporter | None: ...


class SourceTask(Task, ABC):
    """Poll records from an external system; the runtime produces and commits offsets."""

    context: SourceTaskContext

    def initialize(self, context: SourceTaskContext) -> None:
        self.context = context

    @abstractmethod
    def poll(self) -> Sequence[SourceRecord | SourceBatch] | None:
        """Return records (or None/[] when nothing is ready); may block briefly.

        Records read together may come as SourceBatch columns: the runtime converts and
        writes those without a Python object per record when it can.
        """

    def commit(self) -> None:
        """Offsets up to the last acknowledged record have been committed."""

    def commit_record(self, record: SourceRecord, metadata: RecordMetadata | None) -> None:
        """`record` was acknowledged (metadata None when it was filtered or dead-lettered)."""


class ErrantRecordReporter(Protocol):
    def report(self, record: SinkRecord, error: BaseException) -> None: ...


class SinkTaskContext(SparkProvider, Protocol):
    @property
    def configs(self) -> Mapping[str, str]: ...

    def offset(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Rewind/advance consumption (e.g. to offsets the sink keeps itself)."""
        ...

    def timeout(self, timeout_ms: int) -> None: ...

    def assignment(self) -> set[TopicPartition]: ...

    def pause(self, *partitions: TopicPartition) -> None: ...

    def resume(self, *partitions: TopicPartition) -> None: ...

    def request_commit(self) -> None: ...

    def errant_record_reporter(self) -> ErrantRecordReporter | None: ...


class SinkTask(Task, ABC):
    """Receive records in batches; flush makes them durable before offsets are committed."""

    context: SinkTaskContext

    def initialize(self, context: SinkTaskContext) -> None:
        self.context = context

    def open(self, partitions: Sequence[TopicPartition]) -> None:
        """Partitions assigned to this task (before any put for them)."""

    def close(self, partitions: Sequence[TopicPartition]) -> None:
        """Partitions taken away; flush what belongs to them."""

    @abstractmethod
    def put(self, records: Sequence[SinkRecord]) -> None: ...

    def put_batch(self, batch: SinkBatch) -> None:
        """Records of one partition as a column, given only to tasks that override this.

        The runtime calls it instead of `put` for records it could decode as one column
        (no transforms; keys, when every record has one, as a column too); a task that writes columns (Spark, Arrow) avoids a
        SinkRecord per record. It means exactly `put(batch.records())`.
        """
        self.put(batch.records())

    def flush(self, current_offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        """Make everything `put` so far durable."""

    def pre_commit(
        self, current_offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> Mapping[TopicPartition, OffsetAndMetadata]:
        """Offsets safe to commit; default flushes and returns current_offsets."""
        self.flush(current_offsets)
        return current_offsets

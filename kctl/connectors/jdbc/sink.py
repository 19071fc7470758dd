"""JdbcSink: records become rows of database tables, with Confluent's configuration names.

Each table's records are buffered (up to `batch.size`) and written as one batch: Spark
writes the rows into a staging table the task owns (no constraints, wide types), then one
DB-API transaction moves them into the target with a single statement per batch
(INSERT ... SELECT, the dialect's upsert, or UPDATE ... FROM) and deletes the rows of
tombstones. Going through staging makes a batch atomic (Spark's own append commits per
partition) and lets the database judge each row: when it rejects the batch for a row's
fault (a constraint, a value that does not fit), the task bisects the staged rows by
range inside the transaction, dead-letters the rows that fail alone with the database's
message, and writes the rest. Connection losses, deadlocks and serialization failures
are retried with backoff instead. An upsert or update batch writes the last record of each
key (one statement must not touch a row twice); an earlier record of the key in the same
batch is superseded unseen by the database, unless the last one is rejected: then the
latest earlier record the database accepts is written, as record-by-record upserts would.

With `delivery.guarantee=exactly_once` the same transaction upserts the consumer offsets
the batch covers into an offsets table the sink owns; a task reads them back when it is
assigned partitions and rewinds the consumer there, so a crash at any point never loses
or duplicates a row, also for plain inserts into a table without a key. The transaction
locks the offsets rows it moves and checks they hold what the task last saw: a task that
has not noticed a rebalance took its partitions away cannot commit over the new owner.
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import hashlib
import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from kctl.api import (
    ConfigDef,
    ConfigType,
    ConfigValue,
    ConnectError,
    DataError,
    Importance,
    NonEmptyString,
    OffsetAndMetadata,
    Range,
    RetriableError,
    Schema,
    SinkBatch,
    SinkConnector,
    SinkRecord,
    SinkTask,
    Struct,
    Task,
    TopicPartition,
    Type,
    ValidString,
)
from kctl.api.arrow import connect_to_arrow_type, structs_to_table
from kctl.api.data import INT32_SCHEMA, INT64_SCHEMA, STRING_SCHEMA, Field
from kctl.connectors.jdbc import _sink_sql as sql
from kctl.connectors.jdbc._common import (
    Dialect,
    connection_config_def,
    dialect_for,
    driver_loaded,
    one_line,
    redact_url,
    spark_url,
)
from kctl.connectors.jdbc._confluent import QUOTE_NEVER, confluent_problems, sink_config_def
from kctl.connectors.jdbc._sink_sql import (
    STAGING_DELETE,
    STAGING_ROW,
    STAGING_WINNER,
    Column,
    prepare,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)

INSERT, UPSERT, UPDATE = "insert", "upsert", "update"
PK_NONE, PK_KAFKA, PK_RECORD_KEY, PK_RECORD_VALUE = "none", "kafka", "record_key", "record_value"
AT_LEAST_ONCE, EXACTLY_ONCE = "at_least_once", "exactly_once"
KAFKA_PK_DEFAULTS = ("__connect_topic", "__connect_partition", "__connect_offset")
KEY_PK_DEFAULT = "__connect_key"
BISECT_INDEX_ROWS = 256  # staged batches larger than this get an index before bisection

WRITES_GROUP, DELIVERY_GROUP = "Writes", "Delivery"

CONFIG_DEF = connection_config_def().merge(
    ConfigDef()
    .define("table.name.format", ConfigType.STRING, "${topic}", NonEmptyString(),
            Importance.MEDIUM, "The table a topic's records go to; ${topic} is replaced by "
            "the topic's name. `schema.table` names a table in another schema.",
            group=WRITES_GROUP)
    .define("insert.mode", ConfigType.STRING, INSERT, ValidString.in_(INSERT, UPSERT, UPDATE),
            Importance.HIGH, "insert: plain INSERTs. upsert: insert or update by primary key "
            "(INSERT ... ON CONFLICT / ON DUPLICATE KEY UPDATE, one statement per batch). "
            "update: UPDATE existing rows by primary key.", group=WRITES_GROUP)
    .define("pk.mode", ConfigType.STRING, PK_NONE,
            ValidString.in_(PK_NONE, PK_KAFKA, PK_RECORD_KEY, PK_RECORD_VALUE), Importance.HIGH,
            "Where the primary key comes from: none; kafka (topic, partition, offset "
            "columns); record_key (the key's fields, or the key itself); record_value (fields "
            "of the value).", group=WRITES_GROUP)
    .define("pk.fields", ConfigType.LIST, "", None, Importance.MEDIUM,
            "kafka: the three column names (default __connect_topic, __connect_partition, "
            "__connect_offset). record_key: the key fields to use (empty: all), or the "
            "column name for a primitive key (default __connect_key). record_value: the value "
            "fields that form the key (empty: all).", group=WRITES_GROUP)
    .define("fields.whitelist", ConfigType.LIST, "", None, Importance.MEDIUM,
            "Value fields to write (empty: all). Key columns are always written.",
            group=WRITES_GROUP)
    .define("auto.create", ConfigType.BOOLEAN, False, None, Importance.MEDIUM,
            "Create a missing table from the record schema (key columns form the primary "
            "key).", group=WRITES_GROUP)
    .define("auto.evolve", ConfigType.BOOLEAN, False, None, Importance.MEDIUM,
            "Add a column for each new optional field (nullable); a new required field "
            "without a default fails the task.", group=WRITES_GROUP)
    .define("delete.enabled", ConfigType.BOOLEAN, False, None, Importance.MEDIUM,
            "Tombstones (null values) delete the row of their key; needs "
            "pk.mode=record_key.", group=WRITES_GROUP)
    .define("batch.size", ConfigType.INT, 100_000, Range.at_least(1), Importance.MEDIUM,
            "Records per batch and table. Each batch is one Spark job (0.1-0.2 s of JVM time "
            "however small) and one transaction, so batches are large.", group=WRITES_GROUP)
    .define("batch.max.wait.ms", ConfigType.LONG, 2000, Range.at_least(0), Importance.LOW,
            "Write a table's buffered records once the oldest has waited this long (checked "
            "as records arrive; offset commits write everything buffered).",
            group=WRITES_GROUP)
    .define("max.retries", ConfigType.INT, 10, Range.at_least(0), Importance.MEDIUM,
            "Attempts at a batch that fails for a passing reason (a lost connection, a "
            "deadlock, a serialization failure) before the task fails.", group=WRITES_GROUP)
    .define("retry.backoff.ms", ConfigType.INT, 3000, Range.at_least(0), Importance.MEDIUM,
            "Wait before a batch is attempted again.", group=WRITES_GROUP)
    .define("delivery.guarantee", ConfigType.STRING, AT_LEAST_ONCE,
            ValidString.in_(AT_LEAST_ONCE, EXACTLY_ONCE), Importance.HIGH,
            "at_least_once: offsets are committed once rows are written (a crash may write "
            "some rows again). exactly_once: each batch commits with the offsets it covers "
            "in one database transaction, and a task resumes from the database's offsets.",
            group=DELIVERY_GROUP)
    .define("exactly.once.offsets.table", ConfigType.STRING, "__kctl_sink_offsets",
            NonEmptyString(), Importance.LOW,
            "The table exactly_once keeps consumer offsets in (created when missing).",
            group=DELIVERY_GROUP)
).merge(sink_config_def())  # Confluent's other keys: accepted, or refused with the reason


class JdbcSinkError(ConnectError):
    """The task cannot go on: the database is unreachable or refuses the login, the driver
    is missing, a table does not fit the records. The message is one line, without the
    password."""


class RowRejected(DataError):
    """The database rejected one row; the message is the database's own."""


def config_problems(props: Mapping[str, Any]) -> dict[str, str]:
    """Combinations a key alone cannot judge, by the key to blame."""
    def get(k: str, default: str) -> str:
        return str(props.get(k) if props.get(k) is not None else default).strip().lower()

    out: dict[str, str] = {}
    pk_mode, mode = get("pk.mode", PK_NONE), get("insert.mode", INSERT)
    if get("delete.enabled", "false") == "true" and pk_mode != PK_RECORD_KEY:
        out["delete.enabled"] = (f"delete.enabled=true needs pk.mode=record_key (tombstones "
                                 f"name the row to delete by their key), not {pk_mode}")
    if mode in (UPSERT, UPDATE) and pk_mode == PK_NONE:
        out["pk.mode"] = f"insert.mode={mode} needs a primary key: set pk.mode"
    fields = [f for f in str(props.get("pk.fields") or "").split(",") if f.strip()]
    if pk_mode == PK_KAFKA and fields and len(fields) != 3:
        out["pk.fields"] = ("pk.mode=kafka takes three column names (topic, partition, "
                            f"offset), got {len(fields)}")
    if pk_mode == PK_NONE and fields:
        out["pk.fields"] = "pk.fields needs a pk.mode other than none"
    return {**confluent_problems(props, source=False), **out}


class JdbcSinkConnector(SinkConnector):
    """Every task gets the same config; the consumer group splits the partitions."""

    def config(self) -> ConfigDef:
        return CONFIG_DEF

    def validate(self, props: Mapping[str, Any]) -> list[ConfigValue]:
        values = CONFIG_DEF.validate(props)
        by_name = {v.name: v for v in values}
        for key, problem in config_problems(props).items():
            by_name[key].errors.append(problem)
        return values

    def start(self, props: Mapping[str, str]) -> None:
        CONFIG_DEF.parse(props)
        problems = config_problems(props)
        if problems:
            key, problem = next(iter(problems.items()))
            raise JdbcSinkError(f"Invalid configuration {key}: {problem}")
        self._props = dict(props)

    def task_class(self) -> type[Task]:
        return JdbcSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self._props) for _ in range(max_tasks)]

    def stop(self) -> None:
        pass


# --- buffered records -------------------------------------------------------------------------


@dataclass
class _Buffer:
    """A table's records not yet written, in arrival order: lists of SinkRecords and
    columnar SinkBatches, all of one value (and key) schema. Tombstones (value None) fit
    any schema."""

    table: str
    value_schema: Schema | None
    key_schema: Schema | None
    parts: list[list[SinkRecord] | SinkBatch] = field(default_factory=list)
    count: int = 0
    since: float = 0.0
    first: dict[TopicPartition, int] = field(default_factory=dict)
    last: dict[TopicPartition, int] = field(default_factory=dict)

    def add_record(self, r: SinkRecord) -> None:
        if self.parts and isinstance(self.parts[-1], list):
            self.parts[-1].append(r)
        else:
            self.parts.append([r])
        self._covers(r.topic_partition, r.kafka_offset, r.kafka_offset)
        self.count += 1

    def add_batch(self, b: SinkBatch) -> None:
        self.parts.append(b)
        self._covers(b.topic_partition, b.offsets[0], b.offsets[-1])
        self.count += len(b)

    def _covers(self, tp: TopicPartition, first: int, last: int) -> None:
        self.first.setdefault(tp, first)
        self.last[tp] = last

    def without(self, tps: set[TopicPartition]) -> _Buffer:
        """The buffer minus the records of `tps` (partitions taken away)."""
        out = _Buffer(self.table, self.value_schema, self.key_schema, since=self.since)
        for part in self.parts:
            if isinstance(part, SinkBatch):
                if part.topic_partition not in tps:
                    out.add_batch(part)
            else:
                for r in part:
                    if r.topic_partition not in tps:
                        out.add_record(r)
        return out


@dataclass
class _Rows:
    """A buffer as the Arrow table Spark stages (c0.. in `columns` order, then the row
    index, the delete flag and the last-of-its-key flag), the runs of row indexes whose
    statements run in order, and the rows rejected before staging (a null key)."""

    columns: list[Column]
    table: pa.Table
    segments: list[list[int]]
    origin: Callable[[int], SinkRecord]
    rejected: dict[int, BaseException] = field(default_factory=dict)
    keys: list[str] = field(default_factory=list)  # set when some records were superseded

    def earlier(self) -> dict[int, list[int]]:
        """For the last row of each key, the key's earlier rows, latest first: when the
        database rejects the last record, the latest one it accepts is written instead."""
        if not self.keys:
            return {}
        by_key: dict[tuple[Any, ...], list[int]] = {}
        cols = [self.table[k].to_pylist() for k in self.keys]
        for r, *key in zip(self.table[STAGING_ROW].to_pylist(), *cols, strict=True):
            by_key.setdefault(tuple(key), []).append(r)
        return {rs[-1]: rs[-2::-1] for rs in by_key.values() if len(rs) > 1}


@dataclass
class _Staging:
    """A staging table this task created: its columns, whether rows may be left in it."""

    name: str
    layout: tuple[Column, ...]
    indexed: bool = False
    dirty: bool = False


@dataclass
class _Plan:
    """How a staged batch is applied: the statements over ranges of last records, the ones
    that write any single staged record, the runs of rows, and what was rejected before."""

    statements: list[str]
    one_row: list[str]
    segments: list[list[int]]
    rejected: dict[int, BaseException]
    origin: Callable[[int], SinkRecord]
    earlier: Callable[[], dict[int, list[int]]]


class _Transient(Exception):
    """A passing failure (connection, deadlock, serialization): try the batch again."""

    def __init__(self, cause: BaseException):
        super().__init__(_message(cause))
        self.cause = cause


def _staging_prefix(connector: str, table: str) -> str:
    digest = hashlib.sha1(f"{connector}\x00{table}".encode()).hexdigest()[:10]
    return f"kctl_stage_{digest}_"


def _message(e: BaseException) -> str:
    return redact_url(sql.db_message(e))


_AUTH_FAILURE = ("authentication failed", "access denied", "does not exist", "no pg_hba.conf",
                 "unknown database", "role ")


def _unreachable(e: BaseException) -> bool:
    """A connection that failed for a passing reason (not a refused login)."""
    text = str(e).lower()
    return sql.classify(e) == sql.TRANSIENT and not any(t in text for t in _AUTH_FAILURE)


# --- the task -----------------------------------------------------------------------------------


class JdbcSinkTask(SinkTask):
    """Buffers records per table, writes each table's batch through Spark and one
    transaction; exactly_once keeps the consumer offsets in that transaction."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._buffers: dict[str, _Buffer] = {}
        self._next: dict[TopicPartition, int] = {}  # offsets below are put (or written)
        self._db_offsets: dict[TopicPartition, int] = {}  # exactly_once: what the DB holds
        self._columns: dict[str, dict[str, str] | None] = {}  # table -> normalised -> name
        self._staging: dict[str, _Staging] = {}
        self._layouts: dict[tuple[Any, ...], list[Column]] = {}
        self._db: Any = None
        self._failures = 0
        self.batches_written = 0
        self.rows_rejected = 0

    # lifecycle

    def start(self, props: Mapping[str, str]) -> None:
        c = CONFIG_DEF.parse(props)
        problems = config_problems(props)
        if problems:
            key, problem = next(iter(problems.items()))
            raise JdbcSinkError(f"Invalid configuration {key}: {problem}")
        self.url: str = c["connection.url"]
        self.dialect: Dialect = dialect_for(self.url)
        if c["quote.sql.identifiers"].lower() == QUOTE_NEVER:
            self.dialect = dataclasses.replace(self.dialect, quoting=False)
        self.user: str | None = c["connection.user"]
        self.password = c["connection.password"]
        self.attempts: int = max(1, c["connection.attempts"])
        self.backoff_s: float = c["connection.backoff.ms"] / 1000
        self.table_format: str = c["table.name.format"]
        self.mode: str = c["insert.mode"].lower()
        self.pk_mode: str = c["pk.mode"].lower()
        self.pk_fields: list[str] = list(c["pk.fields"])
        self.whitelist: set[str] = set(c["fields.whitelist"])
        self.auto_create: bool = c["auto.create"]
        self.table_types = tuple(t.strip().upper() for t in c["table.types"])
        self.auto_evolve: bool = c["auto.evolve"]
        self.delete_enabled: bool = c["delete.enabled"]
        self.batch_size: int = c["batch.size"]
        self.max_wait_s: float = c["batch.max.wait.ms"] / 1000
        self.max_retries: int = c["max.retries"]
        self.retry_backoff_ms: int = c["retry.backoff.ms"]
        self.exactly_once = c["delivery.guarantee"].lower() == EXACTLY_ONCE
        self.offsets_table: str = c["exactly.once.offsets.table"]
        self.connector = str(props.get("name") or "")
        if self.exactly_once and not self.connector:
            raise JdbcSinkError("delivery.guarantee=exactly_once needs the connector's name")
        self._instance = uuid.uuid4().hex[:8]
        spark = self.context.spark()
        if not driver_loaded(spark, self.dialect):
            raise JdbcSinkError(self.dialect.missing_driver_message())
        self._conn(self.attempts)  # a wrong login or an unreachable database fails it now
        if self.exactly_once:
            self._ddl(sql.create_offsets_table(self.dialect, self.offsets_table))

    def stop(self) -> None:
        self._buffers.clear()
        for st in list(self._staging.values()):
            if self._db is None:
                break
            try:
                self._ddl(sql.drop_table(self.dialect, st.name))
            except Exception as e:  # stopping: a leftover staging table is harmless
                log.warning("Could not drop staging table %s: %s", st.name, one_line(e))
        self._staging.clear()
        self._close_conn()

    def open(self, partitions: Sequence[TopicPartition]) -> None:
        if not self.exactly_once or not partitions:
            return
        held = self._read_offsets()
        rewind = {}
        for tp in partitions:
            self._buffers_drop({tp})
            if tp in held:
                self._db_offsets[tp] = self._next[tp] = rewind[tp] = held[tp]
            else:
                self._db_offsets.pop(tp, None)
                self._next.pop(tp, None)
        if rewind:
            log.info("Resuming from the offsets in %s: %s", self.offsets_table,
                     {str(tp): o for tp, o in rewind.items()})
            self.context.offset(rewind)

    def close(self, partitions: Sequence[TopicPartition]) -> None:
        # records not written were never committed: the next owner gets them again
        tps = set(partitions)
        self._buffers_drop(tps)
        for tp in tps:
            self._next.pop(tp, None)
            self._db_offsets.pop(tp, None)

    def _buffers_drop(self, tps: set[TopicPartition]) -> None:
        for table, buf in list(self._buffers.items()):
            if tps & set(buf.first):
                rest = buf.without(tps)
                if rest.count:
                    self._buffers[table] = rest
                else:
                    del self._buffers[table]

    # records in

    def put(self, records: Sequence[SinkRecord]) -> None:
        self._write_due()
        now = self._clock()
        for r in records:
            tp = r.topic_partition
            if r.kafka_offset < self._next.get(tp, -1):
                continue  # redelivered: already buffered or written
            problem = self._problem(r)
            if problem is not None:
                self._report(r, problem)
                self._next[tp] = r.kafka_offset + 1
                continue
            value_schema = r.value.schema if isinstance(r.value, Struct) else None
            key_schema = self._key_schema(r) if self.pk_mode == PK_RECORD_KEY else None
            # a write this may start can fail: the record is taken only once it is buffered
            buf = self._buffer(self._table(r.topic), value_schema, key_schema, now)
            buf.add_record(r)
            self._next[tp] = r.kafka_offset + 1
            if buf.count >= self.batch_size:
                self._write_buffer(buf.table)
        self._write_due()

    def put_batch(self, batch: SinkBatch) -> None:
        """Struct values (and with pk.mode=record_key, keys) stay columns all the way to
        Spark; anything else goes record by record (a batch without keys cannot serve
        pk.mode=record_key: each record says so)."""
        by_key = self.pk_mode == PK_RECORD_KEY
        if batch.value_schema.type is not Type.STRUCT or batch.values.null_count or (
                by_key and (batch.keys is None or batch.key_schema is None
                            or batch.keys.null_count)):
            self.put(batch.records())
            return
        self._write_due()
        tp = batch.topic_partition
        seen = self._next.get(tp, -1)
        if batch.offsets[0] < seen:
            batch = batch.slice(bisect.bisect_left(batch.offsets, seen))
        now = self._clock()
        table = self._table(batch.topic)
        while len(batch):
            buf = self._buffer(table, batch.value_schema, batch.key_schema if by_key else None,
                               now)
            piece = batch.slice(0, self.batch_size - buf.count)
            buf.add_batch(piece)
            self._next[tp] = piece.offsets[-1] + 1
            if buf.count >= self.batch_size:
                self._write_buffer(table)
            batch = batch.slice(len(piece))
        self._write_due()

    def _problem(self, r: SinkRecord) -> DataError | None:
        """Why a record cannot become a row or a delete, if it cannot."""
        where = f"{r.topic}-{r.kafka_partition}@{r.kafka_offset}"
        if r.value is None:
            if not self.delete_enabled:
                return DataError(f"Record {where} is a tombstone (null value) and "
                                 "delete.enabled is false")
            if r.key is None:
                return DataError(f"Tombstone {where} has no key to delete by")
            return None
        if not isinstance(r.value, Struct):
            return DataError(f"Record {where}: JdbcSink writes struct values with a schema "
                             f"(e.g. JsonConverter with schemas.enable=true), got "
                             f"{type(r.value).__name__}")
        if self.pk_mode == PK_RECORD_KEY and r.key is None:
            return DataError(f"Record {where} has no key, and pk.mode=record_key")
        if self.pk_mode == PK_RECORD_KEY and not isinstance(r.key, Struct) and \
                r.key_schema is None and not isinstance(r.key, int | str | bytes | float):
            return DataError(f"Record {where}: a key without a schema must be a number, "
                             f"string or bytes, got {type(r.key).__name__}")
        return None

    def _key_schema(self, r: SinkRecord) -> Schema | None:
        if isinstance(r.key, Struct):
            return r.key.schema
        if r.key_schema is not None:
            return r.key_schema
        if r.key is None:
            return None
        return Schema({bool: Type.BOOLEAN, int: Type.INT64, float: Type.FLOAT64,
                       bytes: Type.BYTES}.get(type(r.key), Type.STRING))

    def _table(self, topic: str) -> str:
        return self.table_format.replace("${topic}", topic)

    def _buffer(self, table: str, value_schema: Schema | None, key_schema: Schema | None,
                now: float) -> _Buffer:
        """The table's buffer for records of these schemas; a buffer of other schemas is
        written first (a batch has one layout of columns)."""
        buf = self._buffers.get(table)
        if buf is not None:
            same_value = value_schema is None or buf.value_schema is None or \
                value_schema == buf.value_schema
            same_key = key_schema is None or buf.key_schema is None or \
                key_schema == buf.key_schema
            if same_value and same_key:
                buf.value_schema = buf.value_schema or value_schema
                buf.key_schema = buf.key_schema or key_schema
                return buf
            self._write_buffer(table)
        buf = self._buffers[table] = _Buffer(table, value_schema, key_schema, since=now)
        return buf

    def _report(self, record: SinkRecord, error: BaseException) -> None:
        """To the errant record reporter (DLQ); without one, the task fails: nothing is
        dropped silently."""
        getter = getattr(self.context, "errant_record_reporter", None)
        reporter = getter() if getter is not None else None
        if reporter is None:
            raise JdbcSinkError(f"{error} (configure errors.tolerance=all and a dead letter "
                                "queue to set such records aside)") from None
        reporter.report(record, error)

    # writing

    def _write_due(self) -> None:
        now = self._clock()
        for table, buf in list(self._buffers.items()):
            if buf.count >= self.batch_size or now - buf.since >= self.max_wait_s:
                self._write_buffer(table)

    def flush(self, current_offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        for table in list(self._buffers):
            self._write_buffer(table)

    def pre_commit(
        self, current_offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> Mapping[TopicPartition, OffsetAndMetadata]:
        try:
            self.flush(current_offsets)
            if self.exactly_once:
                self._advance_offsets(current_offsets)
        except RetriableError as e:  # the next commit tries again
            log.warning("JdbcSink could not write its buffered records yet: %s", e)
        if self.exactly_once:
            return {tp: OffsetAndMetadata(self._db_offsets[tp]) for tp in current_offsets
                    if tp in self._db_offsets}
        pending: dict[TopicPartition, int] = {}
        for buf in self._buffers.values():
            for tp, first in buf.first.items():
                pending[tp] = min(first, pending.get(tp, first))
        return {tp: OffsetAndMetadata(pending[tp]) if tp in pending else om
                for tp, om in current_offsets.items()}

    def _write_buffer(self, table: str) -> None:
        """Write one table's buffer. A passing failure keeps the buffer for the next attempt
        and raises RetriableError (put is then redelivered after retry.backoff.ms, and its
        records are recognised as buffered); after max.retries the task fails."""
        buf = self._buffers.get(table)
        if buf is None:
            return
        if not buf.count:
            del self._buffers[table]
            return
        try:
            self._write(buf)
        except _Transient as e:
            self._close_conn()
            self._failures += 1
            if self._failures > self.max_retries:
                raise JdbcSinkError(f"Writing to {table} failed {self._failures} times in a "
                                    f"row, the last time with: {e}") from None
            self.context.timeout(self.retry_backoff_ms)
            raise RetriableError(f"Writing to {table} failed (attempt {self._failures}), "
                                 f"will retry: {e}") from None
        self._failures = 0
        self._buffers.pop(table, None)
        self.batches_written += 1

    def _write(self, buf: _Buffer) -> None:
        offsets = {tp: last + 1 for tp, last in buf.last.items()} if self.exactly_once else {}
        if buf.value_schema is None and self._table_columns(buf.table) is None:
            rows = None  # only tombstones, for a table that does not exist: nothing to delete
        else:
            rows = self._rows(buf)
        if rows is None or not rows.table.num_rows:
            self._transaction(_Plan([], [], [], rows.rejected if rows else {},
                                    rows.origin if rows else _no_origin, dict), offsets)
            return
        if buf.value_schema is not None:
            self._ensure_table(buf.table, rows.columns)
        staging = self._ensure_staging(buf.table, rows.columns)
        rejected = {**rows.rejected, **self._stage(staging, rows)}
        self._merge(buf.table, staging, rows, rejected, offsets)
        self._clear_staging(buf.table)

    # rows

    def _layout(self, value_schema: Schema | None, key_schema: Schema | None) -> list[Column]:
        cache_key = (value_schema, key_schema)
        cols = self._layouts.get(cache_key)
        if cols is None:
            cols = self._layouts[cache_key] = self._compute_layout(value_schema, key_schema)
        return cols

    def _compute_layout(self, value_schema: Schema | None,
                        key_schema: Schema | None) -> list[Column]:
        specs: list[tuple[str, Schema, bool]] = []
        value_fields: list[Field] = list(value_schema.fields) if value_schema else []
        if self.pk_mode == PK_KAFKA:
            names = self.pk_fields or list(KAFKA_PK_DEFAULTS)
            specs += [(n, s, True) for n, s in zip(names, (STRING_SCHEMA, INT32_SCHEMA,
                                                            INT64_SCHEMA), strict=True)]
        elif self.pk_mode == PK_RECORD_KEY:
            if key_schema is None:
                raise JdbcSinkError("pk.mode=record_key, but the records have no key schema")
            if key_schema.type is Type.STRUCT:
                wanted = self.pk_fields or [f.name for f in key_schema.fields]
                for n in wanted:
                    f = key_schema.field(n)
                    if f is None:
                        raise JdbcSinkError(f"pk.fields names {n!r}, which is not a field of "
                                            "the record key")
                    specs.append((n, f.schema, True))
            else:
                if len(self.pk_fields) > 1:
                    raise JdbcSinkError("The record key is a primitive: pk.fields takes one "
                                        f"column name, got {len(self.pk_fields)}")
                specs.append(((self.pk_fields or [KEY_PK_DEFAULT])[0], key_schema, True))
        elif self.pk_mode == PK_RECORD_VALUE and value_schema is not None:
            wanted = self.pk_fields or [f.name for f in value_fields]
            for n in wanted:
                f = value_schema.field(n)
                if f is None:
                    raise JdbcSinkError(f"pk.fields names {n!r}, which is not a field of the "
                                        "record value")
                specs.append((n, f.schema, True))
        key_names = {n for n, _, _ in specs}
        for f in value_fields:
            if f.name in key_names or (self.whitelist and f.name not in self.whitelist):
                continue
            specs.append((f.name, f.schema, False))
        cols = [Column(n, s, k, f"c{i}") for i, (n, s, k) in enumerate(specs)]
        for c in cols:  # fail on an unwritable type now, naming the field
            sql.column_type(self.dialect, c.schema, key=c.key, staging=True, field=c.name)
        return cols

    def _rows(self, buf: _Buffer) -> _Rows | None:
        """The buffer as columns: rows with a null key are dead-lettered, and upserts and
        updates mark the last record of each key, the one their statement writes (a
        statement must not touch a row twice)."""
        columns = self._layout(buf.value_schema, buf.key_schema)
        arrow_schema = pa.schema([pa.field(c.staging, _stage_type(c.schema)) for c in columns])
        pieces: list[pa.Table] = []
        starts: list[int] = []
        unfit: dict[int, DataError] = {}  # values their own type cannot hold
        n = 0
        for part in buf.parts:
            starts.append(n)
            piece_unfit: dict[int, DataError] = {}
            piece = self._piece(part, columns, buf.value_schema, buf.key_schema, piece_unfit)
            unfit.update({n + i: e for i, e in piece_unfit.items()})
            pieces.append(piece.cast(arrow_schema.append(pa.field(STAGING_DELETE, pa.bool_()))))
            n += piece.num_rows
        table = pa.concat_tables(pieces) if pieces else pa.table({})
        table = table.append_column(STAGING_ROW, pa.array(range(n), pa.int64()))
        table = table.select([c.staging for c in columns] + [STAGING_ROW, STAGING_DELETE])
        for r, e in _unstorable(self.dialect, table, columns).items():
            unfit.setdefault(r, e)
        if unfit:
            bad = pa.array(sorted(unfit), pa.int64())
            table = table.filter(pc.invert(pc.is_in(table[STAGING_ROW], value_set=bad)))

        parts = buf.parts

        def origin(r: int) -> SinkRecord:
            i = bisect.bisect_right(starts, r) - 1
            part = parts[i]
            j = r - starts[i]
            return part.slice(j, j + 1).records()[0] if isinstance(part, SinkBatch) else part[j]

        rejected: dict[int, BaseException] = dict(unfit)
        keys = [c.staging for c in columns if c.key]
        if keys:
            null_key = pc.is_null(table[keys[0]])
            for k in keys[1:]:
                null_key = pc.or_(null_key, pc.is_null(table[k]))
            if pc.any(null_key).as_py():
                names = ", ".join(c.name for c in columns if c.key)
                for r in table.filter(null_key)[STAGING_ROW].to_pylist():
                    rejected[r] = DataError(f"The primary key ({names}) of this record has a "
                                            "null field")
                table = table.filter(pc.invert(null_key))
        winner = pa.array([True] * table.num_rows, pa.bool_())
        deduped = False
        if keys and self.mode in (UPSERT, UPDATE) and table.num_rows:
            last = table.group_by(keys, use_threads=False).aggregate([(STAGING_ROW, "max")])
            wanted = last[f"{STAGING_ROW}_max"].combine_chunks()
            if len(wanted) != table.num_rows:
                winner = pc.is_in(table[STAGING_ROW], value_set=wanted)
                deduped = True
        table = table.append_column(STAGING_WINNER, winner)
        winners = table.filter(winner) if deduped else table
        rs = winners[STAGING_ROW].to_pylist()
        deletes = winners[STAGING_DELETE].to_pylist()
        return _Rows(columns, table, self._segments(rs, deletes), origin, rejected,
                     keys if deduped else [])

    def _segments(self, rs: list[int], deletes: list[bool]) -> list[list[int]]:
        """Runs of rows whose statements may run together: a row after a delete starts a new
        run (in insert and update modes the order of a key's delete and insert matters;
        upserts keep one record per key, so order within the batch does not)."""
        if not rs:
            return []
        if self.mode != INSERT or not self.delete_enabled:
            return [rs]
        out: list[list[int]] = [[]]
        prev_delete = False
        for r, d in zip(rs, deletes, strict=True):
            if prev_delete and not d and out[-1]:
                out.append([])
            out[-1].append(r)
            prev_delete = d
        return out

    def _piece(self, part: list[SinkRecord] | SinkBatch, columns: list[Column],
               value_schema: Schema | None, key_schema: Schema | None,
               unfit: dict[int, DataError]) -> pa.Table:
        """One part's rows as columns named c0.., plus the delete flag; a record with a value
        its field's type cannot hold exactly (a decimal wider than its precision) is put in
        `unfit` by its index in the part."""
        arrays: dict[str, Any] = {}
        if isinstance(part, SinkBatch):
            n = len(part)
            values = pa.Table.from_struct_array(part.values)
            batch_keys = None
            if self.pk_mode == PK_RECORD_KEY and part.keys is not None:
                batch_keys = pa.Table.from_struct_array(part.keys) \
                    if pa.types.is_struct(part.keys.type) else part.keys
            for c in columns:
                if self.pk_mode == PK_KAFKA and c.key:
                    arrays[c.staging] = _kafka_column(c, [part.topic] * n, [part.partition] * n,
                                                      list(part.offsets))
                elif batch_keys is not None and c.key:
                    arrays[c.staging] = batch_keys.column(c.name) \
                        if isinstance(batch_keys, pa.Table) else batch_keys
                else:
                    arrays[c.staging] = values.column(c.name)
            arrays[STAGING_DELETE] = pa.array([False] * n, pa.bool_())
            return pa.table(arrays)
        records = part
        n = len(records)
        vals = None
        if value_schema is not None:
            vals = structs_to_table([r.value for r in records], value_schema, nullable=True,
                                    rejects=unfit)
        keys = None
        if self.pk_mode == PK_RECORD_KEY and key_schema is not None:
            if key_schema.type is Type.STRUCT:
                keys = structs_to_table([r.key for r in records], key_schema, nullable=True,
                                        rejects=unfit)
            else:
                key_array = pa.array([r.key for r in records],
                                     connect_to_arrow_type(key_schema))
        for c in columns:
            if self.pk_mode == PK_KAFKA and c.key:
                arrays[c.staging] = _kafka_column(c, [r.topic for r in records],
                                                  [r.kafka_partition or 0 for r in records],
                                                  [r.kafka_offset for r in records])
            elif self.pk_mode == PK_RECORD_KEY and c.key:
                arrays[c.staging] = keys.column(c.name) if keys is not None else key_array
            elif vals is not None:
                arrays[c.staging] = vals.column(c.name)
            else:
                arrays[c.staging] = pa.nulls(n, connect_to_arrow_type(c.schema))
        arrays[STAGING_DELETE] = pa.array([r.value is None for r in records], pa.bool_())
        return pa.table(arrays)

    # the database

    def _conn(self, attempts: int = 1) -> Any:
        """The task's DB-API connection. Opening it fails the task for a wrong login or a
        missing database; an unreachable server is retried `attempts` times, then (writes
        pass 1) is a passing failure the batch retries with backoff."""
        if self._db is not None:
            return self._db
        cause: BaseException | None = None
        for attempt in range(attempts):
            if attempt:
                time.sleep(self.backoff_s)
            try:
                self._db = self.dialect.connect(self.url, self.user, self.password)
                return self._db
            except ConnectError as e:
                cause = e.__cause__ or e
                if not _unreachable(cause):
                    break
        assert cause is not None
        if attempts == 1 and _unreachable(cause):
            raise _Transient(cause)
        raise JdbcSinkError(f"Cannot connect to {redact_url(self.url)}: "
                            f"{_message(cause)}") from None

    def _close_conn(self) -> None:
        """Close the connection; its session locks go with it, so another task may sweep
        this task's staging tables: they are made again on the next write."""
        self._staging.clear()
        db, self._db = self._db, None
        if db is not None:
            with contextlib.suppress(Exception):
                db.close()

    def _run(self, cur: Any, statement: str, params: Sequence[Any] = ()) -> None:
        cur.execute(prepare(self.dialect, statement), tuple(params))

    def _ddl(self, *statements: str) -> None:
        """Statements in their own transaction (MariaDB commits DDL by itself anyway)."""
        conn = self._conn()
        try:
            cur = conn.cursor()
            for s in statements:
                self._run(cur, s)
            conn.commit()
        except Exception as e:
            self._rollback(conn)
            if sql.classify(e) == sql.TRANSIENT:
                raise _Transient(e) from None
            raise JdbcSinkError(f"{statements[-1].split('(')[0].strip()} failed: "
                                f"{_message(e)}") from None

    def _rollback(self, conn: Any) -> None:
        try:
            conn.rollback()
        except Exception:
            self._close_conn()

    def _query(self, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        conn = self._conn()
        try:
            cur = conn.cursor()
            self._run(cur, statement, params)
            rows = list(cur.fetchall())
            conn.commit()
            return rows
        except Exception as e:
            self._rollback(conn)
            if sql.classify(e) == sql.TRANSIENT:
                raise _Transient(e) from None
            raise JdbcSinkError(f"Query failed: {_message(e)}") from None

    def _norm(self, name: str) -> str:
        return name if self.dialect.name == "postgresql" else name.lower()

    def _table_columns(self, table: str) -> dict[str, str] | None:
        q, params = sql.table_columns_query(self.dialect, table)
        rows = self._query(q, params)
        return {self._norm(r[0]): r[0] for r in rows} if rows else None

    def _ensure_table(self, table: str, columns: list[Column]) -> None:
        """Create (auto.create) or widen (auto.evolve) the table so every column exists."""
        known = self._columns.get(table)
        if known is not None and all(self._norm(c.name) in known for c in columns):
            return
        first = table not in self._columns
        known = self._columns[table] = self._table_columns(table)
        if known is not None and first and "VIEW" not in self.table_types:
            q, params = sql.table_is_view_query(self.dialect, table)
            if self._query(q, params):  # as Confluent's: views are not among table.types
                del self._columns[table]
                raise JdbcSinkError(f"{table} is a view and table.types "
                                    f"({','.join(self.table_types)}) does not list VIEW")
        if known is None:
            if not self.auto_create:
                raise JdbcSinkError(f"Table {table} does not exist and auto.create is false")
            log.info("Creating table %s", table)
            try:
                self._ddl(sql.create_table(self.dialect, table, columns))
            except JdbcSinkError:
                if self._table_columns(table) is None:  # not a race with another task
                    raise
            known = self._columns[table] = self._table_columns(table) or {}
        missing = [c for c in columns if self._norm(c.name) not in known]
        if not missing:
            return
        if not self.auto_evolve:
            raise JdbcSinkError(f"Table {table} has no column for "
                                f"{', '.join(c.name for c in missing)} and auto.evolve is false")
        for c in missing:
            if c.key:
                raise JdbcSinkError(f"Table {table} has no column for key field {c.name}; "
                                    "auto.evolve adds only value columns")
            if not (c.schema.optional or c.schema.default is not None):
                raise JdbcSinkError(f"Table {table} has no column for {c.name}, a required "
                                    "field without a default: auto.evolve adds only optional "
                                    "fields (as nullable columns)")
        log.info("Adding columns %s to %s", [c.name for c in missing], table)
        self._ddl(*(sql.add_column(self.dialect, table, c) for c in missing))
        self._columns[table] = self._table_columns(table) or {}

    def _ensure_staging(self, table: str, columns: list[Column]) -> str:
        """The task's staging table for `table`, (re)created for this column layout and
        empty: rows an interrupted attempt left there are cleared first."""
        st = self._staging.get(table)
        layout = tuple(columns)
        if st is None or st.layout != layout:
            prefix = _staging_prefix(self.connector, table)
            name = prefix + self._instance
            self._claim(name)  # before it exists: another task's sweep must not take it
            self._ddl(sql.drop_table(self.dialect, name),
                      sql.create_staging(self.dialect, name, columns))
            if st is None:
                self._sweep(prefix, name)
            st = self._staging[table] = _Staging(name, layout)
        elif st.dirty:
            self._clear_staging(table)
        st.dirty = True
        return st.name

    def _claim(self, name: str) -> bool:
        """Take the session lock named after a staging table (PostgreSQL advisory lock,
        MariaDB GET_LOCK): held while this task's connection lives, so a staging table whose
        lock is free belongs to a task that is gone. SQLite has no such locks."""
        q = sql.claim_lock(self.dialect)
        if q is None:
            return False
        return bool(self._query(q, (name,))[0][0])

    def _sweep(self, prefix: str, own: str) -> None:
        """Drop the staging tables that tasks of this connector left for this table when
        they died (a SIGKILL never runs stop())."""
        q = sql.claim_lock(self.dialect)
        if q is None:
            return
        listing, params = sql.staging_tables_query(self.dialect)
        for (name,) in self._query(listing, params):
            if name.startswith(prefix) and name != own and self._claim(name):
                log.info("Dropping %s, the staging table of a task that is gone", name)
                self._ddl(sql.drop_table(self.dialect, name))
                self._query(sql.release_lock(self.dialect), (name,))

    def _clear_staging(self, table: str) -> None:
        st = self._staging[table]
        self._ddl(sql.clear_table(self.dialect, st.name))
        st.dirty = False

    def _index_staging(self, table: str) -> None:
        st = self._staging[table]
        if not st.indexed:
            self._ddl(sql.staging_index(self.dialect, st.name))
            st.indexed = True

    # Spark

    def _write_options(self) -> dict[str, str]:
        opts = self.dialect.spark_options(self.url, self.user, self.password)
        url = spark_url(self.url)
        extra = {"postgresql": "reWriteBatchedInserts=true",
                 "mariadb": "rewriteBatchedStatements=true"}.get(self.dialect.name)
        if extra and extra.split("=")[0].lower() not in url.lower():
            url += ("&" if "?" in url else "?") + extra
        opts["url"] = url
        return opts

    def _frame(self, table: pa.Table, single: bool) -> DataFrame:
        spark = self.context.spark()
        df = spark.createDataFrame(table)
        # SQLite takes one writer at a time; one partition is also one transaction
        return df.coalesce(1) if single or self.dialect.name == "sqlite" else df

    def _spark_write(self, staging: str, table: pa.Table, single: bool = False) -> None:
        self._frame(table, single).write.format("jdbc").options(
            **self._write_options(), dbtable=staging).mode("append").save()

    def _unless_rows_at_fault(self, e: Exception) -> None:
        """A staging write failed: retry later if it passes, fail the task unless some rows
        caused it (those the caller bisects)."""
        kind = sql.classify(e)
        if kind == sql.TRANSIENT:
            raise _Transient(e) from None
        if kind != sql.ROW:
            raise JdbcSinkError(f"Spark could not write to the staging table of "
                                f"{self.dialect.name}: {_message(e)}") from None

    def _stage(self, staging: str, rows: _Rows) -> dict[int, BaseException]:
        """Spark writes the rows into staging. Staging takes any value its wide types hold,
        so a failure is rare; one caused by rows (a NUL in a PostgreSQL string) is bisected
        with one-partition writes (each one transaction) to set those rows aside."""
        rejected: dict[int, BaseException] = {}
        try:
            self._spark_write(staging, rows.table)
            return rejected
        except Exception as e:
            self._unless_rows_at_fault(e)
        self._ddl(sql.clear_table(self.dialect, staging))
        pending = [rows.table]
        while pending:
            piece = pending.pop()
            try:
                self._spark_write(staging, piece, single=True)
            except Exception as e:
                self._unless_rows_at_fault(e)
                if piece.num_rows == 1:
                    rejected[piece[STAGING_ROW][0].as_py()] = e
                else:
                    half = piece.num_rows // 2
                    pending += [piece.slice(half), piece.slice(0, half)]
        return rejected

    # the transaction

    def _merge(self, table: str, staging: str, rows: _Rows, rejected: dict[int, BaseException],
               offsets: Mapping[TopicPartition, int]) -> None:
        """Staged rows into the target (and the offsets, exactly_once) in one transaction.
        Fast path: one statement per run of rows. When the database rejects a statement for
        a row's fault, the transaction restarts and bisects the rows by range under
        savepoints; rows that fail alone are dead-lettered, the rest commit."""
        segments = [[r for r in seg if r not in rejected] for seg in rows.segments]
        has_deletes = self.delete_enabled and pc.any(rows.table[STAGING_DELETE]).as_py()

        def statements(winners: bool) -> list[str]:
            main = sql.insert_statement(self.dialect, table, staging, rows.columns, self.mode,
                                        winners)
            delete = sql.delete_statement(self.dialect, table, staging, rows.columns,
                                          winners) if has_deletes else None
            return [s for s in (main, delete) if s]

        plan = _Plan(statements(True), statements(False), [s for s in segments if s],
                     rejected, rows.origin, rows.earlier)
        try:
            self._transaction(plan, offsets)
        except _RowFault:
            if any(len(s) > BISECT_INDEX_ROWS for s in plan.segments):
                self._index_staging(table)
            self._transaction(plan, offsets, bisecting=True)

    def _transaction(self, plan: _Plan, offsets: Mapping[TopicPartition, int], *,
                     bisecting: bool = False) -> None:
        """One transaction: the statements over each run of rows (bisecting: by halves under
        savepoints), the offsets, the rejected rows to the DLQ, commit."""
        failed = dict(plan.rejected)
        conn = self._conn()
        try:
            cur = conn.cursor()
            if offsets:
                self._fence(cur, offsets)
            for seg in plan.segments:
                if bisecting:
                    self._bisect(cur, plan.statements, seg, failed)
                else:
                    for s in plan.statements:
                        self._run(cur, s, (seg[0], seg[-1]))
            if failed:
                self._fall_back(cur, plan, failed)
            for tp, off in offsets.items():
                self._run(cur, sql.upsert_offset(self.dialect, self.offsets_table),
                          (self.connector, tp.topic, tp.partition, off))
            for r in sorted(failed):  # before the commit: a crash dead-letters them again
                self.rows_rejected += 1
                error = failed[r]
                self._report(plan.origin(r), error if isinstance(error, DataError)
                             else RowRejected(_message(error)))
            conn.commit()
        except _RowFault:
            self._rollback(conn)
            raise
        except (JdbcSinkError, ConnectError):
            self._rollback(conn)
            raise
        except Exception as e:
            self._rollback(conn)
            kind = sql.classify(e)
            if kind == sql.TRANSIENT:
                raise _Transient(e) from None
            if kind == sql.ROW and not bisecting:
                raise _RowFault() from None
            raise JdbcSinkError(f"Writing to the table failed: {_message(e)}") from None
        for tp, off in offsets.items():
            self._db_offsets[tp] = off

    def _attempt(self, cur: Any, statements: list[str], lo: int, hi: int) -> BaseException | None:
        """The statements for rows lo..hi under a savepoint; a row's fault is returned (and
        rolled back), any other failure raised."""
        self._run(cur, "SAVEPOINT kctl_sp")
        try:
            for s in statements:
                self._run(cur, s, (lo, hi))
        except Exception as e:
            if sql.classify(e) != sql.ROW:
                raise
            self._run(cur, "ROLLBACK TO SAVEPOINT kctl_sp")
            self._run(cur, "RELEASE SAVEPOINT kctl_sp")
            return e
        self._run(cur, "RELEASE SAVEPOINT kctl_sp")
        return None

    def _bisect(self, cur: Any, statements: list[str], rs: list[int],
                failed: dict[int, BaseException]) -> None:
        """Apply rows `rs` (sorted row indexes) under a savepoint; on a row's fault, halve."""
        pending = [rs]
        while pending:
            part = pending.pop()
            error = self._attempt(cur, statements, part[0], part[-1])
            if error is None:
                continue
            if len(part) == 1:
                failed[part[0]] = error
            else:
                half = len(part) // 2
                pending += [part[half:], part[:half]]

    def _fall_back(self, cur: Any, plan: _Plan, failed: dict[int, BaseException]) -> None:
        """A key whose last record was rejected gets its latest earlier record the database
        accepts (those it rejects are dead-lettered too): an upsert batch then ends where
        record-by-record writes would have."""
        earlier = plan.earlier()
        for r in sorted(failed):
            for candidate in earlier.get(r, ()):
                if candidate in failed:
                    continue  # Spark could not stage it
                error = self._attempt(cur, plan.one_row, candidate, candidate)
                if error is None:
                    break
                failed[candidate] = error

    def _fence(self, cur: Any, offsets: Mapping[TopicPartition, int]) -> None:
        """Lock this connector's offsets rows and check they are what this task last saw:
        if another task wrote one of its partitions since (this one has not noticed that a
        rebalance took it away), this task must not commit, and stops."""
        self._run(cur, sql.read_offsets(self.dialect, self.offsets_table, lock=True),
                  (self.connector,))
        held = {TopicPartition(t, int(p)): int(n) for t, p, n in cur.fetchall()}
        moved = {str(tp): (self._db_offsets.get(tp), held.get(tp)) for tp in offsets
                 if held.get(tp) != self._db_offsets.get(tp)}
        if moved:
            raise JdbcSinkError(
                f"Another writer moved the offsets of {', '.join(sorted(moved))} in "
                f"{self.offsets_table} (this task saw {[a for a, _ in moved.values()]}, the "
                f"database holds {[b for _, b in moved.values()]}): the partitions belong to "
                "another task now; this one stops without writing its batch")

    def _read_offsets(self) -> dict[TopicPartition, int]:
        try:
            self._conn(self.attempts)
            rows = self._query(sql.read_offsets(self.dialect, self.offsets_table),
                               (self.connector,))
        except _Transient as e:
            raise JdbcSinkError(f"Cannot read offsets from {self.offsets_table}: {e}") from None
        return {TopicPartition(t, int(p)): int(n) for t, p, n in rows}

    def _commit_offsets_only(self, offsets: Mapping[TopicPartition, int]) -> None:
        changed = {tp: o for tp, o in offsets.items() if self._db_offsets.get(tp) != o}
        if changed:
            self._transaction(_Plan([], [], [], {}, _no_origin, dict), changed)

    def _advance_offsets(self, current: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        """After a flush everything put is in the database: records that produced no row
        (dead-lettered, skipped) move the offsets too."""
        ahead = {tp: om.offset for tp, om in current.items()
                 if om.offset >= self._next.get(tp, 0) and om.offset > self._db_offsets.get(tp, -1)}
        if not ahead:
            return
        try:
            self._commit_offsets_only(ahead)
        except _Transient as e:
            self._close_conn()
            raise RetriableError(str(e)) from None


def _stage_type(schema: Schema) -> pa.DataType:
    """The Arrow type a column is staged as: decimals and times as their exact text."""
    return pa.string() if sql.staged_as_text(schema) else connect_to_arrow_type(schema)


# doubles a database cannot store: it would refuse the whole batch (MariaDB's driver writes
# NaN into the statement as a name: "Unknown column 'NaN'") or keep something else (SQLite
# stores NaN as NULL), so they are the record's error instead
_NO_NAN = {"mariadb": "MariaDB cannot store NaN or infinite doubles",
           "sqlite": "SQLite stores NaN as NULL"}


def _unstorable(dialect: Dialect, table: pa.Table, columns: Sequence[Column]
                ) -> dict[int, DataError]:
    """Rows (by STAGING_ROW) holding a double the database cannot store as it is."""
    why = _NO_NAN.get(dialect.name)
    out: dict[int, DataError] = {}
    if why is None:
        return out
    for c in columns:
        if c.schema.type not in (Type.FLOAT32, Type.FLOAT64) or c.schema.name is not None:
            continue
        col = table[c.staging]
        bad = pc.is_nan(col) if dialect.name == "sqlite" else pc.invert(pc.is_finite(col))
        bad = pc.fill_null(bad, False)
        if not pc.any(bad).as_py():
            continue
        for r, x in zip(table[STAGING_ROW].filter(bad).to_pylist(), col.filter(bad).to_pylist(),
                        strict=True):
            out.setdefault(r, DataError(f"Field {c.name!r} is {x}: {why}"))
    return out


def _no_origin(r: int) -> SinkRecord:
    raise AssertionError(f"no record behind row {r}")


class _RowFault(Exception):
    """The fast path hit a row's fault: bisect in a new transaction."""


def _kafka_column(c: Column, topics: list[str], partitions: list[int],
                  offsets: list[int]) -> pa.Array:
    values = {STRING_SCHEMA: topics, INT32_SCHEMA: partitions, INT64_SCHEMA: offsets}[c.schema]
    return pa.array(values, connect_to_arrow_type(c.schema))


__all__ = ["CONFIG_DEF", "JdbcSinkConnector", "JdbcSinkError", "JdbcSinkTask", "RowRejected"]

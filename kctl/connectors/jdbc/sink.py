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
import dataclasses
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kctl.api import (
    ConfigDef,
    ConfigValue,
    OffsetAndMetadata,
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
)
from kctl.connectors.jdbc._common import Dialect, dialect_for, driver_loaded
from kctl.connectors.jdbc._confluent import QUOTE_NEVER
from kctl.connectors.jdbc._sink_buffer import Buffer, RowBuilder, key_schema_of
from kctl.connectors.jdbc._sink_config import (
    CONFIG_DEF,
    EXACTLY_ONCE,
    PK_RECORD_KEY,
    STAGE_AUTO,
    STAGE_COPY,
    STAGE_SPARK,
    JdbcSinkError,
    RowRejected,
    config_problems,
)
from kctl.connectors.jdbc._sink_db import Session, Transient
from kctl.connectors.jdbc._sink_sql import TYPES_DOC  # noqa: F401 (the manual's)
from kctl.connectors.jdbc._sink_tables import Tables
from kctl.connectors.jdbc._sink_write import Writer, no_origin

log = logging.getLogger(__name__)


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


# --- the task -----------------------------------------------------------------------------------


class JdbcSinkTask(SinkTask):
    """Buffers records per table, writes each table's batch through Spark and one
    transaction; exactly_once keeps the consumer offsets in that transaction."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._buffers: dict[str, Buffer] = {}
        self._next: dict[TopicPartition, int] = {}  # offsets below are put (or written)
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
        url: str = c["connection.url"]
        self.dialect: Dialect = dialect_for(url)
        if c["quote.sql.identifiers"].lower() == QUOTE_NEVER:
            self.dialect = dataclasses.replace(self.dialect, quoting=False)
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
        method = c["staging.method"].lower()
        if method == STAGE_AUTO:
            method = STAGE_COPY if self.dialect.name == "postgresql" else STAGE_SPARK
        self.staging_method: str = method
        self.connector = str(props.get("name") or "")
        if self.exactly_once and not self.connector:
            raise JdbcSinkError("delivery.guarantee=exactly_once needs the connector's name")
        self._db = Session(self.dialect, url, c["connection.user"], c["connection.password"],
                           self.backoff_s)
        self._builder = RowBuilder(self.dialect, mode=self.mode, pk_mode=self.pk_mode,
                                   pk_fields=self.pk_fields, whitelist=self.whitelist,
                                   delete_enabled=self.delete_enabled)
        self._tables = Tables(self._db, auto_create=self.auto_create,
                              auto_evolve=self.auto_evolve, table_types=self.table_types)
        self._writer = Writer(self._db, self.context.spark, mode=self.mode,
                              delete_enabled=self.delete_enabled, connector=self.connector,
                              offsets_table=self.offsets_table, reject=self._reject,
                              staging_method=self.staging_method)
        if self.staging_method == STAGE_SPARK and not driver_loaded(self.context.spark(),
                                                                     self.dialect):
            raise JdbcSinkError(self.dialect.missing_driver_message())
        self._db.connect(self.attempts)  # a wrong login or an unreachable database fails now
        if self.exactly_once:
            self._writer.create_offsets_table()

    def stop(self) -> None:
        self._buffers.clear()
        writer: Writer | None = getattr(self, "_writer", None)  # None: start failed early
        if writer is not None:
            writer.drop_staging()
            writer.db.close()

    def open(self, partitions: Sequence[TopicPartition]) -> None:
        if not self.exactly_once or not partitions:
            return
        held = self._writer.read_offsets(self.attempts)
        rewind = {}
        for tp in partitions:
            self._buffers_drop({tp})
            if tp in held:
                self._writer.db_offsets[tp] = self._next[tp] = rewind[tp] = held[tp]
            else:
                self._writer.db_offsets.pop(tp, None)
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
            self._writer.db_offsets.pop(tp, None)

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
            problem = self._builder.problem(r)
            if problem is not None:
                self._report(r, problem)
                self._next[tp] = r.kafka_offset + 1
                continue
            value_schema = r.value.schema if isinstance(r.value, Struct) else None
            keys = key_schema_of(r) if self.pk_mode == PK_RECORD_KEY else None
            # a write this may start can fail: the record is taken only once it is buffered
            buf = self._buffer(self._table(r.topic), value_schema, keys, now)
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

    def _table(self, topic: str) -> str:
        return self.table_format.replace("${topic}", topic)

    def _buffer(self, table: str, value_schema: Schema | None, key_schema: Schema | None,
                now: float) -> Buffer:
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
        buf = self._buffers[table] = Buffer(table, value_schema, key_schema, since=now)
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

    def _reject(self, record: SinkRecord, error: BaseException) -> None:
        """A record whose row the database (or staging) refused."""
        self.rows_rejected += 1
        self._report(record, error)

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
            held = self._writer.db_offsets
            return {tp: OffsetAndMetadata(held[tp]) for tp in current_offsets if tp in held}
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
        except Transient as e:
            self._db.close()
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

    def _write(self, buf: Buffer) -> None:
        offsets = {tp: last + 1 for tp, last in buf.last.items()} if self.exactly_once else {}
        if buf.value_schema is None and self._tables.columns(buf.table) is None:
            rows = None  # only tombstones, for a table that does not exist: nothing to delete
        else:
            rows = self._builder.rows(buf)
        if rows is None or not rows.table.num_rows:
            self._writer.commit(rows.rejected if rows else {},
                                rows.origin if rows else no_origin, offsets)
            return
        if buf.value_schema is not None:
            self._tables.ensure(buf.table, rows.columns)
        self._writer.write(buf.table, rows, offsets)

    def _advance_offsets(self, current: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        """After a flush everything put is in the database: records that produced no row
        (dead-lettered, skipped) move the offsets too."""
        held = self._writer.db_offsets
        ahead = {tp: om.offset for tp, om in current.items()
                 if om.offset >= self._next.get(tp, 0) and om.offset > held.get(tp, -1)}
        if not ahead:
            return
        try:
            self._writer.commit_offsets(ahead)
        except Transient as e:
            self._db.close()
            raise RetriableError(str(e)) from None


__all__ = ["CONFIG_DEF", "JdbcSinkConnector", "JdbcSinkError", "JdbcSinkTask", "RowRejected"]

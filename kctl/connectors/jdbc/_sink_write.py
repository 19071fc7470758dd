"""JdbcSink's writes: a batch's rows are staged in a table the task owns (PostgreSQL's COPY
of the batch's Arrow columns as CSV, or Spark's JDBC writer), then one DB-API transaction
merges them into the target (bisecting to the rows the database rejects) and, exactly_once,
moves the consumer offsets the batch covers."""

from __future__ import annotations

import hashlib
import logging
import re
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv

from kctl.api import ConnectError, DataError, SinkRecord, TopicPartition
from kctl.connectors.jdbc import _sink_sql as sql
from kctl.connectors.jdbc._common import one_line, spark_url
from kctl.connectors.jdbc._sink_buffer import Rows
from kctl.connectors.jdbc._sink_config import (
    INSERT,
    SINK_MODULE,
    STAGE_COPY,
    STAGE_SPARK,
    JdbcSinkError,
    RowRejected,
)
from kctl.connectors.jdbc._sink_db import Session, Transient, message
from kctl.connectors.jdbc._sink_sql import STAGING_DELETE, STAGING_ROW, Column

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(SINK_MODULE)  # the sink's own logger, as its settings name it

BISECT_INDEX_ROWS = 256  # staged batches larger than this get an index before bisection


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
    copy: tuple[str, list[Column], pa.Table] | None = None  # rows COPY puts in a table


def _staging_prefix(connector: str, table: str) -> str:
    digest = hashlib.sha1(f"{connector}\x00{table}".encode()).hexdigest()[:10]
    return f"kctl_stage_{digest}_"


class Writer:
    """Writes staged batches for one task: its staging tables (swept when their task is
    gone), the merge transaction, and exactly_once's offsets as the database holds them."""

    def __init__(self, db: Session, spark: Callable[[], Any], *, mode: str,
                 delete_enabled: bool, connector: str, offsets_table: str,
                 reject: Callable[[SinkRecord, BaseException], None],
                 staging_method: str = STAGE_SPARK) -> None:
        self.db = db
        self.dialect = db.dialect
        self._spark = spark
        self._load = self._copy if staging_method == STAGE_COPY else self._spark_write
        self.mode = mode
        self.delete_enabled = delete_enabled
        self.connector = connector
        self.offsets_table = offsets_table
        self._reject = reject
        self._instance = uuid.uuid4().hex[:8]
        self.staging: dict[str, _Staging] = {}
        self._no_copy: set[str] = set()  # tables COPY cannot write (views)
        self.db_offsets: dict[TopicPartition, int] = {}  # exactly_once: what the DB holds
        self._names: dict[str, tuple[str, str]] = {}  # staging column -> (field, table)
        db.on_close.append(self.staging.clear)

    def write(self, table: str, rows: Rows, offsets: Mapping[TopicPartition, int]) -> None:
        """Stage the rows, merge them into `table` with the offsets, leave staging empty.
        Plain inserts COPY straight into `table` when they can: a row the table refuses
        sends the batch through staging, where bisection finds it."""
        self._names = {c.staging: (c.name, table) for c in rows.columns}
        if self._copies_into_target(table, rows):
            plan = _Plan([], [], [], dict(rows.rejected), rows.origin, rows.earlier,
                         copy=(table, rows.columns, rows.table))
            try:
                self._transaction(plan, offsets)
                return
            except _RowFault:
                log.debug("A row of the batch for %s was refused: staging it", table)
            except _CopyRefused as e:  # a view, say: statements can write it, COPY cannot
                log.info("COPY cannot write %s (%s): its batches go through staging",
                         table, e)
                self._no_copy.add(table)
        staging = self._ensure_staging(table, rows.columns)
        rejected = {**rows.rejected, **self._stage(staging, rows)}
        self._merge(table, staging, rows, rejected, offsets)
        self._clear_staging(table)

    def commit(self, rejected: dict[int, BaseException], origin: Callable[[int], SinkRecord],
               offsets: Mapping[TopicPartition, int]) -> None:
        """A batch without rows to stage: its rejected records and offsets, one transaction."""
        self._transaction(_Plan([], [], [], rejected, origin, dict), offsets)

    def drop_staging(self) -> None:
        """Stopping: drop this task's staging tables while the connection lasts."""
        for st in list(self.staging.values()):
            if self.db.conn is None:
                break
            try:
                self.db.ddl(sql.drop_table(self.dialect, st.name))
            except Exception as e:  # stopping: a leftover staging table is harmless
                log.warning("Could not drop staging table %s: %s", st.name, one_line(e))
        self.staging.clear()

    # staging tables

    def _ensure_staging(self, table: str, columns: list[Column]) -> str:
        """The task's staging table for `table`, (re)created for this column layout and
        empty: rows an interrupted attempt left there are cleared first."""
        st = self.staging.get(table)
        layout = tuple(columns)
        if st is None or st.layout != layout:
            prefix = _staging_prefix(self.connector, table)
            name = prefix + self._instance
            self._claim(name)  # before it exists: another task's sweep must not take it
            self.db.ddl(sql.drop_table(self.dialect, name),
                        sql.create_staging(self.dialect, name, columns))
            if st is None:
                self._sweep(prefix, name)
            st = self.staging[table] = _Staging(name, layout)
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
        return bool(self.db.query(q, (name,))[0][0])

    def _sweep(self, prefix: str, own: str) -> None:
        """Drop the staging tables that tasks of this connector left for this table when
        they died (a SIGKILL never runs stop())."""
        q = sql.claim_lock(self.dialect)
        if q is None:
            return
        listing, params = sql.staging_tables_query(self.dialect)
        for (name,) in self.db.query(listing, params):
            if name.startswith(prefix) and name != own and self._claim(name):
                log.info("Dropping %s, the staging table of a task that is gone", name)
                self.db.ddl(sql.drop_table(self.dialect, name))
                self.db.query(sql.release_lock(self.dialect), (name,))

    def _clear_staging(self, table: str) -> None:
        st = self.staging[table]
        self.db.ddl(sql.clear_table(self.dialect, st.name))
        st.dirty = False

    def _index_staging(self, table: str) -> None:
        st = self.staging[table]
        if not st.indexed:
            self.db.ddl(sql.staging_index(self.dialect, st.name))
            st.indexed = True

    # loading staging: COPY or Spark

    def _copies_into_target(self, table: str, rows: Rows) -> bool:
        """Inserts without deletes need no statement over staging: COPY writes the target."""
        return (self._load == self._copy and self.mode == INSERT and rows.table.num_rows > 0
                and table not in self._no_copy
                and not pc.any(rows.table[STAGING_DELETE]).as_py())

    def _copy(self, staging: str, table: pa.Table, single: bool = False) -> None:
        """PostgreSQL's COPY FROM STDIN of the rows as CSV (Arrow writes it in C++), in a
        transaction of its own: 10-20x Spark's JDBC writer for a batch, and no Spark job."""
        conn = self.db.connect()
        try:
            with conn.cursor() as cur:
                self._copy_rows(cur, self.dialect.quote_identifier(staging),
                                table.column_names, table)
            conn.commit()
        except Exception:
            self.db.rollback(conn)
            raise

    def _copy_rows(self, cur: Any, target: str, names: list[str], table: pa.Table) -> None:
        columns = ", ".join(self.dialect.quote_identifier(n) for n in names)
        with cur.copy(f"COPY {target} ({columns}) FROM STDIN (FORMAT csv)") as copy:
            for chunk in csv_chunks(table):
                copy.write(chunk)

    # Spark

    def _write_options(self) -> dict[str, str]:
        opts = self.dialect.spark_options(self.db.url, self.db.user, self.db.password)
        url = spark_url(self.db.url)
        extra = {"postgresql": "reWriteBatchedInserts=true",
                 "mariadb": "rewriteBatchedStatements=true"}.get(self.dialect.name)
        if extra and extra.split("=")[0].lower() not in url.lower():
            url += ("&" if "?" in url else "?") + extra
        opts["url"] = url
        return opts

    def _frame(self, table: pa.Table, single: bool) -> DataFrame:
        spark = self._spark()
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
            raise Transient(e) from None
        if kind != sql.ROW:
            raise JdbcSinkError(f"Spark could not write to the staging table of "
                                f"{self.dialect.name}: {self._say(message(e))}") from None

    def _stage(self, staging: str, rows: Rows) -> dict[int, BaseException]:
        """COPY or Spark writes the rows into staging. Staging takes any value its wide types
        hold, so a failure is rare; one caused by rows (a NUL in a PostgreSQL string) is
        bisected with writes of halves (each one transaction) to set those rows aside."""
        rejected: dict[int, BaseException] = {}
        try:
            self._load(staging, rows.table)
            return rejected
        except Exception as e:
            self._unless_rows_at_fault(e)
        self.db.ddl(sql.clear_table(self.dialect, staging))
        pending = [rows.table]
        while pending:
            piece = pending.pop()
            try:
                self._load(staging, piece, single=True)
            except Exception as e:
                self._unless_rows_at_fault(e)
                if piece.num_rows == 1:
                    rejected[piece[STAGING_ROW][0].as_py()] = e
                else:
                    half = piece.num_rows // 2
                    pending += [piece.slice(half), piece.slice(0, half)]
        return rejected

    # the transaction

    def _merge(self, table: str, staging: str, rows: Rows, rejected: dict[int, BaseException],
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
        conn = self.db.connect()
        try:
            cur = conn.cursor()
            if offsets:
                self._fence(cur, offsets)
            if plan.copy is not None:
                table, columns, rows = plan.copy
                try:
                    self._copy_rows(cur, self.dialect.table(table), [c.name for c in columns],
                                    rows.select([c.staging for c in columns]))
                except Exception as e:
                    if sql.classify(e) == sql.FATAL:
                        raise _CopyRefused(message(e)) from None
                    raise
            for seg in plan.segments:
                if bisecting:
                    self._bisect(cur, plan.statements, seg, failed)
                else:
                    for s in plan.statements:
                        self.db.run(cur, s, (seg[0], seg[-1]))
            if failed:
                self._fall_back(cur, plan, failed)
            for tp, off in offsets.items():
                self.db.run(cur, sql.upsert_offset(self.dialect, self.offsets_table),
                            (self.connector, tp.topic, tp.partition, off))
            for r in sorted(failed):  # before the commit: a crash dead-letters them again
                error = failed[r]
                self._reject(plan.origin(r), error if isinstance(error, DataError)
                             else RowRejected(self._say(message(error))))
            conn.commit()
        except (_RowFault, _CopyRefused):
            self.db.rollback(conn)
            raise
        except (JdbcSinkError, ConnectError):
            self.db.rollback(conn)
            raise
        except Exception as e:
            self.db.rollback(conn)
            kind = sql.classify(e)
            if kind == sql.TRANSIENT:
                raise Transient(e) from None
            if kind == sql.ROW and not bisecting:
                raise _RowFault() from None
            raise JdbcSinkError(f"Writing to the table failed: {self._say(message(e))}") \
                from None
        for tp, off in offsets.items():
            self.db_offsets[tp] = off

    def _say(self, text: str) -> str:
        """A database's message in the user's names: a staging column (`c12`, or
        `db`.`kctl_stage_...`.`c12` as MariaDB writes it) becomes the record field and
        target table it holds."""
        def name(m: re.Match[str]) -> str:
            found = self._names.get(m.group("col"))
            if found is None:
                return m.group(0)
            q = m.group("q")
            return f"{q}{found[0]}{q} (of {found[1]})"
        return _STAGING_COLUMN.sub(name, text)

    def _attempt(self, cur: Any, statements: list[str], lo: int, hi: int) -> BaseException | None:
        """The statements for rows lo..hi under a savepoint; a row's fault is returned (and
        rolled back), any other failure raised."""
        self.db.run(cur, "SAVEPOINT kctl_sp")
        try:
            for s in statements:
                self.db.run(cur, s, (lo, hi))
        except Exception as e:
            if sql.classify(e) != sql.ROW:
                raise
            self.db.run(cur, "ROLLBACK TO SAVEPOINT kctl_sp")
            self.db.run(cur, "RELEASE SAVEPOINT kctl_sp")
            return e
        self.db.run(cur, "RELEASE SAVEPOINT kctl_sp")
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

    # exactly_once: the offsets in the database

    def _fence(self, cur: Any, offsets: Mapping[TopicPartition, int]) -> None:
        """Lock this connector's offsets rows and check they are what this task last saw:
        if another task wrote one of its partitions since (this one has not noticed that a
        rebalance took it away), this task must not commit, and stops."""
        self.db.run(cur, sql.read_offsets(self.dialect, self.offsets_table, lock=True),
                    (self.connector,))
        held = {TopicPartition(t, int(p)): int(n) for t, p, n in cur.fetchall()}
        moved = {str(tp): (self.db_offsets.get(tp), held.get(tp)) for tp in offsets
                 if held.get(tp) != self.db_offsets.get(tp)}
        if moved:
            raise JdbcSinkError(
                f"Another writer moved the offsets of {', '.join(sorted(moved))} in "
                f"{self.offsets_table} (this task saw {[a for a, _ in moved.values()]}, the "
                f"database holds {[b for _, b in moved.values()]}): the partitions belong to "
                "another task now; this one stops without writing its batch")

    def create_offsets_table(self) -> None:
        self.db.ddl(sql.create_offsets_table(self.dialect, self.offsets_table))

    def read_offsets(self, attempts: int) -> dict[TopicPartition, int]:
        """The offsets this connector's rows hold (a task given partitions resumes there)."""
        try:
            self.db.connect(attempts)
            rows = self.db.query(sql.read_offsets(self.dialect, self.offsets_table),
                                 (self.connector,))
        except Transient as e:
            raise JdbcSinkError(f"Cannot read offsets from {self.offsets_table}: {e}") from None
        return {TopicPartition(t, int(p)): int(n) for t, p, n in rows}

    def commit_offsets(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Move the offsets that changed, without rows."""
        changed = {tp: o for tp, o in offsets.items() if self.db_offsets.get(tp) != o}
        if changed:
            self.commit({}, no_origin, changed)


CSV_CHUNK_ROWS = 65_536  # rows per COPY write: bounded memory for the CSV text


def csv_chunks(table: pa.Table) -> Iterator[bytes]:
    """The rows as PostgreSQL's CSV: Arrow quotes every string (so "" is an empty string
    and a bare empty field is NULL), writes doubles in their shortest exact form (nan, inf
    and -0 included, which PostgreSQL reads back bit for bit) and timestamps as their UTC
    wall clock, which the session (in UTC, `SESSION_INIT`) reads as that instant: Arrow
    writes a timestamp with a zone ten times slower, looking the zone up for each value;
    bytes become bytea's hex text."""
    binary = [i for i, f in enumerate(table.schema)
              if pa.types.is_binary(f.type) or pa.types.is_large_binary(f.type)]
    zoned = [i for i, f in enumerate(table.schema)
             if pa.types.is_timestamp(f.type) and f.type.tz is not None]
    options = pa_csv.WriteOptions(include_header=False)
    for start in range(0, max(table.num_rows, 1), CSV_CHUNK_ROWS):
        piece = table.slice(start, CSV_CHUNK_ROWS)
        for i in binary:
            piece = piece.set_column(i, piece.schema.field(i).name, pa.array(
                [None if b is None else "\\x" + b.hex() for b in piece[i].to_pylist()],
                pa.string()))
        for i in zoned:  # the same epoch values, read as UTC wall clock
            f = piece.schema.field(i)
            piece = piece.set_column(i, f.name, piece[i].cast(pa.timestamp(f.type.unit)))
        sink = pa.BufferOutputStream()
        pa_csv.write_csv(piece, sink, options)
        yield sink.getvalue().to_pybytes()


# a staging column in a message: 'c3', "c3", `c3`, or qualified `db`.`kctl_stage_x`.`c3`
_STAGING_COLUMN = re.compile(r"(?:(?P<q0>[`'\"])[^`'\"\s]*(?P=q0)\.){0,2}"
                             r"(?P<q>[`'\"])(?P<col>c\d+)(?P=q)")


def no_origin(r: int) -> SinkRecord:
    raise AssertionError(f"no record behind row {r}")


class _RowFault(Exception):
    """The fast path hit a row's fault: bisect in a new transaction."""


class _CopyRefused(Exception):
    """COPY cannot write the target itself (a view): stage the batch instead."""

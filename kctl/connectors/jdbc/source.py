"""JdbcSource: database tables (or one query) become records, read through Spark JDBC.

Confluent's JDBC source connector is the reference: `mode` bulk | incrementing | timestamp
| timestamp+incrementing, tables as source partitions split N:1 over tasks, a thread in the
connector that notices added and dropped tables, offsets per table so a restart resumes
exactly. Reads are Spark JDBC jobs with the predicates in the SQL Spark sends (a job costs
0.1-0.2 s however small, so batches are large), returned as Arrow and handed to the
runtime as columns (SourceBatch), keyed by the table's primary key.

Beyond the reference:
- a table without a stored offset is first read as a *snapshot*: key ranges of its
  primary key (or incrementing column), each one partitioned Spark read, up to a
  watermark taken when the snapshot starts; then it is followed incrementally from that
  watermark. The snapshot's position is in the offsets too, so a restart resumes it.
- a row that cannot be converted (a value outside its column's type, a SQLite date that
  does not parse) goes to the source dead letter queue through the errant record reporter
  instead of failing the read or vanishing.
"""

from __future__ import annotations

import collections
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from kctl.api import (
    ConfigDef,
    ConfigValue,
    ConnectError,
    Schema,
    SourceBatch,
    SourceConnector,
    SourceTask,
    Task,
    partition_key,
)
from kctl.connectors.jdbc._catalog import (
    Catalog,
    Column,
    sqlite_affinity_type,
    timestamp_text,
)
from kctl.connectors.jdbc._common import (
    Dialect,
    dialect_for,
    driver_loaded,
    redact_url,
)
from kctl.connectors.jdbc._confluent import confluent_problems
from kctl.connectors.jdbc._source_fetch import Item, _Errant, _Fetching, _finish, _Gone, _Rows
from kctl.connectors.jdbc._source_settings import (
    BULK,
    CONFIG_DEF,
    INCREMENTING,
    OFF_INC,
    OFF_NANOS,
    OFF_SNAPSHOT,
    OFF_TS,
    TABLE_FILTERS,
    TASK_TABLES,
    TIMESTAMP,
    TIMESTAMP_INCREMENTING,
    TS_COLUMN,
    _Settings,
)
from kctl.connectors.jdbc._source_sql import _ddl_name, _one_statement, _Snapshot, _Sql, _Table
from kctl.connectors.jdbc._source_values import TYPES_DOC  # noqa: F401 (the manual's)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

DRIVER_DIR = "/usr/share/java"  # where workers find installed drivers (kctl.runtime.spark)
_MAX_IDLE_S = 1.0
_STORED_CHECK_S = 2.0  # after a start without task_configs(): check the stored ones


def driver_installed(dialect: Dialect, directory: str | None = None) -> bool:
    """Whether the worker will find the dialect's driver jar where it looks by default."""
    return os.path.exists(os.path.join(directory or DRIVER_DIR, dialect.jar))


def _active_spark() -> SparkSession | None:
    """The SparkSession this process already runs, if any (never starts one)."""
    import sys

    if "pyspark.sql" not in sys.modules:
        return None
    try:
        from pyspark.sql import SparkSession

        return SparkSession.getActiveSession()
    except Exception:
        return None


def group_tables(tables: Sequence[str], max_tasks: int) -> list[list[str]]:
    """Contiguous groups of sorted tables, sizes differing by at most one (Kafka Connect's
    ConnectorUtils.groupPartitions): one per task, no more groups than tables."""
    n = min(max(1, max_tasks), len(tables))
    if n == 0:
        return []
    ordered = sorted(tables)
    size, extra = divmod(len(ordered), n)
    out, start = [], 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        out.append(ordered[start:end])
        start = end
    return out


# --- connector ----------------------------------------------------------------------------


class JdbcSourceConnector(SourceConnector):
    """Lists the tables, splits them over tasks, and watches for added and dropped ones."""

    def __init__(self) -> None:
        self._props: dict[str, str] = {}
        self._stop = threading.Event()
        self._monitor: threading.Thread | None = None
        self._catalog: Catalog | None = None
        self._settings: _Settings | None = None
        self._assigned: tuple[str, ...] | None = None
        self._requested: tuple[str, ...] | None = None
        self._started = 0.0
        self._lock = threading.Lock()

    def config(self) -> ConfigDef:
        return CONFIG_DEF

    def task_class(self) -> type[Task]:
        return JdbcSourceTask

    def exactly_once_support(self) -> bool | None:
        # offsets say exactly which rows came before: replaying them gives the same rows
        return True

    def validate(self, props: Mapping[str, Any]) -> list[ConfigValue]:
        """Per-key checks, then what a key alone cannot judge: the columns a mode needs,
        `query` against the table lists, and whether the worker has the driver."""
        values = CONFIG_DEF.validate(props)
        by_name = {v.name: v for v in values}

        def err(key: str, message: str) -> None:
            if key in by_name:
                by_name[key].errors.append(message)

        mode = str(props.get("mode") or "").strip().lower()
        ts_cols = [p.strip() for p in str(props.get("timestamp.column.name") or "").split(",")
                   if p.strip()]
        if mode in (TIMESTAMP, TIMESTAMP_INCREMENTING) and not ts_cols:
            err("timestamp.column.name", f"mode {mode} needs timestamp.column.name")
        query = str(props.get("query") or props.get("query.masked") or "").strip()
        if query:
            for key in ("table.include.list", "table.exclude.list"):
                if str(props.get(key) or "").strip():
                    err(key, f"{key} does not apply when `query` is set (one query, one task)")
            if not str(props.get("topic.prefix") or "").strip():
                err("topic.prefix", "with `query`, topic.prefix is the topic: it cannot be empty")
            if mode in (INCREMENTING, TIMESTAMP_INCREMENTING) and \
                    not str(props.get("incrementing.column.name") or "").strip():
                err("incrementing.column.name",
                    f"mode {mode} with `query` needs incrementing.column.name (a query has no "
                    "primary key to take it from)")
        for key, problem in confluent_problems(props, source=True).items():
            err(key, problem)
        url = props.get("connection.url")
        if url and not by_name["connection.url"].errors:
            dialect = dialect_for(str(url))
            spark = _active_spark()
            loaded = driver_loaded(spark, dialect) if spark is not None else \
                driver_installed(dialect)
            if not loaded:
                err("connection.url", dialect.missing_driver_message())
        return values

    def start(self, props: Mapping[str, str]) -> None:
        self._props = dict(props)
        self._settings = s = _Settings.parse(props)
        self._stop.clear()
        self._started = time.monotonic()
        self._catalog = s.catalog(self._stop)
        if s.query:
            self._catalog.check()  # a wrong password fails the connector here, in one line
            self._catalog.close()
            return
        tables = self._list()
        log.info("JdbcSource reads %d table(s) of %s: %s", len(tables),
                 redact_url(s.url), ", ".join(tables) or "(none yet)")
        self._monitor = threading.Thread(target=self._watch, name="jdbc-source-monitor",
                                         daemon=True)
        self._monitor.start()

    def _list(self) -> list[str]:
        assert self._catalog is not None and self._settings is not None
        return [t for t in self._settings.tables(self._catalog) if self._settings.wanted(t)]

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        s = self._settings
        assert s is not None
        if s.query:
            return [dict(self._props)]
        tables = self._list()
        with self._lock:
            self._assigned = tuple(tables)
            self._requested = None
        self._warn(None if tables else self._no_table_message())
        return [{**self._props, TASK_TABLES: json.dumps(g)}
                for g in group_tables(tables, max_tasks)]

    def _no_table_message(self) -> str:
        """Why no task runs, with what there is to match (a typo shows at once)."""
        s = self._settings
        assert s is not None and self._catalog is not None
        try:
            there = s.tables(self._catalog)
        except Exception:  # the listing that just worked failed now: say less
            there = []
        lists = ", ".join(f"{k}={v}" for k in TABLE_FILTERS if (v := self._props.get(k)))
        shown = ", ".join(there[:20]) + (f" and {len(there) - 20} more" if len(there) > 20
                                         else "")
        return (f"No table of {redact_url(s.url)} matches "
                f"{lists or 'the configured tables'}, so no task runs; tasks start when one "
                f"appears (checked every table.poll.interval.ms). Tables there: "
                f"{shown or '(none)'}")

    def _warn(self, message: str | None) -> None:
        warn = getattr(getattr(self, "context", None), "warn", None)
        if warn is not None:
            warn(message)
        elif message:
            log.warning("%s", message)

    def _watch(self) -> None:
        """Kafka Connect's table monitoring thread: list the tables every
        table.poll.interval.ms and ask for new task configs when the set changed."""
        s = self._settings
        assert s is not None
        while not self._stop.wait(s.table_poll_ms / 1000):
            try:
                tables = tuple(self._list())
            except Exception as e:  # the database may be back at the next look
                log.warning("Listing the tables of %s failed: %s", redact_url(s.url), e)
                continue
            with self._lock:
                if tables == self._requested or tables == self._assigned:
                    continue
                assigned = self._assigned
                if assigned is None and time.monotonic() - self._started < _STORED_CHECK_S:
                    continue  # a new connector: the runtime asks for task configs by itself
                self._requested = tables
            if assigned is None:
                # the runtime restarted the tasks with the configs it had stored (a worker
                # restart): let it compare them with the tables there are now
                log.info("Checking the stored task configs against the tables: %s",
                         ", ".join(tables) or "(none)")
            else:
                log.info("Tables changed (added %s, dropped %s); reconfiguring tasks",
                         sorted(set(tables) - set(assigned)) or "none",
                         sorted(set(assigned) - set(tables)) or "none")
            try:
                self.context.request_task_reconfiguration()
            except Exception as e:
                log.warning("Requesting task reconfiguration failed: %s", e)
                with self._lock:
                    self._requested = None

    def stop(self) -> None:
        self._stop.set()
        m, self._monitor = self._monitor, None
        if m is not None and m is not threading.current_thread():
            m.join(timeout=10)
        if self._catalog is not None:
            self._catalog.close()


# --- task ---------------------------------------------------------------------------------


class JdbcSourceTask(_Sql, _Fetching, SourceTask):
    """Reads its tables in turn, one Spark JDBC job per read, the next read prepared while
    the runtime sends the last one."""

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._tables: list[_Table] = []
        self._items: collections.deque[Item] = collections.deque()
        self._ahead: Future[list[Item]] | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._round = 0
        self._schemas: dict[tuple[pa.Schema, str | None, str], Schema] = {}
        self._clock: Callable[[], float] = time.monotonic
        self.reads = 0  # Spark reads done (tests, metrics)

    # -- lifecycle ------------------------------------------------------------------------

    def start(self, props: Mapping[str, str]) -> None:
        self._stop.clear()
        self.s = s = _Settings.parse(props)
        self.dialect = d = s.dialect
        self._spark: SparkSession = self.context.spark()
        if not driver_loaded(self._spark, d):
            raise ConnectError(d.missing_driver_message())
        self._catalog = s.catalog(self._stop)
        self._catalog.check()
        self._opts = d.spark_options(s.url, s.user, s.password)
        self._opts["fetchsize"] = str(min(s.batch_rows, 10_000))
        if s.session_init:
            self._opts["sessionInitStatement"] = _one_statement(d.name, s.session_init)
        if s.query:
            self._tables = [_Table(None, {"query": s.query}, s.prefix, f"({s.query}) kctl_q",
                                   inc=s.inc_column or None, label="the query")]
        else:
            for name in json.loads(props.get(TASK_TABLES) or "[]"):
                t = self._describe(name)
                if t is not None:
                    self._tables.append(t)
        stored = self.context.offset_storage_reader.offsets([t.partition for t in self._tables])
        for t in self._tables:
            self._resume(t, stored.get(partition_key(t.partition)))
        log.info("JdbcSource task reads %s", ", ".join(t.label for t in self._tables) or
                 "no table")

    def stop(self) -> None:
        self._stop.set()
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        catalog = getattr(self, "_catalog", None)
        if catalog is not None:
            catalog.close()

    def _describe(self, name: str) -> _Table | None:
        """A table's columns and keys, checked against the mode; None when it is gone."""
        columns = self._catalog.columns(name)
        if not columns:
            log.warning("Table %s no longer exists; not reading it", name)
            return None
        return self._described(name, columns)

    def _redescribe(self, t: _Table, columns: list[Column]) -> None:
        """Type `t` by its columns now (they changed while it was read): the key, the
        columns Spark reads as text, SQLite's types. Its offsets stay: an incrementing
        column taken from a primary key that changed is an error, not a new position."""
        assert t.name is not None
        new = self._described(t.name, columns)
        if new.inc != t.inc:
            raise ConnectError(f"Table {t.label} changed its primary key while it was read: "
                               f"its incrementing column would be {new.inc!r}, not {t.inc!r} "
                               "(set incrementing.column.name)")
        t.columns, t.key, t.chunk = new.columns, new.key, new.chunk
        t.custom_schema = new.custom_schema

    def _described(self, name: str, columns: list[Column]) -> _Table:
        s, d = self.s, self.dialect
        names = {c.name for c in columns}
        key = self._catalog.primary_key(name)
        by_name = {c.name: c for c in columns}
        inc = s.inc_column or None
        if s.uses_incrementing and inc is None:
            if len(key) == 1 and by_name[key[0]].integer:
                inc = key[0]
            else:
                raise ConnectError(
                    f"Table {name} has no single-column integer primary key to use as the "
                    f"incrementing column of mode {s.mode}: set incrementing.column.name")
        for col in ([inc] if s.uses_incrementing else []) + \
                (list(s.ts_columns) if s.uses_timestamp else []):
            if col not in names:
                raise ConnectError(f"Table {name} has no column {col!r} (mode {s.mode} reads "
                                   f"it); its columns are {sorted(names)}")
        if s.validate_non_null:
            self._check_non_null(name, by_name, inc)
        chunk = None
        if len(key) == 1 and by_name[key[0]].integer:
            chunk = key[0]
        elif inc is not None and by_name[inc].integer:
            chunk = inc
        custom = ""
        if d.name == "sqlite":
            parts = [f"{_ddl_name(c.name)} {t}" for c in columns
                     if (t := sqlite_affinity_type(c)) is not None]
            if s.uses_timestamp:
                parts.append(f"{_ddl_name(TS_COLUMN)} BIGINT")
            custom = ", ".join(parts)
        else:
            custom = ", ".join(f"{_ddl_name(c.name)} STRING" for c in columns
                               if c.read_as_text)
        return _Table(name, {"table": name}, s.prefix + name, d.table(name), columns, key,
                      inc, chunk, custom, label=name)

    def _check_non_null(self, name: str, by_name: Mapping[str, Column], inc: str | None) -> None:
        """validate.non.null (Confluent's check): rows whose incrementing column, or every
        timestamp column, is null would never be read, so such a table fails the task."""
        s = self.s
        if s.uses_incrementing and inc is not None and by_name[inc].nullable:
            raise ConnectError(
                f"Cannot make incremental queries using incrementing column {inc} on {name} "
                "because this column is nullable (set validate.non.null=false to read it "
                "anyway: rows where it is null are never read)")
        if s.uses_timestamp and all(by_name[c].nullable for c in s.ts_columns):
            raise ConnectError(
                f"Cannot make incremental queries using timestamp columns "
                f"{','.join(s.ts_columns)} on {name} because all of these columns are "
                "nullable (set validate.non.null=false to read it anyway: rows where they "
                "are null are never read)")

    def _resume(self, t: _Table, off: Mapping[str, Any] | None) -> None:
        """Where to start: the stored offset, else a snapshot (or the very start)."""
        s = self.s
        off = off or {}
        if OFF_TS in off and off[OFF_TS] is not None:
            ms, nanos = int(off[OFF_TS]), off.get(OFF_NANOS)
            t.ts = (ms // 1000) * 1_000_000 + int(nanos) // 1000 if nanos is not None \
                else ms * 1000
        if off.get(OFF_INC) is not None:
            t.last_inc = int(off[OFF_INC])
        mid = off.get(OFF_SNAPSHOT)
        if s.mode == BULK:
            self._start_snapshot(t, resume=int(mid) if mid is not None else None)
        elif mid is not None:
            self._start_snapshot(t, resume=int(mid))
        elif not off and s.snapshot and t.chunk is not None and s.ts_initial is None:
            self._start_snapshot(t)
        elif not off and s.ts_initial is not None and s.uses_timestamp:
            t.ts = (self._catalog.now_micros() if s.ts_initial < 0 else s.ts_initial * 1000)
        if t.snapshot is not None or off:
            log.info("%s: %s", t.label, self._position(t))

    def _position(self, t: _Table) -> str:
        if t.snapshot is not None:
            sn = t.snapshot
            where = f"after {sn.key} {sn.lo} up to {sn.hi}" if sn.key else "whole table"
            return f"snapshot ({where})"
        parts = []
        if t.ts is not None:
            parts.append(f"timestamp {timestamp_text(t.ts)}")
        if t.last_inc is not None:
            parts.append(f"incrementing {t.last_inc}")
        return "following from " + (", ".join(parts) or "the start")

    # -- polling --------------------------------------------------------------------------

    def poll(self) -> list[SourceBatch] | None:
        """The next rows, read ahead while the runtime was busy with the last ones.

        A row that failed conversion ends a poll's records; the next poll reports it
        first, so the runtime sees records and rejects in the table's order.
        """
        if not self._items:
            ahead, self._ahead = self._ahead, None
            items = ahead.result() if ahead is not None else self._next_items()
            if not items:
                self._stop.wait(self._idle_wait())
                return []
            if not self._stop.is_set() and self._due():
                self._ahead = self._executor().submit(self._next_items)
            self._items.extend(items)
        items = self._items
        while items and isinstance(items[0], _Errant):
            self._report(items.popleft())  # type: ignore[arg-type]
        out: list[SourceBatch] = []
        while items and not isinstance(items[0], _Errant):
            out.append(items.popleft())  # type: ignore[arg-type]
        return out

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="jdbc-source")
        return self._pool

    def _due(self) -> bool:
        now = self._clock()
        return any(t.next_poll <= now for t in self._tables)

    def _idle_wait(self) -> float:
        """How long an empty poll waits: until a table is due, at most a second so the
        runtime's loop still commits offsets and notices pauses."""
        cap = min(self.s.poll_ms / 1000, self.s.linger_ms / 1000, _MAX_IDLE_S)
        if not self._tables:
            return cap
        return max(0.0, min(min(t.next_poll for t in self._tables) - self._clock(), cap))

    def _next_items(self) -> list[Item]:
        """Read the tables that are due, in turn, until one has rows (a read may find
        none and still leave its table due: an empty key range of a snapshot)."""
        while not self._stop.is_set():
            tables = self._tables[self._round:] + self._tables[:self._round]
            due = [t for t in tables if t.next_poll <= self._clock()]
            if not due:
                return []
            for t in due:
                if self._stop.is_set():
                    return []
                items = self._read(t)
                if items:
                    if t in self._tables:
                        self._round = (self._tables.index(t) + 1) % len(self._tables)
                    return items
        return []

    def _read(self, t: _Table) -> list[Item]:
        """One read of a table; failures are retried on later polls, up to
        connection.attempts times, before they fail the task."""
        try:
            items, more = self._read_once(t)
        except _Gone:
            log.warning("%s no longer exists; not reading it any more", t.label)
            self._tables.remove(t)
            return []
        except ConnectError as e:
            if t.name is not None and not self._stop.is_set() and not self._exists(t):
                log.warning("%s no longer exists; not reading it any more", t.label)
                self._tables.remove(t)
                return []
            t.failures += 1
            retries = self.s.retries  # query.retry.attempts: -1 forever
            if (0 <= retries < t.failures) or self._stop.is_set():
                raise ConnectError(f"Reading {t.label} failed: {e}") from e
            log.warning("Reading %s failed (attempt %d of %s; retrying in %.1f s): %s",
                        t.label, t.failures, "unlimited" if retries < 0 else retries + 1,
                        self.s.backoff_ms / 1000, e)
            t.next_poll = self._clock() + self.s.backoff_ms / 1000
            return []
        t.failures = 0
        t.next_poll = self._clock() + (0 if more else self.s.poll_ms / 1000)
        return items

    def _read_once(self, t: _Table) -> tuple[list[Item], bool]:
        """(items, whether more rows are ready right away)."""
        s = self.s
        if s.mode == BULK and t.snapshot is None:
            self._start_snapshot(t)
        if t.snapshot is not None:
            return self._read_snapshot(t, t.snapshot)
        sql = self._follow_sql(t)
        rows = self._fetch(t, sql)
        full = rows.table.num_rows >= s.batch_rows
        if s.mode == TIMESTAMP and full:
            rows = self._whole_timestamps(t, rows)
        items = self._items_of(t, rows, self._follow_offsets(t, rows))
        if rows.table.num_rows:
            t.ts = rows.micros[-1] if rows.micros else t.ts
            t.last_inc = rows.incs[-1] if rows.incs else t.last_inc
        return items, full

    def _whole_timestamps(self, t: _Table, rows: _Rows) -> _Rows:
        """Timestamp mode reads a limited number of rows ordered by timestamp; rows that
        share the last timestamp may go on past the limit, and the next read asks only
        for later timestamps. So the last timestamp's rows are left for the next read,
        or, when every row has it, all of its rows are read now."""
        first, last = rows.micros[0], rows.micros[-1]
        if first != last:
            cut = rows.micros.index(last)
            return rows.head(cut)
        sql = (f"SELECT {self._select(t)} FROM {t.base} WHERE {self._ts_expr()} = "
               f"{self._ts_lit(last)}")
        return self._fetch(t, sql)

    def _follow_offsets(self, t: _Table, rows: _Rows) -> dict[str, list[Any]]:
        offsets: dict[str, list[Any]] = {}
        if self.s.uses_timestamp:
            offsets[OFF_TS] = [m // 1000 for m in rows.micros]
            offsets[OFF_NANOS] = [(m % 1_000_000) * 1000 for m in rows.micros]
        if self.s.uses_incrementing:
            offsets[OFF_INC] = list(rows.incs)
        return offsets

    def _read_snapshot(self, t: _Table, sn: _Snapshot) -> tuple[list[Item], bool]:
        """One key range of a snapshot, as a partitioned read."""
        s = self.s
        wm = self._watermark_pred(t)
        if sn.key is None:  # no integer key: the whole table at once
            sql = f"SELECT {self._select(t)} FROM {t.base}" + (f" WHERE {wm}" if wm else "")
            rows = self._fetch(t, sql)
            done = True
            keys: list[Any] = [None] * rows.table.num_rows
        else:
            k = self._q(sn.key)
            hi = min(sn.lo + sn.span, sn.hi)
            where = f"{k} > {sn.lo} AND {k} <= {hi}" + (f" AND {wm}" if wm else "")
            parts = min(self._partitions(), max(1, hi - sn.lo))
            rows = self._fetch(t, f"SELECT {self._select(t)} FROM {t.base} WHERE {where}",
                               (sn.key, sn.lo + 1, hi + 1, parts) if parts > 1 else None,
                               sort=sn.key)
            done = hi >= sn.hi
            keys = rows.column_ints(sn.key)
            sn.lo = hi
        n = rows.table.num_rows
        offsets: dict[str, list[Any]] = {}
        if s.uses_timestamp:
            assert t.ts is not None
            offsets[OFF_TS] = [t.ts // 1000] * n
            offsets[OFF_NANOS] = [(t.ts % 1_000_000) * 1000] * n
        if s.uses_incrementing:
            offsets[OFF_INC] = [t.last_inc] * n
        offsets[OFF_SNAPSHOT] = keys
        items = self._items_of(t, rows, offsets)
        if done and items:
            # the last row of the snapshot has the offset of a table being followed (or,
            # in bulk mode, of a snapshot done): a restart does not read it again
            items[-1:] = _finish(items[-1], OFF_SNAPSHOT, s.mode == BULK)
        if done:
            t.snapshot = None
            log.info("%s: snapshot done; %s", t.label, "next one in "
                     f"{s.poll_ms} ms" if s.mode == BULK else self._position(t))
        # bulk: the next snapshot after poll.interval.ms; incremental: follow right away
        return items, not done or s.mode != BULK

    def _partitions(self) -> int:
        if self.s.partitions:
            return self.s.partitions
        try:
            return max(1, int(self._spark.sparkContext.defaultParallelism))
        except Exception:  # Spark Connect has no SparkContext here
            return 2

    def _report(self, e: _Errant) -> None:
        """The runtime's errant record reporter dead-letters the row (errors.tolerance=all)
        or fails the task naming it; without a reporter the task fails naming it."""
        get = getattr(self.context, "errant_record_reporter", None)
        reporter = get() if get is not None else None
        if reporter is None:
            raise e.error
        reporter.report(e.record, e.error)



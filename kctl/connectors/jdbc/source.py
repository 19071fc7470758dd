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
import dataclasses
import datetime as _dt
import decimal
import json
import logging
import math
import os
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
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
    Range,
    Schema,
    SourceBatch,
    SourceConnector,
    SourceRecord,
    SourceTask,
    Task,
    ValidString,
    partition_key,
)
from kctl.api.arrow import arrow_schema_to_connect
from kctl.api.data import STRING_SCHEMA
from kctl.connectors.jdbc._catalog import (
    ARROW_DECIMAL_DIGITS,
    EPOCH,
    SESSION_INIT,
    UTC,
    Catalog,
    Column,
    micros_of,
    sqlite_affinity_type,
    timestamp_text,
)
from kctl.connectors.jdbc._common import (
    Dialect,
    dialect_for,
    driver_loaded,
    one_line,
    redact_url,
)
from kctl.connectors.jdbc._common import (
    connection_config_def as _connection_config_def,
)
from kctl.connectors.jdbc._confluent import (
    CONFLUENT_SOURCE_TABLE_TYPES,
    ISOLATION_MODES,
    QUOTE_NEVER,
    confluent_problems,
    isolation_statement,
    shared_config_def,
    source_refused_def,
)
from kctl.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

BULK, INCREMENTING, TIMESTAMP, TIMESTAMP_INCREMENTING = (
    "bulk", "incrementing", "timestamp", "timestamp+incrementing")
MODES = (BULK, INCREMENTING, TIMESTAMP, TIMESTAMP_INCREMENTING)
NUMERIC_MAPPINGS = ("none", "precision_only", "best_fit", "best_fit_eager_double")
# Confluent's timestamp.granularity: how timestamp columns become record fields
CONNECT_LOGICAL, NANOS_LONG, NANOS_STRING, NANOS_ISO = (
    "connect_logical", "nanos_long", "nanos_string", "nanos_iso_datetime_string")
GRANULARITIES = (CONNECT_LOGICAL, NANOS_LONG, NANOS_STRING, NANOS_ISO)
TASK_TABLES = "tables"  # a task's tables, as a JSON list (Confluent's task config key)
DRIVER_DIR = "/usr/share/java"  # where workers find installed drivers (kctl.runtime.spark)
_MAX_IDLE_S = 1.0
_STORED_CHECK_S = 2.0  # after a start without task_configs(): check the stored ones
TS_COLUMN = "__kctl_ts"  # SQLite: the timestamp as epoch ms, computed by the query itself

# offset keys: Confluent's, plus the position of a snapshot still under way
OFF_INC, OFF_TS, OFF_NANOS, OFF_SNAPSHOT = (
    "incrementing", "timestamp", "timestamp_nanos", "snapshot.key")


class RegexList:
    """Every item of a list must be a valid regular expression."""

    def __call__(self, name: str, value: Any) -> None:
        from kctl.errors import ConfigError

        for item in value or ():
            try:
                re.compile(item)
            except re.error as e:
                raise ConfigError(f"Invalid regular expression {item!r}: {e}", key=name) from e

    def __str__(self) -> str:
        return "list of regular expressions"


MODE_GROUP, TABLES_GROUP, POLL_GROUP = "Mode", "Tables", "Polling"
# the keys that choose the tables, named when none matches
TABLE_FILTERS = ("table.include.list", "table.whitelist", "table.exclude.list",
                 "table.blacklist", "schema.pattern", "catalog.pattern", "table.types")

CONFIG_DEF: ConfigDef = (
    _connection_config_def()
    .define("mode", ConfigType.STRING, validator=ValidString.in_(*MODES),
            importance=Importance.HIGH, group=MODE_GROUP, doc=(
                "How each table is read: bulk (all of it every poll.interval.ms), "
                "incrementing (rows whose incrementing column is above the last one seen), "
                "timestamp (rows whose timestamp is after the last one seen: new and "
                "updated rows) or timestamp+incrementing (both: exact even when rows share "
                "a timestamp)."))
    .define("incrementing.column.name", ConfigType.STRING, "", importance=Importance.MEDIUM,
            group=MODE_GROUP, doc=(
                "The strictly increasing column of incrementing modes; empty: the table's "
                "single-column integer primary key."))
    .define("timestamp.column.name", ConfigType.LIST, [], importance=Importance.MEDIUM,
            group=MODE_GROUP, doc=(
                "The timestamp column(s) of timestamp modes; several: the first that is "
                "not null (COALESCE). Rows whose timestamp is null are never read. "
                "Timestamps without a time zone are taken as UTC."))
    .define("timestamp.initial", ConfigType.LONG, None, importance=Importance.LOW,
            group=MODE_GROUP, doc=(
                "Epoch milliseconds to start timestamp modes from when a table has no "
                "stored offset (-1: now); unset: every row, read first as a snapshot."))
    .define("timestamp.delay.interval.ms", ConfigType.LONG, 0, Range.at_least(0),
            Importance.MEDIUM, group=MODE_GROUP, doc=(
                "Rows are read only once their timestamp is this much older than the "
                "database's clock, so transactions still open when a poll runs are not "
                "skipped when they commit with an earlier timestamp."))
    .define("table.include.list", ConfigType.LIST, [], RegexList(), Importance.MEDIUM,
            group=TABLES_GROUP, doc=(
                "Regular expressions; a table is read when one matches its whole name "
                "(`table`, or `schema.table` outside the default schema). Empty: every "
                "table."))
    .define("table.exclude.list", ConfigType.LIST, [], RegexList(), Importance.MEDIUM,
            group=TABLES_GROUP, doc="Regular expressions of tables never read.")
    .define("query", ConfigType.STRING, "", importance=Importance.MEDIUM, group=TABLES_GROUP,
            doc=("A SELECT to read instead of tables (one task; its rows go to topic.prefix "
                 "as the topic). Incremental modes add their conditions around it."))
    .define("topic.prefix", ConfigType.STRING, importance=Importance.HIGH, group=TABLES_GROUP,
            doc="Prefix of each table's topic (prefix + table name); with `query`, the topic.")
    .define("table.poll.interval.ms", ConfigType.LONG, 60_000, Range.at_least(1),
            Importance.LOW, group=TABLES_GROUP, doc=(
                "How often the connector lists the tables, to add tasks for new tables "
                "and stop reading dropped ones."))
    .define("poll.interval.ms", ConfigType.INT, 5000, Range.at_least(1), Importance.HIGH,
            group=POLL_GROUP, doc="How often each table is read for new rows.")
    .define("batch.max.rows", ConfigType.INT, 100_000, Range.at_least(1), Importance.LOW,
            group=POLL_GROUP, doc=(
                "Most rows per read of a table (one Spark job: a job costs 0.1-0.2 s "
                "however small, so batch big). A snapshot reads key ranges of about this "
                "many rows."))
    .define("numeric.mapping", ConfigType.STRING, "none",
            ValidString.in_(*NUMERIC_MAPPINGS), Importance.LOW, group=POLL_GROUP, doc=(
                "NUMERIC/DECIMAL columns: none (Connect Decimal), precision_only (scale 0 "
                "and precision up to 18 become int8/16/32/64), best_fit (also scale > 0 up "
                "to precision 18 becomes float64), best_fit_eager_double (every scale > 0 "
                "becomes float64)."))
    .define("timestamp.granularity", ConfigType.STRING, CONNECT_LOGICAL,
            ValidString.in_(*GRANULARITIES), Importance.LOW, group=POLL_GROUP, doc=(
                "Timestamp columns as Confluent defines it: connect_logical (Connect's "
                "Timestamp: epoch milliseconds on the wire, microseconds dropped), "
                "nanos_long (int64 epoch nanoseconds: years 1677 to 2262, a row outside "
                "them goes to the dead letter queue), nanos_string (the same as a string, "
                "any year) or nanos_iso_datetime_string (UTC, yyyy-MM-ddTHH:mm:ss.nnnnnnnnn). "
                "The last three keep microseconds."))
    .define("snapshot.initial", ConfigType.BOOLEAN, True, importance=Importance.LOW,
            group=POLL_GROUP, doc=(
                "Incremental modes: a table without a stored offset is first read as a "
                "snapshot (key ranges read in parallel, up to a watermark), then followed "
                "from the watermark; false reads it in timestamp/incrementing order from "
                "the start, as Confluent's connector does."))
    .define("snapshot.partitions", ConfigType.INT, 0, Range.at_least(0), Importance.LOW,
            group=POLL_GROUP, doc=(
                "Spark partitions (parallel JDBC connections) per snapshot read; 0: the "
                "engine's default parallelism."))
    # Confluent's other keys: implemented with its meaning, or refused by _confluent
    .merge(shared_config_def())
    .merge(source_refused_def())
    .define("table.whitelist", ConfigType.LIST, [], importance=Importance.MEDIUM,
            group=TABLES_GROUP, doc=(
                "Legacy form of table.include.list: table names (not patterns), `table` or "
                "`schema.table`. Not with table.blacklist or the include/exclude lists."))
    .define("table.blacklist", ConfigType.LIST, [], importance=Importance.MEDIUM,
            group=TABLES_GROUP, doc=(
                "Legacy form of table.exclude.list: table names never read. Not with "
                "table.whitelist or the include/exclude lists."))
    .define("schema.pattern", ConfigType.STRING, None, importance=Importance.MEDIUM,
            group=TABLES_GROUP, doc=(
                "SQL LIKE pattern (%, _) of the schemas whose tables are listed; unset: every "
                "schema; empty: tables without a schema (none in PostgreSQL). MariaDB and "
                "SQLite: matched against the URL's database (MariaDB) or `main` (SQLite)."))
    .define("catalog.pattern", ConfigType.STRING, None, importance=Importance.MEDIUM,
            group=TABLES_GROUP, doc=(
                "SQL LIKE pattern of the catalog (the database: PostgreSQL and MariaDB read "
                "the URL's database only, so a pattern it does not match lists no table; "
                "SQLite's is `main`); unset: no restriction."))
    .define("table.types", ConfigType.LIST, ["TABLE"], importance=Importance.LOW,
            group=TABLES_GROUP, doc=(
                "Which kinds of tables are listed: TABLE (base tables) and/or VIEW. "
                f"Confluent's others ({', '.join(CONFLUENT_SOURCE_TABLE_TYPES[2:])}) are "
                "refused."))
    .define("validate.non.null", ConfigType.BOOLEAN, True, importance=Importance.LOW,
            group=MODE_GROUP, doc=(
                "A table whose incrementing column is nullable, or whose timestamp columns "
                "are all nullable, fails the task (rows with nulls there would never be "
                "read); false reads it anyway."))
    .define("numeric.precision.mapping", ConfigType.BOOLEAN, False, importance=Importance.LOW,
            group=POLL_GROUP, doc=(
                "Deprecated by Confluent: true means numeric.mapping=precision_only when "
                "numeric.mapping is not set."))
    .define("query.suffix", ConfigType.STRING, "", importance=Importance.LOW,
            group=POLL_GROUP, doc="Text appended to every SELECT that reads rows.")
    .define("query.masked", ConfigType.PASSWORD, None, importance=Importance.MEDIUM,
            group=TABLES_GROUP, doc=(
                "`query`, masked in every answer and log (for a query that holds a "
                "secret). Not with `query`."))
    .define("query.retry.attempts", ConfigType.INT, -1, Range.at_least(-1), Importance.LOW,
            group=POLL_GROUP, doc=(
                "Times a failed read of a table is retried (connection.backoff.ms apart) "
                "before the task fails; -1: forever, as Confluent's default."))
    .define("poll.linger.ms", ConfigType.LONG, 5000, Range.at_least(0), Importance.LOW,
            group=POLL_GROUP, doc=(
                "Longest an empty poll waits for rows before it returns (kctl's own cap is "
                "one second, so the runtime still commits offsets and notices pauses)."))
    .define("table.monitoring.startup.polling.limit.ms", ConfigType.LONG, 10_000,
            Range.at_least(0), Importance.LOW, group=TABLES_GROUP, doc=(
                "How long starting waits for the first list of tables: kctl lists them "
                "before the connector's start returns, so no start waits on a later list."))
    .define("transaction.isolation.mode", ConfigType.STRING, "DEFAULT",
            ValidString.in_(*ISOLATION_MODES), Importance.LOW, group=POLL_GROUP, doc=(
                "Isolation level of the sessions that read: DEFAULT (the database's), "
                "READ_UNCOMMITED, READ_COMMITED, REPEATABLE_READ or SERIALIZABLE "
                "(Confluent's spelling); SQLite takes DEFAULT or SERIALIZABLE."))
)


@dataclass(frozen=True)
class _Settings:
    """The parsed configuration, shared by the connector and its tasks."""

    dialect: Dialect
    url: str
    user: str | None
    password: Any
    attempts: int
    backoff_ms: int
    mode: str
    inc_column: str
    ts_columns: tuple[str, ...]
    ts_initial: int | None
    delay_ms: int
    include: tuple[re.Pattern[str], ...]
    exclude: tuple[re.Pattern[str], ...]
    query: str
    prefix: str
    table_poll_ms: int
    poll_ms: int
    batch_rows: int
    numeric_mapping: str
    granularity: str
    snapshot: bool
    partitions: int
    # Confluent's further keys (kctl.connectors.jdbc._confluent refuses what is not here)
    table_types: tuple[str, ...] = ("TABLE",)
    schema_pattern: str | None = None
    catalog_pattern: str | None = None
    validate_non_null: bool = True
    suffix: str = ""
    retries: int = -1
    linger_ms: int = 5000
    isolation: str = "DEFAULT"

    @classmethod
    def parse(cls, props: Mapping[str, Any]) -> _Settings:
        c = CONFIG_DEF.parse(props)
        problems = confluent_problems(props, source=True)
        if problems:
            key, problem = next(iter(problems.items()))
            raise ConfigError(f"Invalid configuration {key}: {problem}", key=key)
        url = c["connection.url"]
        dialect = dialect_for(url)
        if c["quote.sql.identifiers"].lower() == QUOTE_NEVER:
            dialect = dataclasses.replace(dialect, quoting=False)
        masked = c["query.masked"]
        query = c["query"].strip() or (masked.value().strip() if masked is not None else "")
        mapping = c["numeric.mapping"].lower()
        if "numeric.mapping" not in props and c["numeric.precision.mapping"]:
            mapping = "precision_only"  # Confluent's deprecated spelling of it
        include = [re.escape(n) for n in c["table.whitelist"]] or c["table.include.list"]
        exclude = [re.escape(n) for n in c["table.blacklist"]] or c["table.exclude.list"]
        return cls(
            dialect=dialect, url=url, user=c["connection.user"],
            password=c["connection.password"], attempts=c["connection.attempts"],
            backoff_ms=c["connection.backoff.ms"], mode=c["mode"].lower(),
            inc_column=c["incrementing.column.name"].strip(),
            ts_columns=tuple(c["timestamp.column.name"]), ts_initial=c["timestamp.initial"],
            delay_ms=c["timestamp.delay.interval.ms"],
            include=tuple(re.compile(p) for p in include),
            exclude=tuple(re.compile(p) for p in exclude),
            query=query, prefix=c["topic.prefix"],
            table_poll_ms=c["table.poll.interval.ms"], poll_ms=c["poll.interval.ms"],
            batch_rows=c["batch.max.rows"], numeric_mapping=mapping,
            granularity=c["timestamp.granularity"].lower(),
            snapshot=c["snapshot.initial"], partitions=c["snapshot.partitions"],
            table_types=tuple(t.strip().upper() for t in c["table.types"]) or ("TABLE",),
            schema_pattern=c["schema.pattern"], catalog_pattern=c["catalog.pattern"],
            validate_non_null=c["validate.non.null"], suffix=c["query.suffix"].strip(),
            retries=c["query.retry.attempts"], linger_ms=c["poll.linger.ms"],
            isolation=c["transaction.isolation.mode"].upper())

    @property
    def session_init(self) -> list[str]:
        """Statements every reading session starts with: UTC, the isolation level."""
        out = [SESSION_INIT[self.dialect.name]] if self.dialect.name in SESSION_INIT else []
        iso = isolation_statement(self.dialect.name, self.isolation)
        return out + ([iso] if iso else [])

    def catalog(self, stop: threading.Event | None = None) -> Catalog:
        return Catalog(self.dialect, self.url, self.user, self.password, self.attempts,
                       self.backoff_ms, stop, session_init=self.session_init)

    def tables(self, catalog: Catalog) -> list[str]:
        """The tables table.types, schema.pattern and catalog.pattern let through."""
        return catalog.tables(self.table_types, self.schema_pattern, self.catalog_pattern)

    def wanted(self, table: str) -> bool:
        """Whether the include/exclude lists let `table` through (whole-name matches)."""
        names = {table, table.rsplit(".", 1)[-1]}
        if self.include and not any(p.fullmatch(n) for p in self.include for n in names):
            return False
        return not any(p.fullmatch(n) for p in self.exclude for n in names)

    @property
    def uses_timestamp(self) -> bool:
        return self.mode in (TIMESTAMP, TIMESTAMP_INCREMENTING)

    @property
    def uses_incrementing(self) -> bool:
        return self.mode in (INCREMENTING, TIMESTAMP_INCREMENTING)


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


@dataclass
class _Snapshot:
    """A snapshot under way: rows with `key` in (lo, hi] are still to be read, `span` keys
    per read; key None: the whole table in one read (no integer key to split it by)."""

    key: str | None
    lo: int = 0
    hi: int = 0
    span: int = 1


@dataclass
class _Table:
    """One source partition: a table (or the query) and where reading it has got to."""

    name: str | None  # None: the query
    partition: dict[str, str]
    topic: str
    base: str  # what the SQL reads FROM
    columns: list[Column] = field(default_factory=list)
    key: list[str] = field(default_factory=list)  # primary key columns: the record key
    inc: str | None = None  # incrementing column
    chunk: str | None = None  # integer column a snapshot splits into key ranges
    custom_schema: str = ""  # Spark customSchema (SQLite's types)
    ts: int | None = None  # position: epoch microseconds of the last timestamp read
    last_inc: int | None = None  # position: the last incrementing value read
    snapshot: _Snapshot | None = None
    next_poll: float = 0.0
    failures: int = 0
    label: str = ""

    @property
    def schema_name(self) -> str | None:
        return self.name


@dataclass(slots=True)
class _Errant:
    """A row that could not become a record, reported in its place in the order."""

    record: SourceRecord
    error: DataError


Item = SourceBatch | _Errant


class JdbcSourceTask(SourceTask):
    """Reads its tables in turn, one Spark JDBC job per read, the next read prepared while
    the runtime sends the last one."""

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._tables: list[_Table] = []
        self._items: collections.deque[Item] = collections.deque()
        self._ahead: Future[list[Item]] | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._round = 0
        self._schemas: dict[tuple[pa.Schema, str | None], Schema] = {}
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
        s, d = self.s, self.dialect
        columns = self._catalog.columns(name)
        if not columns:
            log.warning("Table %s no longer exists; not reading it", name)
            return None
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

    # -- SQL ------------------------------------------------------------------------------

    def _q(self, name: str) -> str:
        return self.dialect.quote_identifier(name)

    def _ts_expr(self) -> str:
        """The timestamp as the queries compare it: the column (or the first non-null of
        several); in SQLite, epoch milliseconds whether it is stored as text or a number."""
        cols = [self._q(c) for c in self.s.ts_columns]
        x = cols[0] if len(cols) == 1 else f"COALESCE({', '.join(cols)})"
        if self.dialect.name != "sqlite":
            return x
        return (f"(CASE typeof({x}) WHEN 'integer' THEN {x} "
                f"WHEN 'real' THEN CAST({x} AS INTEGER) "
                f"WHEN 'text' THEN CAST(ROUND((julianday({x}) - 2440587.5) * 86400000.0) "
                f"AS INTEGER) END)")

    def _ts_lit(self, micros: int) -> str:
        if self.dialect.name == "sqlite":
            return str(micros // 1000)
        return f"'{timestamp_text(micros)}'"

    def _select(self, t: _Table) -> str:
        if self.dialect.name == "sqlite" and self.s.uses_timestamp:
            return f"*, {self._ts_expr()} AS {self._q(TS_COLUMN)}"
        return "*"

    def _upper(self) -> int:
        return self._catalog.now_micros() - self.s.delay_ms * 1000

    def _watermark_pred(self, t: _Table) -> str:
        """Rows at or before the position: what a snapshot of an incremental mode reads."""
        mode = self.s.mode
        if mode == BULK:
            return ""
        parts = []
        if mode == INCREMENTING:
            return f"{self._q(t.inc or '')} <= {int(t.last_inc or 0)}"
        ts = self._ts_expr()
        assert t.ts is not None
        if mode == TIMESTAMP:
            parts.append(f"{ts} <= {self._ts_lit(t.ts)}")
        else:
            lit = self._ts_lit(t.ts)
            parts.append(f"({ts} < {lit} OR ({ts} = {lit} AND "
                         f"{self._q(t.inc or '')} <= {int(t.last_inc or 0)}))")
        return " AND ".join(parts)

    def _start_snapshot(self, t: _Table, resume: int | None = None) -> None:
        """Take the watermark (incremental modes; kept when resuming) and the key range."""
        s, c = self.s, self._catalog
        if resume is None and s.mode != BULK:
            if s.mode == INCREMENTING:
                top = c.fetch(f"SELECT MAX({self._q(t.inc or '')}) FROM {t.base}")[0][0]
                if top is None:
                    return  # empty table: follow it from the start
                t.last_inc = int(top)
            else:
                ts = self._ts_expr()
                order = f"{ts} DESC" + (f", {self._q(t.inc or '')} DESC"
                                         if s.mode == TIMESTAMP_INCREMENTING else "")
                cols = ts + (f", {self._q(t.inc or '')}" if s.mode == TIMESTAMP_INCREMENTING
                             else "")
                rows = c.fetch(f"SELECT {cols} FROM {t.base} WHERE {ts} < "
                               f"{self._ts_lit(self._upper())} ORDER BY {order} LIMIT 1")
                if not rows or rows[0][0] is None:
                    return
                t.ts = micros_of(rows[0][0])
                if s.mode == TIMESTAMP_INCREMENTING:
                    t.last_inc = int(rows[0][1])
        if t.chunk is None:
            t.snapshot = _Snapshot(None)
            return
        k = self._q(t.chunk)
        where = self._watermark_pred(t)
        lo, hi, count = c.fetch(f"SELECT MIN({k}), MAX({k}), COUNT(*) FROM {t.base}"
                                + (f" WHERE {where}" if where else ""))[0]
        if count == 0 or lo is None:
            t.snapshot = _Snapshot(t.chunk, 0, 0, 1) if s.mode == BULK else None
            return
        lo, hi, count = int(lo), int(hi), int(count)
        span = max(1, math.ceil((hi - lo + 1) * s.batch_rows / count))
        start = lo - 1 if resume is None else resume
        t.snapshot = _Snapshot(t.chunk, start, hi, span)

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
        ts, inc = self._ts_expr() if s.uses_timestamp else "", self._q(t.inc or "")
        where: list[str] = []
        if s.mode == INCREMENTING:
            if t.last_inc is not None:
                where.append(f"{inc} > {t.last_inc}")
            order = inc
        else:
            upper = self._ts_lit(self._upper())
            where.append(f"{ts} < {upper}")
            if t.ts is not None:
                lit = self._ts_lit(t.ts)
                if s.mode == TIMESTAMP:
                    where.append(f"{ts} > {lit}")
                elif t.last_inc is not None:
                    where.append(f"({ts} > {lit} OR ({ts} = {lit} AND {inc} > {t.last_inc}))")
                else:
                    where.append(f"{ts} >= {lit}")
            order = ts if s.mode == TIMESTAMP else f"{ts}, {inc}"
        cond = f" WHERE {' AND '.join(where)}" if where else ""
        sql = f"SELECT {self._select(t)} FROM {t.base}{cond} ORDER BY {order} " \
              f"LIMIT {s.batch_rows}"
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

    # -- reading and converting -----------------------------------------------------------

    def _load(self, t: _Table, sql: str, partition: tuple[str, int, int, int] | None
              ) -> DataFrame:
        opts = dict(self._opts)
        opts["dbtable"] = f"({sql}) kctl_src"
        if t.custom_schema:
            opts["customSchema"] = t.custom_schema
        if partition is not None:
            col, lo, hi, n = partition
            opts.update(partitionColumn=col, lowerBound=str(lo), upperBound=str(hi),
                        numPartitions=str(n))
        df = self._spark.read.format("jdbc").options(**opts).load()
        return self._shape(df)

    def _shape(self, df: DataFrame) -> DataFrame:
        """Casts Spark does not make by itself: SQLite integers it reads as decimal(20,0),
        and numeric.mapping."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import DecimalType

        mapping, sqlite = self.s.numeric_mapping, self.dialect.name == "sqlite"
        cols, changed = [], False
        for f in df.schema.fields:
            c = F.col(_ddl_name(f.name))
            target = None
            if isinstance(f.dataType, DecimalType):
                p, sc = f.dataType.precision, f.dataType.scale
                if sqlite and (p, sc) == (20, 0):
                    target = "bigint"
                elif sc == 0 and p <= 18 and mapping != "none":
                    target = ("tinyint" if p <= 2 else "smallint" if p <= 4 else
                              "int" if p <= 9 else "bigint")
                elif sc > 0 and ((mapping == "best_fit" and p <= 18)
                                 or mapping == "best_fit_eager_double"):
                    target = "double"
            if target is not None:
                c = c.cast(target).alias(f.name)
                changed = True
            cols.append(c)
        return df.select(*cols) if changed else df

    def _fetch(self, t: _Table, sql: str, partition: tuple[str, int, int, int] | None = None,
               sort: str | None = None) -> _Rows:
        """The rows of `sql` as Arrow, sorted into offset order, with the rows that failed
        conversion set aside. A Spark read that fails is read again through the DB-API
        driver, row by row: rows that convert are kept, the others are reported."""
        if self.s.suffix:
            sql = f"{sql} {self.s.suffix}"  # query.suffix: after the whole SELECT
        self.reads += 1
        df: DataFrame | None = None
        try:
            df = self._load(t, sql, partition)
            table = df.toArrow()
            bad: dict[int, str] = {}
            raw: dict[int, dict[str, Any]] = {}
        except Exception as e:
            if self._stop.is_set():
                raise ConnectError("stopping") from e
            line = self._catalog.scrub(_spark_line(e))
            if t.name is not None and not self._exists(t):
                raise _Gone() from e
            if df is None:  # not even the query's columns: nothing to convert row by row
                raise ConnectError(line) from e
            log.warning("Spark could not read %s (%s); reading it row by row to find the "
                        "rows that do not convert", t.label, line)
            table, bad, raw = self._fetch_rows(df, sql, line)
        return self._prepare(t, table, bad, sort, raw)

    def _exists(self, t: _Table) -> bool:
        try:
            return self._catalog.exists(t.name or "")
        except ConnectError:
            return True  # cannot tell: treat it as a read failure

    def _fetch_rows(self, df: DataFrame, sql: str, spark_error: str
                    ) -> tuple[pa.Table, dict[int, str], dict[int, dict[str, Any]]]:
        """`sql` through DB-API, each value converted to the type Spark would give it."""
        from pyspark.sql.pandas.types import to_arrow_schema

        schema = to_arrow_schema(df.schema, timezone="UTC")
        raw = self._catalog.fetch(sql)
        names = schema.names
        columns: list[list[Any]] = [[] for _ in names]
        bad: dict[int, str] = {}
        for i, row in enumerate(raw):
            for j, (name, v) in enumerate(zip(names, row, strict=False)):
                try:
                    columns[j].append(_coerce(v, schema.field(j).type))
                except Exception as e:
                    columns[j].append(None)
                    bad.setdefault(i, f"column {name!r}: {one_line(e)}")
        arrays = [pa.array(col, type=f.type) for col, f in zip(columns, schema, strict=True)]
        table = pa.Table.from_arrays(arrays, schema=pa.schema(
            [pa.field(f.name, f.type, True) for f in schema]))
        if not bad:
            log.warning("Read through DB-API what Spark could not (%s)", spark_error)
        return table, bad, {i: dict(zip(names, raw[i], strict=False)) for i in bad}

    def _prepare(self, t: _Table, table: pa.Table, bad: dict[int, str],
                 sort: str | None, raw: dict[int, dict[str, Any]]) -> _Rows:
        """Sort into offset order, take out the helper column, convert SQLite's temporal
        text, and note each row's position (timestamp, incrementing value)."""
        s = self.s
        micros: list[int] = []
        incs: list[int] = []
        helpers: dict[str, pa.Array] = {}
        if s.uses_timestamp:
            helpers["ts"] = _micros_column(table, TS_COLUMN if TS_COLUMN in table.column_names
                                           else None, s.ts_columns)
        if s.uses_incrementing and t.inc is not None:
            helpers["inc"] = pc.cast(table.column(t.inc), pa.int64())
        if sort is not None:
            helpers = {"sort": pc.cast(table.column(sort), pa.int64()), **helpers}
        if helpers and table.num_rows > 1:
            keys = [(k, "ascending") for k in (["sort"] if sort else
                                               [k for k in ("ts", "inc") if k in helpers])]
            order = pc.sort_indices(pa.table(helpers), sort_keys=keys)
            if not _is_identity(order):
                table = table.take(order)
                helpers = {k: v.take(order) for k, v in helpers.items()}
                if bad:
                    inverse = {old: new for new, old in enumerate(order.to_pylist())}
                    bad = {inverse[i]: m for i, m in bad.items()}
                    raw = {inverse[i]: r for i, r in raw.items()}
        if "ts" in helpers:
            micros = helpers["ts"].to_pylist()
        if "inc" in helpers:
            incs = helpers["inc"].to_pylist()
        if TS_COLUMN in table.column_names:
            table = table.drop_columns([TS_COLUMN])
        before = table
        if self.dialect.name == "sqlite":
            table = self._sqlite_temporals(t, table, bad)
        else:
            table = _typed(t.columns, table, bad)
        table = _granular(table, self.s.granularity, bad)
        for i in bad:  # the row as it was read, for the dead letter queue
            if i not in raw:
                raw[i] = before.slice(i, 1).to_pylist()[0]
        return _Rows(table, micros, incs, bad, raw)

    def _sqlite_temporals(self, t: _Table, table: pa.Table, bad: dict[int, str]) -> pa.Table:
        """SQLite DATE/DATETIME/TIMESTAMP/TIME columns (read as text) as dates, timestamps
        and times of day."""
        for c in t.columns:
            if not c.sqlite_temporal or c.name not in table.column_names:
                continue
            values = table.column(c.name).to_pylist()
            out: list[Any] = []
            for i, v in enumerate(values):
                try:
                    out.append(None if v is None else _time_of_day(str(v), False)
                               if c.sqlite_time else _sqlite_temporal(v, c.sqlite_date))
                except ValueError as e:
                    out.append(None)
                    bad.setdefault(i, f"column {c.name!r}: {e}")
            typ = (pa.time64("us") if c.sqlite_time else pa.date32() if c.sqlite_date
                   else pa.timestamp("us", tz="UTC"))
            idx = table.column_names.index(c.name)
            table = table.set_column(idx, pa.field(c.name, typ), pa.array(out, type=typ))
        return table

    def _items_of(self, t: _Table, rows: _Rows, offsets: dict[str, list[Any]]) -> list[Item]:
        """Batches of the good rows in order, with an _Errant in the place of each bad one."""
        table, bad = rows.table, rows.bad
        n = table.num_rows
        if n == 0:
            return []
        good = table
        if bad:
            keep = [i for i in range(n) if i not in bad]
            good = table.take(pa.array(keep, type=pa.int64()))
        good = self._strict(t, good)
        values = good.to_struct_array().combine_chunks()
        value_schema = self._connect_schema(good.schema, t.schema_name)
        key_schema, keys = None, None
        if t.key and all(k in good.column_names for k in t.key):
            kt = good.select(t.key)
            keys = kt.to_struct_array().combine_chunks()
            key_schema = self._connect_schema(kt.schema, None)
        out: list[Item] = []
        start = 0  # row index in `table`
        taken = 0  # rows of `good` used
        for b in [*sorted(bad), n]:
            if b > start:
                m = b - start
                out.append(SourceBatch(
                    t.topic, t.partition, value_schema, values.slice(taken, m),
                    {k: v[start:b] for k, v in offsets.items()}, key_schema,
                    keys.slice(taken, m) if keys is not None else None))
                taken += m
            if b < n:
                out.append(self._errant(t, rows, b, {k: v[b] for k, v in offsets.items()}))
            start = b + 1
        return out

    def _strict(self, t: _Table, table: pa.Table) -> pa.Table:
        """Nullability from the table's definition (Spark reports every column nullable),
        without Spark's per-field metadata."""
        nullable = {c.name: c.nullable for c in t.columns}
        fields = []
        for i, f in enumerate(table.schema):
            opt = nullable.get(f.name, True) or table.column(i).null_count > 0
            fields.append(pa.field(f.name, f.type, opt))
        schema = pa.schema(fields)
        if schema.equals(table.schema, check_metadata=True):
            return table
        return pa.Table.from_arrays(table.columns, schema=schema)

    def _connect_schema(self, schema: pa.Schema, name: str | None) -> Schema:
        got = self._schemas.get((schema, name))
        if got is None:
            got = self._schemas[(schema, name)] = arrow_schema_to_connect(schema, name)
        return got

    def _errant(self, t: _Table, rows: _Rows, i: int, offset: dict[str, Any]) -> _Errant:
        raw = rows.raw.get(i) or rows.table.slice(i, 1).to_pylist()[0]
        text = json.dumps(raw, default=str, sort_keys=False)
        err = DataError(f"Row of {t.label} at {json.dumps(offset)} cannot be converted: "
                        f"{rows.bad[i]}")
        return _Errant(SourceRecord(t.topic, None, None, None, STRING_SCHEMA, text,
                                    source_partition=t.partition, source_offset=offset), err)

    def _report(self, e: _Errant) -> None:
        """The runtime's errant record reporter dead-letters the row (errors.tolerance=all)
        or fails the task naming it; without a reporter the task fails naming it."""
        get = getattr(self.context, "errant_record_reporter", None)
        reporter = get() if get is not None else None
        if reporter is None:
            raise e.error
        reporter.report(e.record, e.error)


def _finish(item: Item, key: str, keep_key: bool) -> list[Item]:
    """`item` with its last row's offset without `key` (set to None when `keep_key`)."""
    if isinstance(item, _Errant):
        off = dict(item.record.source_offset)
        off.pop(key, None)
        if keep_key:
            off[key] = None
        return [_Errant(item.record.new_record(source_offset=off), item.error)]
    n = len(item)
    last = {k: v[n - 1:] for k, v in item.offsets.items() if k != key}
    if keep_key:
        last[key] = [None]
    tail = SourceBatch(item.topic, item.source_partition, item.value_schema,
                       item.values.slice(n - 1, 1), last, item.key_schema,
                       item.keys.slice(n - 1, 1) if item.keys is not None else None)
    if n == 1:
        return [tail]
    head = SourceBatch(item.topic, item.source_partition, item.value_schema,
                       item.values.slice(0, n - 1),
                       {k: v[:n - 1] for k, v in item.offsets.items()}, item.key_schema,
                       item.keys.slice(0, n - 1) if item.keys is not None else None)
    return [head, tail]


class _Gone(Exception):
    """The table was dropped."""


@dataclass
class _Rows:
    """Rows of one read in offset order: Arrow values, each row's timestamp (epoch
    microseconds) and incrementing value, and the rows that did not convert (index ->
    why, with those rows as they were read)."""

    table: pa.Table
    micros: list[int]
    incs: list[int]
    bad: dict[int, str]
    raw: dict[int, dict[str, Any]] = field(default_factory=dict)

    def head(self, n: int) -> _Rows:
        return _Rows(self.table.slice(0, n), self.micros[:n], self.incs[:n],
                     {i: m for i, m in self.bad.items() if i < n},
                     {i: r for i, r in self.raw.items() if i < n})

    def column_ints(self, name: str) -> list[Any]:
        return pc.cast(self.table.column(name), pa.int64()).to_pylist()


def _one_statement(dialect: str, statements: list[str]) -> str:
    """Spark runs one sessionInitStatement: PostgreSQL's driver takes several separated by
    `;`; MariaDB's does not (without allowMultiQueries), so there the isolation level is
    set as a variable of the same SET."""
    if len(statements) == 1:
        return statements[0]
    if dialect == "mariadb":
        level = statements[1].rsplit("LEVEL ", 1)[1].replace(" ", "-")
        return f"{statements[0]}, SESSION tx_isolation = '{level}'"
    return "; ".join(statements)


def _ddl_name(name: str) -> str:
    """A column name in Spark's DDL (customSchema): backquoted."""
    return "`" + name.replace("`", "``") + "`"


def _is_identity(order: pa.Array) -> bool:
    n = len(order)
    if n == 0:
        return True
    import numpy as np

    return bool(np.array_equal(order.to_numpy(), np.arange(n)))


def _micros_column(table: pa.Table, computed: str | None, names: Sequence[str]) -> pa.Array:
    """Each row's timestamp as epoch microseconds (int64)."""
    if computed is not None:  # SQLite: epoch milliseconds from the query
        col = pc.cast(table.column(computed), pa.int64())
        return pc.multiply(col, 1000).combine_chunks() if isinstance(col, pa.ChunkedArray) \
            else pc.multiply(col, 1000)
    cols = []
    for n in names:
        c = table.column(n)
        if pa.types.is_timestamp(c.type):
            if c.type.unit != "us":
                c = pc.cast(c, pa.timestamp("us", tz=c.type.tz))
            c = pc.cast(c, pa.int64())
        elif pa.types.is_date(c.type):
            c = pc.multiply(pc.cast(pc.cast(c, pa.date32()), pa.int64()), 86_400_000_000)
        else:
            c = pc.cast(c, pa.int64())
        cols.append(c)
    out = cols[0] if len(cols) == 1 else pc.coalesce(*cols)
    return out.combine_chunks() if isinstance(out, pa.ChunkedArray) else out


_TIME_TEXT = re.compile(r"(-?)(\d+):(\d\d):(\d\d)(?:\.(\d{1,9}))?"
                        r"(?:([+-])(\d\d)(?::?(\d\d))?(?::?(\d\d))?)?")
_DAY_US = 86_400_000_000


def _time_of_day(text: str, zoned: bool) -> int:
    """Microseconds of the day of a time column's text (PostgreSQL `time`/`timetz`, MariaDB
    `time`), in UTC for `timetz`; ValueError for a value that is no time of day (24:00:00,
    MariaDB's durations such as 838:59:59 or -01:00:00)."""
    m = _TIME_TEXT.fullmatch(text.strip())
    if m is None:
        raise ValueError(f"{text!r} is not a time of day")
    neg, h, mi, sec, frac, zsign, zh, zm, zs = m.groups()
    micros = ((int(h) * 60 + int(mi)) * 60 + int(sec)) * 1_000_000
    if frac:
        if frac[6:].strip("0"):
            raise ValueError(f"{text!r} has nanoseconds; Connect's Time holds microseconds")
        micros += int(frac[:6].ljust(6, "0"))
    if neg:
        micros = -micros
    if not 0 <= micros < _DAY_US:
        raise ValueError(f"time {text.strip()!r} is outside a day: Connect's Time holds "
                         "00:00:00 to 23:59:59.999999")
    if zsign and zoned:
        offset = ((int(zh) * 60 + int(zm or 0)) * 60 + int(zs or 0)) * 1_000_000
        micros = (micros - offset if zsign == "+" else micros + offset) % _DAY_US
    return micros


def _typed(columns: Sequence[Column], table: pa.Table, bad: dict[int, str]) -> pa.Table:
    """The columns read as text (Column.read_as_text) as their types: times of day as
    Connect's Time, numerics of a declared precision up to Arrow's 76 digits as exact
    decimals; unconstrained numerics (and wider ones) stay their exact text. A value that
    does not convert is its row's error (the dead letter queue)."""
    for c in columns:
        if not c.read_as_text or c.name not in table.column_names:
            continue
        conv: Callable[[str], Any]
        if c.time_of_day:
            typ: pa.DataType = pa.time64("us")
            zoned = c.with_time_zone
            conv = lambda v, z=zoned: _time_of_day(v, z)  # noqa: E731
        elif c.precision is not None and c.precision <= ARROW_DECIMAL_DIGITS:
            typ, conv = pa.decimal256(c.precision, c.scale or 0), decimal.Decimal
        else:
            continue
        out: list[Any] = []
        for i, v in enumerate(table.column(c.name).to_pylist()):
            try:
                out.append(None if v is None else conv(v))
            except (ValueError, ArithmeticError) as e:
                out.append(None)
                bad.setdefault(i, f"column {c.name!r}: {e}")
        idx = table.column_names.index(c.name)
        table = table.set_column(idx, pa.field(c.name, typ), pa.array(out, type=typ))
    return table


_INT64 = (-(2**63), 2**63 - 1)


def _granular(table: pa.Table, granularity: str, bad: dict[int, str]) -> pa.Table:
    """Timestamp columns as timestamp.granularity asks (Confluent's meanings); a value the
    asked form cannot hold (nanos_long outside 1677..2262) is its row's error."""
    if granularity == CONNECT_LOGICAL:
        return table
    for idx, f in enumerate(table.schema):
        if not pa.types.is_timestamp(f.type):
            continue
        col = table.column(idx)
        micros = pc.cast(pc.cast(col, pa.timestamp("us", tz=f.type.tz)), pa.int64()).to_pylist()
        out: list[Any] = []
        for i, m in enumerate(micros):
            if m is None:
                out.append(None)
            elif granularity == NANOS_LONG:
                n = m * 1000
                if not _INT64[0] <= n <= _INT64[1]:
                    out.append(None)
                    bad.setdefault(i, f"column {f.name!r}: {timestamp_text(m)} has no int64 "
                                      "epoch nanoseconds (timestamp.granularity=nanos_long "
                                      "holds 1677 to 2262)")
                else:
                    out.append(n)
            elif granularity == NANOS_STRING:
                out.append(str(m * 1000))
            else:
                t = EPOCH + _dt.timedelta(microseconds=m)
                out.append(f"{t.year:04d}-{t.month:02d}-{t.day:02d}T{t.hour:02d}:"
                           f"{t.minute:02d}:{t.second:02d}.{t.microsecond:06d}000")
        typ = pa.int64() if granularity == NANOS_LONG else pa.string()
        table = table.set_column(idx, pa.field(f.name, typ, f.nullable), pa.array(out, typ))
    return table


def _sqlite_temporal(v: Any, date_only: bool) -> Any:
    """A SQLite DATE/DATETIME/TIMESTAMP value (epoch ms, as Spark writes them, or ISO
    text) as a date or a UTC datetime; ValueError when it is neither."""
    if v is None:
        return None
    text = str(v).strip()
    if re.fullmatch(r"-?\d+(\.\d+)?", text):
        t = EPOCH + _dt.timedelta(milliseconds=float(text))
    else:
        try:
            t = _dt.datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(f"{text!r} is neither a date/time nor epoch milliseconds") \
                from None
        t = t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)
    return t.date() if date_only else t


def _coerce(v: Any, t: pa.DataType) -> Any:
    """A DB-API value as the Arrow type Spark reads its column as; raises when it does
    not fit (checked by building a one-value array of that type)."""
    if v is None:
        return None
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        if isinstance(v, bytes | bytearray | memoryview):
            v = bytes(v).decode("utf-8")
        elif isinstance(v, dict | list):
            v = json.dumps(v)
        elif not isinstance(v, str):
            v = str(v)
        return v
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        if isinstance(v, str):
            v = v.encode("utf-8")
        return bytes(v)
    if pa.types.is_integer(t) and isinstance(v, str):
        v = int(v)
    if pa.types.is_floating(t) and isinstance(v, str):
        v = float(v)
    if pa.types.is_timestamp(t):
        if isinstance(v, int | float) and not isinstance(v, bool):
            v = EPOCH + _dt.timedelta(milliseconds=v)
        elif isinstance(v, str):
            v = _sqlite_temporal(v, False)
        elif isinstance(v, _dt.datetime) and v.tzinfo is None:
            v = v.replace(tzinfo=UTC)
        elif isinstance(v, _dt.date) and not isinstance(v, _dt.datetime):
            v = _dt.datetime(v.year, v.month, v.day, tzinfo=UTC)
    if pa.types.is_date(t):
        if isinstance(v, _dt.datetime):
            v = v.date()
        elif isinstance(v, str) or (isinstance(v, int | float) and not isinstance(v, bool)):
            v = _sqlite_temporal(v, True)
    pa.array([v], type=t)  # raises when it does not fit
    return v


def _spark_line(e: BaseException) -> str:
    """The root cause of a Spark/JDBC failure in one line (py4j's own first line only says
    which gateway call failed)."""
    java = getattr(e, "java_exception", None)
    if java is not None:
        try:
            root = java
            for _ in range(20):
                cause = root.getCause()
                if cause is None:
                    break
                root = cause
            return one_line(Exception(str(root.toString())))
        except Exception:
            pass
    text = str(e).strip()
    lines = [ln for ln in text.splitlines()
             if ln.strip() and not ln.startswith("An error occurred while calling")]
    return (lines[0].lstrip(": ").strip() if lines else type(e).__name__)[:500]

"""JdbcSource's settings: the modes and offset keys, the ConfigDef (Confluent's keys
included) and `_Settings`, the parsed configuration the connector and its tasks share."""

from __future__ import annotations

import dataclasses
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kctl.api import ConfigDef, ConfigError, ConfigType, Importance, Range, ValidString
from kctl.connectors.jdbc._catalog import SESSION_INIT, Catalog
from kctl.connectors.jdbc._common import Dialect, dialect_for
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

BULK, INCREMENTING, TIMESTAMP, TIMESTAMP_INCREMENTING = (
    "bulk", "incrementing", "timestamp", "timestamp+incrementing")
MODES = (BULK, INCREMENTING, TIMESTAMP, TIMESTAMP_INCREMENTING)
NUMERIC_MAPPINGS = ("none", "precision_only", "best_fit", "best_fit_eager_double")
# Confluent's timestamp.granularity: how timestamp columns become record fields
CONNECT_LOGICAL, NANOS_LONG, NANOS_STRING, NANOS_ISO = (
    "connect_logical", "nanos_long", "nanos_string", "nanos_iso_datetime_string")
GRANULARITIES = (CONNECT_LOGICAL, NANOS_LONG, NANOS_STRING, NANOS_ISO)
TASK_TABLES = "tables"  # a task's tables, as a JSON list (Confluent's task config key)
TS_COLUMN = "__kctl_ts"  # SQLite: the timestamp as epoch ms, computed by the query itself

# offset keys: Confluent's, plus the position of a snapshot still under way
OFF_INC, OFF_TS, OFF_NANOS, OFF_SNAPSHOT = (
    "incrementing", "timestamp", "timestamp_nanos", "snapshot.key")


class RegexList:
    """Every item of a list must be a valid regular expression."""

    def __call__(self, name: str, value: Any) -> None:
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
                "The last three keep microseconds, times of day too (nanoseconds of the day, "
                "or HH:mm:ss.nnnnnnnnn), and say so in schema parameters (kctl.temporal, "
                "kctl.temporal.encoding), so JdbcSink writes timestamp and time columns."))
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

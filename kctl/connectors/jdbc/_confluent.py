"""Confluent's JDBC connector keys: each one kctl does not implement is refused, with why.

A user moving from Confluent's connector brings a config written for it. Every key its
JdbcSourceConnectorConfig and JdbcSinkConfig define (listed in
`kctl/connectors/jdbc/confluent_keys.txt`) is in kctl's ConfigDefs, so none is "unknown";
a key whose value kctl would not honour is an error of `validate` and of create naming the
reason, never silently ignored. Values that mean what kctl does anyway (a default, or
`db.timezone=UTC`) are accepted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kctl.api import ConfigDef, ConfigError, ConfigType, Importance, ValidString
from kctl.connectors.jdbc._common import CONNECTION_GROUP, dialect_for

# Confluent's dialect class names -> kctl's dialects (kctl's own names work too)
DIALECT_NAMES = {"PostgreSqlDatabaseDialect": "postgresql", "MySqlDatabaseDialect": "mariadb",
                 "SqliteDatabaseDialect": "sqlite", "postgresql": "postgresql",
                 "mariadb": "mariadb", "mysql": "mariadb", "sqlite": "sqlite"}
UTC_ZONES = {"utc", "etc/utc", "gmt", "etc/gmt", "z", "zulu", "uct", "universal",
             "etc/universal", "+00:00", "-00:00", "utc+0", "gmt+0", "etc/gmt+0", "etc/gmt-0",
             "etc/gmt0", "gmt0", "greenwich", "etc/greenwich", "etc/uct", "etc/zulu"}
DEFAULT_CREDENTIALS = "io.confluent.connect.jdbc.util.DefaultJdbcCredentialsProvider"
QUOTE_ALWAYS, QUOTE_NEVER = "always", "never"
ISOLATION_MODES = ("DEFAULT", "READ_UNCOMMITED", "READ_COMMITED", "REPEATABLE_READ",
                   "SERIALIZABLE", "SQL_SERVER_SNAPSHOT")
SOURCE_TABLE_TYPES = ("TABLE", "VIEW")  # what kctl's table listing finds
CONFLUENT_SOURCE_TABLE_TYPES = ("TABLE", "VIEW", "SYSTEM TABLE", "GLOBAL TEMPORARY",
                                "LOCAL TEMPORARY", "ALIAS", "SYNONYM")
SINK_TABLE_TYPES = ("TABLE", "PARTITIONED_TABLE", "VIEW")

# key -> (the values kctl accepts, lower case, and why it refuses the others), per side
_REFUSED_SOURCE = {
    "timestamp.columns.mapping": ({""}, (
        "per-table timestamp columns are not supported: kctl reads every table with "
        "timestamp.column.name (run one connector per set of tables that share columns)")),
    "incrementing.column.mapping": ({""}, (
        "per-table incrementing columns are not supported: kctl reads every table with "
        "incrementing.column.name, or each table's single-column integer primary key when "
        "it is empty (run one connector per set of tables that share columns)")),
    "max.buffer.size": ({"0"}, (
        "kctl buffers one read of batch.max.rows rows (and reads the next one ahead): "
        "bound memory with batch.max.rows")),
}
_REFUSED_SINK = {
    "replace.null.with.default": ({"true"}, (
        "kctl's JsonConverter already wrote a field's default for its null (as Kafka's): "
        "to keep nulls set value.converter.replace.null.with.default=false instead")),
    "string.output.value.column.name": ({"record_value"}, (
        "kctl's JdbcSink writes values that are structs; a record with a string value is "
        "that record's error, so there is no column to name")),
    "trim.sensitive.log": ({"false"}, (
        "kctl does not trim database messages: they name the failing row's values in the "
        "task's trace, logs and dead letter queue headers")),
    "timestamp.fields.list": ({""}, (
        "kctl writes Connect Timestamp fields as timestamps and other fields as they are; "
        "convert string or long fields with the TimestampConverter transform")),
}
_REFUSED_BOTH = {
    "jdbc.credentials.provider.class": ({"", DEFAULT_CREDENTIALS.lower()}, (
        "Java credentials providers cannot run in kctl: give connection.user and "
        "connection.password, as ${env:VAR} or ${file:PATH:KEY} placeholders of the "
        "worker's config providers to keep them out of the config")),
    "date.calendar.system": ({"proleptic_gregorian"}, (
        "kctl reads and writes dates in the proleptic Gregorian calendar (java.time, "
        "Spark); LEGACY's Julian dates before 1582-10-15 are not produced")),
}


def _dialect_name(name: str, value: Any) -> None:
    if value and str(value).strip() not in DIALECT_NAMES:
        known = ", ".join(k for k in DIALECT_NAMES if k.endswith("Dialect"))
        raise ConfigError(f"dialect.name {value!r} is not a dialect kctl has (it has {known}; "
                          "empty: from connection.url)", key=name)


def shared_config_def() -> ConfigDef:
    """Keys Confluent's source and sink share (beyond the connection settings)."""
    return (
        ConfigDef()
        .define("dialect.name", ConfigType.STRING, "", _dialect_name, Importance.LOW,
                group=CONNECTION_GROUP, doc=(
                    "Confluent's dialect class (PostgreSqlDatabaseDialect, "
                    "MySqlDatabaseDialect, SqliteDatabaseDialect); empty: from "
                    "connection.url. It must name the URL's database (kctl has one dialect "
                    "per database)."))
        .define("quote.sql.identifiers", ConfigType.STRING, QUOTE_ALWAYS,
                ValidString.in_(QUOTE_ALWAYS, QUOTE_NEVER), Importance.MEDIUM,
                group=CONNECTION_GROUP, doc=(
                    "always: table and column names are quoted in SQL (kept as written, a "
                    "name like SQL stays a name); never: written bare, so the database "
                    "folds their case (PostgreSQL: lower case)."))
        .define("db.timezone", ConfigType.STRING, "UTC", importance=Importance.MEDIUM,
                group=CONNECTION_GROUP, doc=(
                    "The zone of timestamps without a time zone. kctl reads and compares "
                    "them as UTC: other zones are refused."))
        .define("date.calendar.system", ConfigType.STRING, "PROLEPTIC_GREGORIAN",
                importance=Importance.LOW, group=CONNECTION_GROUP, doc=(
                    "PROLEPTIC_GREGORIAN: dates as java.time and Spark read them (kctl's "
                    "only calendar; Confluent's LEGACY Julian/Gregorian hybrid is refused)."))
        .define("jdbc.credentials.provider.class", ConfigType.STRING, DEFAULT_CREDENTIALS,
                importance=Importance.LOW, group=CONNECTION_GROUP, doc=(
                    "Only Confluent's default (connection.user and connection.password); "
                    "use config provider placeholders for secrets."))
    )


def _raw(props: Mapping[str, Any], key: str) -> str | None:
    v = props.get(key)
    if v is None:
        return None
    if isinstance(v, list | tuple):
        return ",".join(map(str, v)).strip()
    return str(v).strip()


def _items(value: str | None) -> list[str]:
    return [p.strip() for p in (value or "").split(",") if p.strip()]


def confluent_problems(props: Mapping[str, Any], *, source: bool) -> dict[str, str]:
    """Confluent keys kctl refuses in `props` (or whose combination it refuses), by key."""
    out: dict[str, str] = {}
    refused = {**_REFUSED_BOTH, **(_REFUSED_SOURCE if source else _REFUSED_SINK)}
    for key, (accepted, why) in refused.items():
        value = _raw(props, key)
        if value is not None and value.lower() not in accepted:
            out[key] = f"{key}={value} is not supported: {why}"
    tz = _raw(props, "db.timezone")
    if tz and tz.lower() not in UTC_ZONES:
        out["db.timezone"] = (f"db.timezone={tz} is not supported: kctl reads and compares "
                              "timestamps without a time zone as UTC (store UTC, or use "
                              "timestamp with time zone columns)")
    dialect, url = _raw(props, "dialect.name"), _raw(props, "connection.url")
    if dialect and url and dialect in DIALECT_NAMES:
        try:
            actual = dialect_for(url).name
        except ConfigError:
            actual = None
        if actual is not None and DIALECT_NAMES[dialect] != actual:
            out["dialect.name"] = (f"dialect.name={dialect} is for {DIALECT_NAMES[dialect]}, "
                                   f"but connection.url is a {actual} URL")
    if source:
        out.update(_source_problems(props, url))
    else:
        bad = [t for t in _items(_raw(props, "table.types"))
               if t.upper().replace(" ", "_") not in SINK_TABLE_TYPES]
        if bad:
            out["table.types"] = (f"table.types {', '.join(bad)}: the sink writes into "
                                  f"{', '.join(SINK_TABLE_TYPES)}")
    return out


def _source_problems(props: Mapping[str, Any], url: str | None) -> dict[str, str]:
    out: dict[str, str] = {}
    legacy = {k: _raw(props, k) for k in ("table.whitelist", "table.blacklist")}
    current = {k: _raw(props, k) for k in ("table.include.list", "table.exclude.list")}
    if legacy["table.whitelist"] and legacy["table.blacklist"]:
        out["table.blacklist"] = "table.whitelist and table.blacklist cannot both be set"
    for k, v in legacy.items():
        if v and any(current.values()):
            out[k] = (f"{k} is the legacy form of table.include.list/table.exclude.list; "
                      "set one or the other, not both")
    if _raw(props, "query") and _raw(props, "query.masked"):
        out["query.masked"] = "query and query.masked cannot both be set"
    if _raw(props, "query.masked"):
        for k in ("table.whitelist", "table.blacklist"):
            if legacy[k]:
                out[k] = f"{k} does not apply when query.masked is set (one query, one task)"
    elif _raw(props, "query"):
        for k in ("table.whitelist", "table.blacklist"):
            if legacy[k]:
                out[k] = f"{k} does not apply when `query` is set (one query, one task)"
    types = _items(_raw(props, "table.types"))
    bad = [t for t in types if t.upper() not in SOURCE_TABLE_TYPES]
    if bad:
        out["table.types"] = (
            f"table.types {', '.join(bad)} is not supported: kctl lists base tables (TABLE) "
            "and views (VIEW); system tables, temporary tables, aliases and synonyms are not "
            "read")
    mode = (_raw(props, "transaction.isolation.mode") or "DEFAULT").upper()
    if mode not in ISOLATION_MODES:
        out["transaction.isolation.mode"] = (f"transaction.isolation.mode must be one of "
                                             f"{', '.join(ISOLATION_MODES)}")
    elif mode == "SQL_SERVER_SNAPSHOT":
        out["transaction.isolation.mode"] = ("SQL_SERVER_SNAPSHOT is SQL Server's; kctl has "
                                             "no SQL Server dialect")
    elif mode not in ("DEFAULT", "SERIALIZABLE") and url and url.startswith("jdbc:sqlite:"):
        out["transaction.isolation.mode"] = (f"{mode} is not SQLite's: SQLite reads are "
                                             "always SERIALIZABLE (use DEFAULT or "
                                             "SERIALIZABLE)")
    return out


def isolation_statement(dialect: str, mode: str) -> str | None:
    """The statement that sets a session's isolation level (None: the database's own)."""
    mode = mode.upper()
    if mode in ("DEFAULT", "") or dialect == "sqlite":
        return None
    level = {"READ_UNCOMMITED": "READ UNCOMMITTED", "READ_COMMITED": "READ COMMITTED",
             "REPEATABLE_READ": "REPEATABLE READ", "SERIALIZABLE": "SERIALIZABLE"}[mode]
    if dialect == "postgresql":
        return f"SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL {level}"
    return f"SET SESSION TRANSACTION ISOLATION LEVEL {level}"


def source_refused_def() -> ConfigDef:
    """Confluent source keys kctl refuses unless they hold their default (see
    `confluent_problems`): defined, so validate answers for them by name."""
    return (
        ConfigDef()
        .define("timestamp.columns.mapping", ConfigType.LIST, [], importance=Importance.LOW,
                group="Mode", doc="Not supported (refused when set): "
                + _REFUSED_SOURCE["timestamp.columns.mapping"][1] + ".")
        .define("incrementing.column.mapping", ConfigType.LIST, [], importance=Importance.LOW,
                group="Mode", doc="Not supported (refused when set): "
                + _REFUSED_SOURCE["incrementing.column.mapping"][1] + ".")
        .define("max.buffer.size", ConfigType.INT, 0, importance=Importance.LOW,
                group="Polling", doc="Only 0 (refused otherwise): "
                + _REFUSED_SOURCE["max.buffer.size"][1] + ".")
    )


def sink_config_def() -> ConfigDef:
    """Confluent sink keys beyond kctl's own: accepted with their meaning, or refused unless
    they hold their default (see `confluent_problems`)."""
    group = "Writes"
    return (
        shared_config_def()
        .define("table.types", ConfigType.LIST, ["TABLE"], importance=Importance.LOW,
                group=group, doc=(
                    "What the sink writes into: TABLE and PARTITIONED_TABLE (base tables, "
                    "partitioned or not) and VIEW (a view the database can insert into); "
                    "a view not listed fails the task, as in Confluent's sink."))
        .define("date.timezone", ConfigType.STRING, "DB_TIMEZONE",
                ValidString.in_("DB_TIMEZONE", "UTC"), Importance.LOW, group=group, doc=(
                    "Zone of Date fields: DB_TIMEZONE (db.timezone, which is UTC) or UTC: "
                    "the same here."))
        .define("mssql.use.merge.holdlock", ConfigType.BOOLEAN, True, importance=Importance.LOW,
                group=group, doc="SQL Server's MERGE hint: kctl has no SQL Server dialect, so "
                                 "no database kctl writes reads it.")
        .define("timestamp.precision.mode", ConfigType.STRING, "microseconds",
                ValidString.in_("microseconds", "nanoseconds"), Importance.LOW, group=group,
                doc="Applies to timestamp.fields.list, which is refused: no effect.")
        .define("timestamp.fields.list", ConfigType.LIST, [], importance=Importance.LOW,
                group=group, doc="Not supported (refused when set): "
                + _REFUSED_SINK["timestamp.fields.list"][1] + ".")
        .define("replace.null.with.default", ConfigType.BOOLEAN, True,
                importance=Importance.LOW, group=group, doc="Only true (refused otherwise): "
                + _REFUSED_SINK["replace.null.with.default"][1] + ".")
        .define("string.output.value.column.name", ConfigType.STRING, "record_value",
                importance=Importance.LOW, group=group,
                doc="Only the default (refused otherwise): "
                + _REFUSED_SINK["string.output.value.column.name"][1] + ".")
        .define("trim.sensitive.log", ConfigType.BOOLEAN, False, importance=Importance.LOW,
                group=group, doc="Only false (refused otherwise): "
                + _REFUSED_SINK["trim.sensitive.log"][1] + ".")
    )

"""Confluent's JDBC configuration, all of it: every key Confluent's JdbcSource and JdbcSink
define (kctl/connectors/jdbc/confluent_keys.txt) is implemented with Confluent's meaning or
refused, by validate and by start, with the reason; none is silently ignored.

The legacy `table.whitelist` was ignored (every table was read) and `table.blacklist` too
(the excluded tables were read); these stories run the connector on SQLite, PostgreSQL and
MariaDB without Spark (the connector lists tables through DB-API).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

import kctl.connectors.jdbc as jdbc_package
from kctl.api import ConnectError
from kctl.connectors.jdbc import JdbcSinkConnector, JdbcSourceConnector
from kctl.connectors.jdbc._confluent import isolation_statement
from kctl.connectors.jdbc._sink_sql import drop_table
from kctl.connectors.jdbc._source_settings import CONFIG_DEF as SOURCE_DEF
from kctl.connectors.jdbc._source_settings import TASK_TABLES, _Settings
from kctl.connectors.jdbc._source_sql import _one_statement
from kctl.connectors.jdbc.sink import CONFIG_DEF as SINK_DEF
from kctl.errors import ConfigError

KEYS_FILE = Path(jdbc_package.__file__).with_name("confluent_keys.txt")


def confluent_keys() -> list[tuple[str, str]]:
    out = []
    for line in KEYS_FILE.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            side, key = line.split()
            out.append((side, key))
    return out


KEYS = confluent_keys()

# key -> the test of this module (or another) that shows Confluent's meaning at work
IMPLEMENTED = {
    "connection.url": "tests/connectors/test_jdbc_source.py",
    "connection.user": "tests/connectors/test_jdbc_source.py",
    "connection.password": "tests/rest/test_secrets.py",
    "connection.attempts": "tests/connectors/test_jdbc_source.py",
    "connection.backoff.ms": "tests/connectors/test_jdbc_source.py",
    "poll.interval.ms": "tests/connectors/test_jdbc_source.py",
    "batch.max.rows": "tests/connectors/test_jdbc_source.py",
    "numeric.mapping": "tests/connectors/test_jdbc_source.py",
    "mode": "tests/connectors/test_jdbc_source.py",
    "incrementing.column.name": "tests/connectors/test_jdbc_source.py",
    "timestamp.column.name": "tests/connectors/test_jdbc_source.py",
    "timestamp.initial": "tests/connectors/test_jdbc_source.py",
    "timestamp.delay.interval.ms": "tests/connectors/test_jdbc_source.py",
    "table.poll.interval.ms": "tests/connectors/test_jdbc_source.py",
    "table.include.list": "tests/connectors/test_jdbc_source.py",
    "table.exclude.list": "tests/connectors/test_jdbc_source.py",
    "query": "tests/connectors/test_jdbc_source.py",
    "topic.prefix": "tests/connectors/test_jdbc_source.py",
    "table.name.format": "tests/connectors/test_jdbc_sink.py",
    "max.retries": "tests/connectors/test_jdbc_sink.py",
    "retry.backoff.ms": "tests/connectors/test_jdbc_sink.py",
    "batch.size": "tests/connectors/test_jdbc_sink.py",
    "delete.enabled": "tests/connectors/test_jdbc_sink.py",
    "auto.create": "tests/connectors/test_jdbc_sink.py",
    "auto.evolve": "tests/connectors/test_jdbc_sink.py",
    "insert.mode": "tests/connectors/test_jdbc_sink.py",
    "pk.fields": "tests/connectors/test_jdbc_sink.py",
    "pk.mode": "tests/connectors/test_jdbc_sink.py",
    "fields.whitelist": "tests/connectors/test_jdbc_sink.py",
    # the keys this change added
    "table.whitelist": "test_legacy_whitelist_and_blacklist_choose_the_tables",
    "table.blacklist": "test_legacy_whitelist_and_blacklist_choose_the_tables",
    "schema.pattern": "test_schema_and_catalog_patterns_narrow_the_listing",
    "catalog.pattern": "test_schema_and_catalog_patterns_narrow_the_listing",
    "table.types": "test_table_types_lists_views_only_when_asked",
    "validate.non.null": "tests/connectors/test_jdbc_source_confluent_reads.py",
    "numeric.precision.mapping": "test_numeric_precision_mapping_is_precision_only",
    "dialect.name": "test_dialect_name_must_name_the_urls_database",
    "quote.sql.identifiers": "test_quote_sql_identifiers_never_writes_names_bare",
    "query.suffix": "tests/connectors/test_jdbc_source_confluent_reads.py",
    "query.masked": "test_query_masked_is_query_and_masked",
    "query.retry.attempts": "tests/connectors/test_jdbc_source_confluent_reads.py",
    "transaction.isolation.mode": "test_transaction_isolation_mode_sets_the_session_level",
    "poll.linger.ms": "test_poll_linger_caps_the_empty_poll_wait",
    "table.monitoring.startup.polling.limit.ms": "test_settings_take_every_accepted_key",
    "db.timezone": "test_db_timezone_utc_is_accepted_and_other_zones_refused",
    "date.timezone": "test_settings_take_every_accepted_key",
    "mssql.use.merge.holdlock": "test_settings_take_every_accepted_key",
    "timestamp.precision.mode": "test_settings_take_every_accepted_key",
    # accepted here with Confluent's values; the values' behaviour is the type mapping's
    "timestamp.granularity": "test_settings_take_every_accepted_key",
}
# key -> a value kctl refuses (the default of each is accepted)
REFUSED = {
    "jdbc.credentials.provider.class": "com.example.VaultCredentialsProvider",
    "max.buffer.size": "500",
    "timestamp.columns.mapping": "orders.*:[updated_at]",
    "incrementing.column.mapping": "orders.*:id",
    "date.calendar.system": "LEGACY",
    "replace.null.with.default": "false",
    "string.output.value.column.name": "payload",
    "trim.sensitive.log": "true",
    "timestamp.fields.list": "created",
}
# keys refused only for some values (as well as implemented for others)
REFUSED_VALUES = {
    "db.timezone": "Europe/Paris",
    "table.types": "SYNONYM",
    "transaction.isolation.mode": "SQL_SERVER_SNAPSHOT",
    "dialect.name": "OracleDatabaseDialect",
}


def base(side: str, url: str = "jdbc:sqlite:/tmp/kctl-never.db") -> dict[str, str]:
    if side == "source":
        return {"connection.url": url, "mode": "bulk", "topic.prefix": "db-"}
    return {"connection.url": url, "topics": "orders"}


def errors(side: str, props: dict[str, str]) -> dict[str, list[str]]:
    connector = JdbcSourceConnector() if side == "source" else JdbcSinkConnector()
    return {v.name: v.errors for v in connector.validate(props) if v.errors}


def test_the_keys_file_lists_both_connectors():
    sides = {side for side, _ in KEYS}
    assert sides == {"source", "sink"}
    assert len(KEYS) >= 60 and len(set(KEYS)) == len(KEYS)
    assert ("source", "table.whitelist") in KEYS and ("sink", "mssql.use.merge.holdlock") in KEYS


@pytest.mark.parametrize("side,key", KEYS, ids=[f"{s}:{k}" for s, k in KEYS])
def test_every_confluent_key_is_implemented_or_refused_with_the_reason(side, key):
    definition = SOURCE_DEF if side == "source" else SINK_DEF
    assert key in definition.keys, f"{side} {key}: not a key of kctl's {side} (unknown)"
    assert definition.keys[key].doc, f"{side} {key}: no documentation"
    assert key in IMPLEMENTED or key in REFUSED, f"{side} {key}: neither implemented nor refused"
    if key in IMPLEMENTED:
        where = IMPLEMENTED[key]
        if where.startswith("tests/"):
            assert Path(__file__).parents[2].joinpath(where).exists(), where
        else:
            assert callable(getattr(sys.modules[__name__], where, None)), where
    bad = REFUSED.get(key) or REFUSED_VALUES.get(key)
    if bad is not None and (side == "source" or key != "transaction.isolation.mode"):
        found = errors(side, {**base(side), key: bad})
        assert key in found, f"{side} {key}={bad}: validate did not refuse it: {found}"
        assert any(len(e) > 40 for e in found[key]), f"no reason given: {found[key]}"
        # and start refuses it too (create fails; nothing is silently ignored)
        with pytest.raises((ConfigError, ConnectError), match=key.replace(".", r"\.")):
            if side == "source":
                _Settings.parse({**base(side), key: bad})
            else:
                JdbcSinkConnector().start({**base(side), key: bad})


def test_settings_take_every_accepted_key():
    """Confluent's defaults, and the accepted values, parse (a config exported from
    Confluent's connector with its defaults written out is accepted as it is)."""
    source = {**base("source"), "table.monitoring.startup.polling.limit.ms": "30000",
              "timestamp.granularity": "connect_logical", "db.timezone": "UTC",
              "date.calendar.system": "PROLEPTIC_GREGORIAN", "max.buffer.size": "0",
              "jdbc.credentials.provider.class":
                  "io.confluent.connect.jdbc.util.DefaultJdbcCredentialsProvider",
              "numeric.precision.mapping": "false", "poll.linger.ms": "5000",
              "query.retry.attempts": "-1", "table.types": "TABLE",
              "transaction.isolation.mode": "DEFAULT", "validate.non.null": "true",
              "quote.sql.identifiers": "always", "dialect.name": "SqliteDatabaseDialect"}
    assert errors("source", source) == {}
    _Settings.parse(source)
    sink = {**base("sink"), "date.timezone": "UTC", "mssql.use.merge.holdlock": "false",
            "timestamp.precision.mode": "nanoseconds", "replace.null.with.default": "true",
            "trim.sensitive.log": "false", "string.output.value.column.name": "record_value",
            "table.types": "TABLE,PARTITIONED_TABLE", "db.timezone": "Etc/UTC"}
    assert errors("sink", sink) == {}
    JdbcSinkConnector().start(sink)


def test_db_timezone_utc_is_accepted_and_other_zones_refused():
    for zone in ("UTC", "Etc/UTC", "GMT", "+00:00"):
        assert "db.timezone" not in errors("source", {**base("source"), "db.timezone": zone})
    found = errors("source", {**base("source"), "db.timezone": "America/New_York"})
    assert "as UTC" in found["db.timezone"][0]


def test_dialect_name_must_name_the_urls_database():
    ok = {**base("source"), "dialect.name": "SqliteDatabaseDialect"}
    assert errors("source", ok) == {}
    wrong = errors("source", {**ok, "dialect.name": "PostgreSqlDatabaseDialect"})
    assert wrong["dialect.name"] == ["dialect.name=PostgreSqlDatabaseDialect is for "
                                     "postgresql, but connection.url is a sqlite URL"]
    other = errors("sink", {**base("sink"), "dialect.name": "OracleDatabaseDialect"})
    assert "PostgreSqlDatabaseDialect" in other["dialect.name"][0]


def test_numeric_precision_mapping_is_precision_only():
    assert _Settings.parse({**base("source"), "numeric.precision.mapping": "true"}
                           ).numeric_mapping == "precision_only"
    # numeric.mapping, when set, wins (as in Confluent's NumericMapping.get)
    assert _Settings.parse({**base("source"), "numeric.precision.mapping": "true",
                            "numeric.mapping": "best_fit"}).numeric_mapping == "best_fit"
    assert _Settings.parse(base("source")).numeric_mapping == "none"


def test_quote_sql_identifiers_never_writes_names_bare():
    never = _Settings.parse({**base("source"), "quote.sql.identifiers": "never"}).dialect
    always = _Settings.parse(base("source")).dialect
    assert never.table("Orders") == "Orders" and always.table("Orders") == '"Orders"'
    # the sink's statements take the dialect the task made (sink.py: start)
    assert drop_table(never, "Orders") == "DROP TABLE IF EXISTS Orders"
    assert drop_table(always, "Orders") == 'DROP TABLE IF EXISTS "Orders"'
    assert errors("sink", {**base("sink"), "quote.sql.identifiers": "sometimes"})


def test_query_masked_is_query_and_masked():
    s = _Settings.parse({**base("source"), "query.masked": "SELECT 1 AS x"})
    assert s.query == "SELECT 1 AS x"
    assert SOURCE_DEF.keys["query.masked"].type.value == "PASSWORD"
    both = errors("source", {**base("source"), "query": "SELECT 1", "query.masked": "SELECT 2"})
    assert "cannot both be set" in both["query.masked"][0]


def test_poll_linger_caps_the_empty_poll_wait():
    assert _Settings.parse({**base("source"), "poll.linger.ms": "200"}).linger_ms == 200


def test_transaction_isolation_mode_sets_the_session_level(postgres_db, mariadb_db):
    assert isolation_statement("sqlite", "SERIALIZABLE") is None
    refused = errors("source", {**base("source"), "transaction.isolation.mode": "READ_COMMITED"})
    assert "always SERIALIZABLE" in refused["transaction.isolation.mode"][0]
    for db, show in ((postgres_db, "SHOW transaction_isolation"),
                     (mariadb_db, "SELECT @@tx_isolation")):
        s = _Settings.parse({**base("source", db.url),
                             "transaction.isolation.mode": "REPEATABLE_READ"})
        catalog = s.catalog()
        try:
            assert catalog.fetch(show)[0][0].lower().replace("-", " ") == "repeatable read"
        finally:
            catalog.close()
        assert "REPEATABLE" in _one_statement(db.server.kind, s.session_init).upper()
    assert _one_statement("mariadb", ["SET time_zone = '+00:00'",
                                      "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"]
                          ) == "SET time_zone = '+00:00', SESSION tx_isolation = 'READ-COMMITTED'"


# --- the connector's tables (no Spark: listing goes through DB-API) -------------------------


class Context:
    """What JdbcSourceConnector asks of the runtime, recorded."""

    def __init__(self) -> None:
        self.warnings: list[str | None] = []

    def request_task_reconfiguration(self) -> None:
        pass

    def raise_error(self, error: BaseException) -> None:
        raise AssertionError(error)

    def warn(self, message: str | None) -> None:
        self.warnings.append(message)


def tables_read(props: dict[str, Any], max_tasks: int = 4) -> tuple[list[str], Context]:
    connector, ctx = JdbcSourceConnector(), Context()
    connector.initialize(ctx)  # type: ignore[arg-type]
    connector.start({k: str(v) for k, v in props.items()})
    try:
        configs = connector.task_configs(max_tasks)
    finally:
        connector.stop()
    return sorted(t for c in configs for t in json.loads(c[TASK_TABLES])), ctx


def test_legacy_whitelist_and_blacklist_choose_the_tables(jdbc_db):
    jdbc_db.execute("CREATE TABLE orders (id INT PRIMARY KEY)",
                    "CREATE TABLE customers (id INT PRIMARY KEY)",
                    "CREATE TABLE secrets (id INT PRIMARY KEY)",
                    "CREATE TABLE orders_archive (id INT PRIMARY KEY)")
    props = base("source", jdbc_db.url)
    assert tables_read(props)[0] == ["customers", "orders", "orders_archive", "secrets"]
    # names, not patterns: `orders` is not `orders_archive`
    assert tables_read({**props, "table.whitelist": "orders, customers"})[0] == \
        ["customers", "orders"]
    assert tables_read({**props, "table.blacklist": "secrets"})[0] == \
        ["customers", "orders", "orders_archive"]
    assert "not both" in errors("source", {**props, "table.whitelist": "orders",
                                           "table.include.list": "orders"})["table.whitelist"][0]
    assert "cannot both be set" in errors("source", {**props, "table.whitelist": "orders",
                                                     "table.blacklist": "x"})["table.blacklist"][0]


def test_a_whitelist_that_matches_nothing_is_a_warning_not_silence(sqlite_db):
    sqlite_db.execute("CREATE TABLE orders (id INT PRIMARY KEY)")
    got, ctx = tables_read({**base("source", sqlite_db.url), "table.whitelist": "order"})
    assert got == []
    assert ctx.warnings and ctx.warnings[-1] is not None
    assert "table.whitelist=order" in ctx.warnings[-1] and "Tables there: orders" in \
        ctx.warnings[-1]
    _, ok = tables_read({**base("source", sqlite_db.url), "table.whitelist": "orders"})
    assert ok.warnings == [None], "a match takes any warning back"


def test_table_types_lists_views_only_when_asked(jdbc_db):
    jdbc_db.execute("CREATE TABLE orders (id INT PRIMARY KEY, v INT)",
                    "CREATE VIEW big_orders AS SELECT id, v FROM orders WHERE v > 10")
    props = base("source", jdbc_db.url)
    assert tables_read(props)[0] == ["orders"]
    assert tables_read({**props, "table.types": "VIEW"})[0] == ["big_orders"]
    assert tables_read({**props, "table.types": "TABLE,VIEW"})[0] == ["big_orders", "orders"]


def test_schema_and_catalog_patterns_narrow_the_listing(postgres_db, sqlite_db):
    postgres_db.execute("CREATE TABLE orders (id INT PRIMARY KEY)", "CREATE SCHEMA sales",
                        "CREATE TABLE sales.leads (id INT PRIMARY KEY)",
                        "CREATE SCHEMA salt", "CREATE TABLE salt.x (id INT PRIMARY KEY)")
    props = base("source", postgres_db.url)
    assert tables_read(props)[0] == ["orders", "sales.leads", "salt.x"]
    assert tables_read({**props, "schema.pattern": "sales"})[0] == ["sales.leads"]
    assert tables_read({**props, "schema.pattern": "sal%"})[0] == ["sales.leads", "salt.x"]
    assert tables_read({**props, "schema.pattern": ""})[0] == []  # no table lacks a schema
    assert tables_read({**props, "catalog.pattern": postgres_db.name})[0] == \
        ["orders", "sales.leads", "salt.x"]
    assert tables_read({**props, "catalog.pattern": "elsewhere"})[0] == []
    sqlite_db.execute("CREATE TABLE t (id INT PRIMARY KEY)")
    assert tables_read({**base("source", sqlite_db.url), "schema.pattern": "main"})[0] == ["t"]
    assert tables_read({**base("source", sqlite_db.url), "schema.pattern": "other"})[0] == []


def test_confluents_class_names_are_aliases():
    from kctl.runtime.plugins import Plugins
    from kctl.runtime.validation import validate_config

    plugins = Plugins([])
    for name, cls in (("io.confluent.connect.jdbc.JdbcSourceConnector", JdbcSourceConnector),
                      ("io.confluent.connect.jdbc.JdbcSinkConnector", JdbcSinkConnector)):
        assert plugins.connector_plugin(name).cls is cls
        side = "source" if cls is JdbcSourceConnector else "sink"
        got = validate_config(plugins, {**base(side), "name": "x", "connector.class": name,
                                        "table.whitelist" if side == "source" else
                                        "fields.whitelist": "a"})
        assert got["error_count"] == 0 and got["warnings"] == [], got["warnings"]

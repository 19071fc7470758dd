"""The SQL JdbcSink runs itself, per dialect: column types, DDL, the statements that move a
batch from its staging table into the target, the offsets table, and how to read a
database's error (a row's fault, a passing condition, or neither).

Every name that comes from records or configuration is quoted by the dialect; values never
appear in SQL text (they travel through Spark into staging, or as bound parameters), so a
topic or field named like SQL stays a name.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kctl.api import ConnectError, Schema, Type
from kctl.api.arrow import PRECISION_PARAM
from kctl.api.data import (
    DATE,
    DECIMAL,
    TIME,
    TIMESTAMP,
    VARIABLE_SCALE_DECIMAL,
    a,
    temporal_encoding,
    temporal_kind,
)
from kctl.connectors.jdbc._common import Dialect, split_table

# a placeholder in statement templates; `prepare` turns it into the driver's own
PARAM = "\x00?\x00"

STAGING_ROW = "kctl_r"  # the row's index in its batch: bisection selects ranges of it
STAGING_DELETE = "kctl_d"  # true for a tombstone's key (delete.enabled)
# true for the last record of its key in the batch (upsert, update): one statement must not
# touch a row twice, so the batch's statements take these; the others stay staged in case
# the last one is rejected and the key's previous record must be written instead
STAGING_WINNER = "kctl_w"


def prepare(dialect: Dialect, sql: str) -> str:
    """The statement text for the driver. psycopg and PyMySQL read `%` as the start of a
    placeholder everywhere, quoted identifiers included, so a `%` in a name is doubled;
    statements always run with a (maybe empty) parameter tuple so the doubling is undone."""
    if dialect.name == "sqlite":
        return sql.replace(PARAM, "?")
    return sql.replace("%", "%%").replace(PARAM, "%s")


# --- types ---------------------------------------------------------------------------------

# The user manual's table of the columns auto.create and auto.evolve make (docs/configuration.md)
TYPES_DOC = """### Column types

The column `auto.create` (and `auto.evolve`) makes for each field:

| field | PostgreSQL | MariaDB | SQLite |
| --- | --- | --- | --- |
| int8, int16, int32, int64 | SMALLINT, SMALLINT, INTEGER, BIGINT | TINYINT, SMALLINT, INT, BIGINT | INTEGER |
| float32, float64 | REAL, DOUBLE PRECISION | FLOAT, DOUBLE | REAL |
| boolean | BOOLEAN | BOOLEAN | INTEGER |
| string, bytes | TEXT, BYTEA | LONGTEXT, LONGBLOB (VARCHAR(256), VARBINARY(256) in a key) | TEXT, BLOB |
| Decimal | NUMERIC | DECIMAL(p,s), p from `connect.decimal.precision` (else 65) | TEXT (exact) |
| `io.debezium.data.VariableScaleDecimal` | NUMERIC (each value keeps its scale) | DECIMAL(65,30) | TEXT (exact) |
| Date | DATE | DATE | DATE |
| Timestamp with `kctl.temporal=timestamp` | TIMESTAMP | DATETIME(6) | TIMESTAMP |
| Timestamp with `kctl.temporal=timestamptz`, or without the parameter (Kafka Connect's) | TIMESTAMP WITH TIME ZONE | DATETIME(6) | TIMESTAMP |
| Time | TIME | TIME(6) | TEXT |
| int64 or string with `kctl.temporal` and `kctl.temporal.encoding` (JdbcSource's `timestamp.granularity` forms) | the column of its `kctl.temporal`, to the microsecond | the same | the same |

A timestamp without a time zone holds the UTC wall clock (every session runs in UTC). A
value the column cannot hold is its record's error (the dead letter queue), never a
rounded value: a decimal wider than its column, a NaN in MariaDB, an encoded timestamp or
time with nanoseconds below the microsecond. The fields' names are the columns' names in
every message, the staging table's included.
"""


class UnsupportedType(ConnectError):
    """A field whose type has no column type here (arrays, maps, nested structs)."""


def _decimal_scale(schema: Schema) -> tuple[int, int | None]:
    params = schema.parameters or {}
    scale = int(params.get("scale", "0"))
    precision = params.get(PRECISION_PARAM)
    return scale, int(precision) if precision is not None else None


def column_type(dialect: Dialect, schema: Schema, *, key: bool = False,
                staging: bool = False, field: str = "") -> str:
    """The column type that holds values of `schema`. Staging columns are wide (the target's
    own type, maybe narrower, then judges each value in the INSERT ... SELECT, where a value
    that does not fit is one row's error instead of the whole Spark write's)."""
    d = dialect.name
    kind = temporal_kind(schema)
    if kind is not None and (schema.name in (TIMESTAMP, TIME) or temporal_encoding(schema)):
        return _temporal_type(d, kind, staging)
    if schema.name == VARIABLE_SCALE_DECIMAL:
        if staging or d == "sqlite":
            return _TEXT[d]  # exact text; SQLite's NUMERIC would keep 15 digits
        # MariaDB's widest: a value with more digits after the point is the row's error
        return "NUMERIC" if d == "postgresql" else "DECIMAL(65,30)"
    if schema.name == DECIMAL:
        scale, precision = _decimal_scale(schema)
        if d == "mariadb" and scale > 30:
            raise UnsupportedType(f"Field {field!r}: MariaDB decimals have at most 30 "
                                  f"digits after the point, the schema has {scale}")
        if staging:
            return _TEXT[d]  # exact text: Spark's decimals stop at 38 digits
        if d == "mariadb":
            p = 65 if precision is None else max(precision, scale, 1)
            return f"DECIMAL({min(p, 65)},{scale})"
        # SQLite's NUMERIC keeps 15 significant digits (a REAL): text keeps them all
        return "NUMERIC" if d == "postgresql" else "TEXT"
    if schema.name == DATE:
        return "DATE"
    if schema.name == TIMESTAMP:
        return {"postgresql": "TIMESTAMP WITH TIME ZONE", "mariadb": "DATETIME(6)"}.get(
            d, "TIMESTAMP")
    if schema.name == TIME:
        if staging:
            return _TEXT[d]  # Spark has no time-of-day type
        return {"postgresql": "TIME", "mariadb": "TIME(6)"}.get(d, "TEXT")
    t = schema.type
    if d == "sqlite":
        if t in (Type.INT8, Type.INT16, Type.INT32, Type.INT64, Type.BOOLEAN):
            return "INTEGER"
        if t in (Type.FLOAT32, Type.FLOAT64):
            return "REAL"
    if t in _TYPES:
        pg, maria, sqlite = _TYPES[t]
        if d == "postgresql":
            return pg
        if d == "sqlite":
            return sqlite
        if key and not staging and t is Type.STRING:
            return "VARCHAR(256)"  # a key column needs a bounded type in MariaDB
        if key and not staging and t is Type.BYTES:
            return "VARBINARY(256)"
        return maria
    raise UnsupportedType(f"Field {field!r} is {a(t.value)}: JdbcSink writes primitive fields, "
                          "decimals, dates and timestamps (flatten nested values first, e.g. "
                          "with a Flatten transform)")


_TEXT = {"postgresql": "TEXT", "mariadb": "LONGTEXT", "sqlite": "TEXT"}


def _temporal_type(d: str, kind: str, staging: bool) -> str:
    """The column for a value whose schema names its source column's kind (`kctl.temporal`):
    `timestamp` keeps no time zone (the UTC wall clock), `timestamptz` is an instant, and
    both keep microseconds. Staging holds instants (COPY's text carries the zone) and times
    as text; the statements convert them in a UTC session."""
    if kind == "time":
        if staging:
            return _TEXT[d]
        return {"postgresql": "TIME", "mariadb": "TIME(6)"}.get(d, "TEXT")
    if staging:
        return {"postgresql": "TIMESTAMP WITH TIME ZONE", "mariadb": "DATETIME(6)"}.get(
            d, "TIMESTAMP")
    if d == "postgresql":
        return "TIMESTAMP" if kind == "timestamp" else "TIMESTAMP WITH TIME ZONE"
    return "DATETIME(6)" if d == "mariadb" else "TIMESTAMP"


def staged_as_text(schema: Schema) -> bool:
    """Decimals and times travel through Spark as their exact text (Spark's decimals stop
    at 38 digits and it has no time of day); the statements read them back as their type."""
    return schema.name in (DECIMAL, TIME, VARIABLE_SCALE_DECIMAL) or (
        temporal_encoding(schema) is not None and temporal_kind(schema) == "time")


def staged_time(schema: Schema) -> bool:
    return schema.name == TIME or (temporal_encoding(schema) is not None
                                   and temporal_kind(schema) == "time")


def staged(dialect: Dialect, column: Column, alias: str = "") -> str:
    """A staged column as the value the target takes: PostgreSQL casts the text explicitly
    (NUMERIC and TIME parse it exactly); MariaDB and SQLite convert on assignment, and
    MariaDB's strict mode refuses a value that does not fit (a row's error)."""
    ref = f"{alias}.{column.staging}" if alias else column.staging
    if dialect.name == "postgresql" and staged_as_text(column.schema):
        return f"CAST({ref} AS {'TIME' if staged_time(column.schema) else 'NUMERIC'})"
    return ref


_TYPES = {  # postgresql, mariadb, sqlite
    Type.INT8: ("SMALLINT", "TINYINT", "INTEGER"),
    Type.INT16: ("SMALLINT", "SMALLINT", "INTEGER"),
    Type.INT32: ("INTEGER", "INT", "INTEGER"),
    Type.INT64: ("BIGINT", "BIGINT", "INTEGER"),
    Type.FLOAT32: ("REAL", "FLOAT", "REAL"),
    Type.FLOAT64: ("DOUBLE PRECISION", "DOUBLE", "REAL"),
    Type.BOOLEAN: ("BOOLEAN", "BOOLEAN", "INTEGER"),
    Type.STRING: ("TEXT", "LONGTEXT", "TEXT"),
    Type.BYTES: ("BYTEA", "LONGBLOB", "BLOB"),
}


# --- statements ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    """One column a batch writes: its name in the target, its type and whether it is part
    of the primary key. `staging` is its name in the staging table (c0, c1, ...)."""

    name: str
    schema: Schema
    key: bool
    staging: str


def create_table(dialect: Dialect, table: str, columns: Sequence[Column]) -> str:
    q = dialect.quote_identifier
    defs = []
    for c in columns:
        not_null = c.key or not (c.schema.optional or c.schema.default is not None)
        defs.append(f"{q(c.name)} {column_type(dialect, c.schema, key=c.key, field=c.name)}"
                    + (" NOT NULL" if not_null else ""))
    keys = [q(c.name) for c in columns if c.key]
    if keys:
        defs.append(f"PRIMARY KEY ({', '.join(keys)})")
    return f"CREATE TABLE {dialect.table(table)} ({', '.join(defs)})"


def add_column(dialect: Dialect, table: str, column: Column) -> str:
    """auto.evolve: a new optional field becomes a nullable column."""
    typ = column_type(dialect, column.schema, field=column.name)
    return (f"ALTER TABLE {dialect.table(table)} ADD COLUMN "
            f"{dialect.quote_identifier(column.name)} {typ}")


def create_staging(dialect: Dialect, staging: str, columns: Sequence[Column]) -> str:
    """Staging has no constraints and wide types; PostgreSQL keeps it out of the WAL."""
    q = dialect.quote_identifier
    flag = "INTEGER" if dialect.name == "sqlite" else "BOOLEAN"
    defs = [f"{STAGING_ROW} BIGINT", f"{STAGING_DELETE} {flag}", f"{STAGING_WINNER} {flag}"] + [
        f"{c.staging} {column_type(dialect, c.schema, key=c.key, staging=True, field=c.name)}"
        for c in columns]
    unlogged = "UNLOGGED " if dialect.name == "postgresql" else ""
    return f"CREATE {unlogged}TABLE {q(staging)} ({', '.join(defs)})"


def staging_index(dialect: Dialect, staging: str) -> str:
    q = dialect.quote_identifier
    return f"CREATE INDEX {q(staging + '_r')} ON {q(staging)} ({STAGING_ROW})"


def claim_lock(dialect: Dialect) -> str | None:
    """Try to take a session lock by name (true when taken); None: the database has none."""
    return {"postgresql": f"SELECT pg_try_advisory_lock(hashtextextended({PARAM}, 0))",
            "mariadb": f"SELECT GET_LOCK({PARAM}, 0)"}.get(dialect.name)


def release_lock(dialect: Dialect) -> str:
    return {"postgresql": f"SELECT pg_advisory_unlock(hashtextextended({PARAM}, 0))",
            "mariadb": f"SELECT RELEASE_LOCK({PARAM})"}[dialect.name]


def staging_tables_query(dialect: Dialect) -> tuple[str, tuple[Any, ...]]:
    """Names of the staging tables in the current schema (PostgreSQL) or database."""
    current = "current_schema()" if dialect.name == "postgresql" else "DATABASE()"
    return (f"SELECT table_name FROM information_schema.tables WHERE table_schema = {current} "
            f"AND table_name LIKE {PARAM}", ("kctl\\_stage\\_%",))


def drop_table(dialect: Dialect, table: str) -> str:
    return f"DROP TABLE IF EXISTS {dialect.quote_identifier(table)}"


def clear_table(dialect: Dialect, table: str) -> str:
    if dialect.name == "sqlite":
        return f"DELETE FROM {dialect.quote_identifier(table)}"
    return f"TRUNCATE TABLE {dialect.quote_identifier(table)}"


def table_columns_query(dialect: Dialect, table: str) -> tuple[str, tuple[Any, ...]]:
    """The column names of a table (none: no such table), as a query with parameters."""
    parts = split_table(table)
    schema, name = (parts[-2] if len(parts) > 1 else None), parts[-1]
    if dialect.name == "sqlite":
        if schema is None:
            return f"SELECT name FROM pragma_table_info({PARAM})", (name,)
        return f"SELECT name FROM pragma_table_info({PARAM}, {PARAM})", (name, schema)
    current = "current_schema()" if dialect.name == "postgresql" else "DATABASE()"
    return (f"SELECT column_name FROM information_schema.columns WHERE table_schema = "
            f"COALESCE({PARAM}, {current}) AND table_name = {PARAM}", (schema, name))


def column_types_query(dialect: Dialect, table: str) -> tuple[str, tuple[Any, ...]]:
    """Each column's name, type, numeric precision and scale and nullability (PostgreSQL
    and MariaDB: SQLite's columns take any value, so auto.evolve never widens there)."""
    parts = split_table(table)
    schema, name = (parts[-2] if len(parts) > 1 else None), parts[-1]
    current = "current_schema()" if dialect.name == "postgresql" else "DATABASE()"
    return (f"SELECT column_name, data_type, numeric_precision, numeric_scale, is_nullable "
            f"FROM information_schema.columns WHERE table_schema = COALESCE({PARAM}, "
            f"{current}) AND table_name = {PARAM}", (schema, name))


def widen_column(dialect: Dialect, table: str, name: str, sql_type: str,
                 nullable: bool) -> str:
    """auto.evolve: a column's type widened in place (MariaDB restates NOT NULL)."""
    q = dialect.quote_identifier
    if dialect.name == "postgresql":
        return f"ALTER TABLE {dialect.table(table)} ALTER COLUMN {q(name)} TYPE {sql_type}"
    return (f"ALTER TABLE {dialect.table(table)} MODIFY COLUMN {q(name)} {sql_type}"
            + ("" if nullable else " NOT NULL"))


def table_is_view_query(dialect: Dialect, table: str) -> tuple[str, tuple[Any, ...]]:
    """One row when the table is a view (table.types decides whether the sink writes it)."""
    parts = split_table(table)
    schema, name = (parts[-2] if len(parts) > 1 else None), parts[-1]
    if dialect.name == "sqlite":
        return f"SELECT 1 FROM sqlite_master WHERE type = 'view' AND name = {PARAM}", (name,)
    current = "current_schema()" if dialect.name == "postgresql" else "DATABASE()"
    return (f"SELECT 1 FROM information_schema.tables WHERE table_schema = "
            f"COALESCE({PARAM}, {current}) AND table_name = {PARAM} AND table_type = 'VIEW'",
            (schema, name))


def _in_range(dialect: Dialect, alias: str = "", winners: bool = True) -> str:
    """Staged rows in a range of STAGING_ROW (bound parameters), the winners only unless
    a single record is written by itself."""
    p = f"{alias}." if alias else ""
    text = f"{p}{STAGING_ROW} >= {PARAM} AND {p}{STAGING_ROW} <= {PARAM}"
    return text + (f" AND {p}{STAGING_WINNER} = {_true(dialect)}" if winners else "")


def insert_statement(dialect: Dialect, table: str, staging: str,
                     columns: Sequence[Column], mode: str, winners: bool = True) -> str | None:
    """The INSERT (insert mode), INSERT ... ON CONFLICT / ON DUPLICATE KEY UPDATE (upsert)
    or UPDATE ... FROM staging (update) for staged rows in a range of STAGING_ROW; None
    when there is nothing to do (an update of a table that has only key columns)."""
    q = dialect.quote_identifier
    target, stage = dialect.table(table), q(staging)
    not_deleted = f"{STAGING_DELETE} = {_false(dialect)}"
    names = ", ".join(q(c.name) for c in columns)
    selected = ", ".join(staged(dialect, c) for c in columns)
    keys = [c for c in columns if c.key]
    values = [c for c in columns if not c.key]
    if mode == "update":
        if not values or not keys:
            return None
        if dialect.name == "mariadb":
            on = " AND ".join(f"t.{q(c.name)} = {staged(dialect, c, 's')}" for c in keys)
            sets = ", ".join(f"t.{q(c.name)} = {staged(dialect, c, 's')}" for c in values)
            return (f"UPDATE {target} AS t JOIN {stage} AS s ON {on} SET {sets} "
                    f"WHERE s.{not_deleted} AND {_in_range(dialect, 's', winners)}")
        sets = ", ".join(f"{q(c.name)} = {staged(dialect, c, 's')}" for c in values)
        on = " AND ".join(f"{target}.{q(c.name)} = {staged(dialect, c, 's')}" for c in keys)
        return (f"UPDATE {target} SET {sets} FROM {stage} AS s "
                f"WHERE {on} AND s.{not_deleted} AND {_in_range(dialect, 's', winners)}")
    sql = (f"INSERT INTO {target} ({names}) SELECT {selected} FROM {stage} "
           f"WHERE {not_deleted} AND {_in_range(dialect, '', winners)}")
    if mode != "upsert" or not keys:
        return sql
    if dialect.name == "mariadb":
        sets = ", ".join(f"{q(c.name)} = VALUES({q(c.name)})" for c in values or keys)
        return f"{sql} ON DUPLICATE KEY UPDATE {sets}"
    conflict = ", ".join(q(c.name) for c in keys)
    if not values:
        return f"{sql} ON CONFLICT ({conflict}) DO NOTHING"
    sets = ", ".join(f"{q(c.name)} = excluded.{q(c.name)}" for c in values)
    return f"{sql} ON CONFLICT ({conflict}) DO UPDATE SET {sets}"


def delete_statement(dialect: Dialect, table: str, staging: str,
                     columns: Sequence[Column], winners: bool = True) -> str:
    """Deletes the rows whose keys came as tombstones in a range of STAGING_ROW."""
    q = dialect.quote_identifier
    keys = [c for c in columns if c.key]
    target = ", ".join(q(c.name) for c in keys)
    selected = ", ".join(staged(dialect, c) for c in keys)
    if len(keys) > 1:
        target = f"({target})"
    return (f"DELETE FROM {dialect.table(table)} WHERE {target} IN (SELECT {selected} FROM "
            f"{q(staging)} WHERE {STAGING_DELETE} = {_true(dialect)} AND {_in_range(dialect, '', winners)})")


def _true(dialect: Dialect) -> str:
    return "1" if dialect.name == "sqlite" else "TRUE"


def _false(dialect: Dialect) -> str:
    return "0" if dialect.name == "sqlite" else "FALSE"


# --- the offsets table (exactly_once) --------------------------------------------------------

OFFSET_COLUMNS = ("connector", "topic", "partition", "next_offset")


def create_offsets_table(dialect: Dialect, table: str) -> str:
    q = dialect.quote_identifier
    text = "VARCHAR(255)" if dialect.name == "mariadb" else "TEXT"
    c, t, p, n = (q(x) for x in OFFSET_COLUMNS)
    return (f"CREATE TABLE IF NOT EXISTS {dialect.table(table)} ({c} {text} NOT NULL, "
            f"{t} {text} NOT NULL, {p} INTEGER NOT NULL, {n} BIGINT NOT NULL, "
            f"PRIMARY KEY ({c}, {t}, {p}))")


def read_offsets(dialect: Dialect, table: str, *, lock: bool = False) -> str:
    """Next offsets of one connector's partitions; `lock` holds their rows to the end of the
    transaction, so two writers of one partition (a zombie task) cannot both commit."""
    q = dialect.quote_identifier
    c, t, p, n = (q(x) for x in OFFSET_COLUMNS)
    sql = (f"SELECT {t}, {p}, {n} FROM {dialect.table(table)} WHERE {c} = {PARAM}")
    return sql + (" FOR UPDATE" if lock and dialect.name != "sqlite" else "")


def upsert_offset(dialect: Dialect, table: str) -> str:
    q = dialect.quote_identifier
    c, t, p, n = (q(x) for x in OFFSET_COLUMNS)
    sql = (f"INSERT INTO {dialect.table(table)} ({c}, {t}, {p}, {n}) "
           f"VALUES ({PARAM}, {PARAM}, {PARAM}, {PARAM})")
    if dialect.name == "mariadb":
        return f"{sql} ON DUPLICATE KEY UPDATE {n} = VALUES({n})"
    return f"{sql} ON CONFLICT ({c}, {t}, {p}) DO UPDATE SET {n} = excluded.{n}"


# --- errors --------------------------------------------------------------------------------

TRANSIENT = "transient"  # retry the batch later: connection, deadlock, serialization
ROW = "row"  # a row's own fault (constraint, value that does not fit): find it, dead-letter it
FATAL = "fatal"  # neither: the task fails with the database's message

_MARIADB_TRANSIENT = {1040, 1053, 1205, 1213, 1927, 2002, 2003, 2006, 2013, 2055}
_MARIADB_ROW = {1048, 1062, 1216, 1217, 1263, 1264, 1265, 1292, 1366, 1406, 1451, 1452,
                1690, 3819, 4025}
_TRANSIENT_STATES = ("08", "40", "53", "57P", "58", "HYT")
_TRANSIENT_JAVA = ("java.net.", "java.io.EOFException", "SQLTransient", "SQLRecoverable",
                   "SQLNonTransientConnectionException", "CommunicationsException")
_TRANSIENT_TEXT = re.compile(r"(?i)connection refused|connection reset|broken pipe|"
                             r"database is locked|SQLITE_BUSY|could not serialize|deadlock|"
                             r"lock wait timeout|server has gone away|lost connection|"
                             r"connection attempt failed|communications link failure|"
                             r"terminating connection|the database system is")
_ROW_TEXT = re.compile(r"(?i)SQLITE_CONSTRAINT|SQLITE_MISMATCH|SQLITE_TOOBIG|"
                       r"violates .*constraint|duplicate (key|entry)|out of range|too long|"
                       r"invalid input syntax|incorrect \w+ value")


def _by_state(state: str | None) -> str | None:
    if not state:
        return None
    if state.startswith(("22", "23")):
        return ROW
    if state.startswith(_TRANSIENT_STATES):
        return TRANSIENT
    return None


def classify(e: BaseException) -> str:
    """TRANSIENT, ROW or FATAL for an error of a DB-API driver or of a Spark JDBC write."""
    mod = type(e).__module__ or ""
    if isinstance(e, sqlite3.Error):
        if isinstance(e, sqlite3.IntegrityError | sqlite3.DataError):
            return ROW
        if isinstance(e, sqlite3.OperationalError) and _TRANSIENT_TEXT.search(str(e)):
            return TRANSIENT
        return FATAL
    if mod.startswith("psycopg"):
        by_state = _by_state(getattr(e, "sqlstate", None))
        if by_state:
            return by_state
        import psycopg

        if isinstance(e, psycopg.InterfaceError) or (
                isinstance(e, psycopg.OperationalError) and not getattr(e, "sqlstate", None)):
            return TRANSIENT
        if isinstance(e, psycopg.IntegrityError | psycopg.DataError):
            return ROW
        return FATAL
    if mod.startswith("pymysql"):
        import pymysql

        code = e.args[0] if e.args and isinstance(e.args[0], int) else None
        if code in _MARIADB_TRANSIENT or isinstance(e, pymysql.err.InterfaceError):
            return TRANSIENT
        if code in _MARIADB_ROW or isinstance(e, pymysql.err.IntegrityError |
                                              pymysql.err.DataError):
            return ROW
        return FATAL
    return _classify_java(e)


def _java_chain(e: BaseException) -> list[tuple[str, str | None, str]]:
    """(class name, SQLState, message) of each Java exception behind a Spark error."""
    out: list[tuple[str, str | None, str]] = []
    j = getattr(e, "_origin", None) or getattr(e, "java_exception", None)
    seen = 0
    while j is not None and seen < 20:
        seen += 1
        try:
            name = str(j.getClass().getName())
            state = None
            next_exc = None
            try:
                state = j.getSQLState()
                next_exc = j.getNextException()
            except Exception:
                pass
            out.append((name, str(state) if state else None, str(j.getMessage() or "")))
            if next_exc is not None:
                nname = str(next_exc.getClass().getName())
                out.append((nname, str(next_exc.getSQLState() or "") or None,
                            str(next_exc.getMessage() or "")))
            j = j.getCause()
        except Exception:
            break
    return out


def _classify_java(e: BaseException) -> str:
    chain = _java_chain(e)
    for _, state, _ in chain:
        by_state = _by_state(state)
        if by_state:
            return by_state
    for name, _, _ in chain:
        if any(t in name for t in _TRANSIENT_JAVA):
            return TRANSIENT
    text = " ".join(m for *_, m in chain) or str(e)
    if _TRANSIENT_TEXT.search(text):
        return TRANSIENT
    if _ROW_TEXT.search(text):
        return ROW
    return FATAL


def db_message(e: BaseException) -> str:
    """The database's own words, on one line (psycopg's DETAIL says which key collided;
    for a Spark write, the deepest SQL exception's message)."""
    chain = [m for *_, m in _java_chain(e) if m]
    if chain:
        text = chain[-1]
    elif type(e).__module__.startswith("pymysql") and len(e.args) > 1:
        text = f"({e.args[0]}) {e.args[1]}"  # not the tuple's repr
    else:
        text = str(e).strip() or type(e).__name__
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return " ".join(lines[:3])[:1000]

"""What JdbcSource asks a database outside Spark: its tables, their columns and primary
keys, its clock, and the bounds of a snapshot.

These are metadata queries of a few rows each; they go through the DB-API driver
(`Dialect.connect`) because a Spark job costs 0.1-0.2 s however small. Each query ends its
transaction at once: an open read transaction would hold SQLite's lock against writers and
keep a PostgreSQL snapshot alive.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kctl.api import ConnectError, Password
from kctl.connectors.jdbc._common import Dialect, one_line, redact_url, split_table

log = logging.getLogger(__name__)

UTC = _dt.UTC
EPOCH = _dt.datetime(1970, 1, 1, tzinfo=UTC)

_INTEGER_TYPES = {
    "postgresql": {"smallint", "integer", "bigint"},
    "mariadb": {"tinyint", "smallint", "mediumint", "int", "integer", "bigint"},
}
_TEMPORAL_SQLITE = ("DATE", "TIME")  # declared types SQLite stores as text or numbers

# Every session reads and compares timestamps in UTC, so a timestamp without a zone means
# the same instant to Spark, to the offsets and to the literals the queries compare with.
SESSION_INIT = {
    "postgresql": "SET TIME ZONE 'UTC'",
    "mariadb": "SET time_zone = '+00:00'",
}


SPARK_DECIMAL_DIGITS = 38  # Spark's DecimalType holds at most this many digits
ARROW_DECIMAL_DIGITS = 76  # Arrow's decimal256
_TIMES = {"time", "time without time zone", "time with time zone"}


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type_name: str  # as the database declares it (lower case)
    nullable: bool
    integer: bool  # an integer type: usable to split a snapshot into key ranges
    precision: int | None = None  # numeric/decimal: declared digits (None: unconstrained)
    scale: int | None = None

    @property
    def numeric(self) -> bool:
        return self.type_name in ("numeric", "decimal")

    @property
    def read_as_text(self) -> bool:
        """Columns Spark would round or misread, so they are read as text and typed here:
        numerics wider than Spark's 38 digits or without a declared precision
        (PostgreSQL's `numeric`: each value has its own scale), and times of day (Spark
        reads them as timestamps on 1970-01-01, to the millisecond)."""
        if self.numeric:
            return self.precision is None or self.precision > SPARK_DECIMAL_DIGITS
        return self.time_of_day or self.bits is not None

    @property
    def bits(self) -> int | None:
        """MariaDB's BIT(n), n > 1: Spark reads it as a string of '0's and '1's of the
        sign-extended value (b'10101010' became 32 characters), as text its signed value."""
        if self.type_name == "bit" and self.precision is not None and self.precision > 1:
            return self.precision
        return None

    @property
    def time_of_day(self) -> bool:
        return self.type_name in _TIMES

    @property
    def with_time_zone(self) -> bool:
        return self.type_name == "time with time zone"

    @property
    def sqlite_temporal(self) -> bool:
        """SQLite keeps DATE/DATETIME/TIMESTAMP values as text or numbers as they came;
        Spark's driver parses them with one fixed pattern, so they are read as strings and
        parsed here instead (a value that does not parse goes to the dead letter queue)."""
        up = self.type_name.upper()
        return any(t in up for t in _TEMPORAL_SQLITE)

    @property
    def sqlite_time(self) -> bool:
        """A time of day (`TIME`): text such as 12:34:56.123456."""
        up = self.type_name.upper()
        return "TIME" in up and "DATE" not in up and "STAMP" not in up

    @property
    def sqlite_date(self) -> bool:
        up = self.type_name.upper()
        return "DATE" in up and "TIME" not in up


def sqlite_affinity_type(c: Column) -> str | None:
    """The Spark type a SQLite column must be read as, when Spark's own guess is wrong
    (BIGINT reads back as decimal(20,0), INTEGER PRIMARY KEY as a 32-bit int, DATETIME as a
    date); None keeps Spark's."""
    up = c.type_name.upper()
    if c.sqlite_temporal:
        return "STRING"
    if "INT" in up:
        return "BIGINT"
    if any(t in up for t in ("REAL", "FLOA", "DOUB")):
        return "DOUBLE"
    if any(t in up for t in ("CHAR", "CLOB", "TEXT")):
        return "STRING"
    return None


def micros_of(value: Any) -> int | None:
    """Epoch microseconds of a timestamp the DB-API driver returned (naive means UTC)."""
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return int(value) * 1000  # SQLite's epoch milliseconds
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        delta = value - EPOCH
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    if isinstance(value, _dt.date):
        return micros_of(_dt.datetime(value.year, value.month, value.day))
    raise ConnectError(f"Not a timestamp: {value!r}")


def timestamp_text(micros: int) -> str:
    """A timestamp literal's text (UTC, to the microsecond)."""
    t = EPOCH + _dt.timedelta(microseconds=micros)
    return t.strftime("%Y-%m-%d %H:%M:%S.%f")


class Catalog:
    """One DB-API connection to the database a connector or task reads, reopened when it
    fails (`connection.attempts` tries, `connection.backoff.ms` apart)."""

    def __init__(self, dialect: Dialect, url: str, user: str | None,
                 password: Password | str | None, attempts: int = 3,
                 backoff_ms: int = 10_000, stop: threading.Event | None = None,
                 session_init: Sequence[str] | None = None) -> None:
        self.dialect = dialect
        self.url = url
        self._user = user
        self._password = password
        self._attempts = max(1, attempts)
        self._backoff = backoff_ms / 1000
        self._stop = stop or threading.Event()
        self._conn: Any = None
        self._lock = threading.RLock()
        # statements a session starts with (UTC; JdbcSource: transaction.isolation.mode)
        self._init = list(session_init) if session_init is not None else \
            [SESSION_INIT[dialect.name]] if dialect.name in SESSION_INIT else []

    # -- connection ---------------------------------------------------------------------

    def _connect(self) -> Any:
        last: ConnectError | None = None
        for attempt in range(1, self._attempts + 1):
            try:
                conn = self.dialect.connect(self.url, self._user, self._password)
                if self._init:
                    cur = conn.cursor()
                    for statement in self._init:
                        cur.execute(statement)
                    conn.commit()
                return conn
            except ConnectError as e:
                last = e
                if _is_auth_failure(str(e)) or attempt == self._attempts:
                    break  # a wrong password will not get right by waiting
                log.warning("%s (attempt %d of %d; retrying in %.1f s)", e, attempt,
                            self._attempts, self._backoff)
                if self._stop.wait(self._backoff):
                    break
        assert last is not None
        raise last

    def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        """Rows of one query, in a transaction that ends right away."""
        return self._run(sql, params)[1]

    def result_names(self, sql: str) -> list[str]:
        """The names of the columns of `sql`'s result, as the driver describes them (give
        it `WHERE 1=0`: the database plans the query and returns no rows)."""
        return self._run(sql, ())[0]

    def _run(self, sql: str, params: Sequence[Any]) -> tuple[list[str], list[tuple]]:
        with self._lock:
            if self._conn is None:
                self._conn = self._connect()
            conn = self._conn
            try:
                cur = conn.cursor()
                if params:
                    cur.execute(sql, tuple(params))
                else:
                    cur.execute(sql)
                described = cur.description
                rows = list(cur.fetchall()) if described else []
                conn.rollback()
                return [str(d[0]) for d in described or ()], rows
            except Exception as e:
                self.close()
                raise ConnectError(f"{redact_url(self.url)}: {self.scrub(one_line(e))}") from e

    def check(self) -> None:
        """Connect now: a wrong password or an unreachable server fails here, in one line."""
        self.fetch("SELECT 1")

    def close(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):  # a broken connection: nothing left to do
                conn.close()

    def scrub(self, text: str) -> str:
        """`text` without the password, whatever a driver chose to echo."""
        pw = self._password.value() if isinstance(self._password, Password) else self._password
        if pw:
            text = text.replace(pw, Password.HIDDEN)
        return redact_url(text)

    @property
    def ph(self) -> str:
        return "?" if self.dialect.name == "sqlite" else "%s"

    # -- metadata -----------------------------------------------------------------------

    def tables(self, types: Sequence[str] = ("TABLE",), schema_pattern: str | None = None,
               catalog_pattern: str | None = None) -> list[str]:
        """Tables of `types` (TABLE, VIEW), sorted: names in the default schema bare,
        others `schema.table`. The patterns are SQL LIKE patterns (JDBC metadata's), None
        for no restriction: the schema (MariaDB: the database, SQLite: `main`) and the
        catalog (the database; the URL's is the only one read)."""
        d, ph = self.dialect.name, self.ph
        kinds = {"TABLE": "BASE TABLE", "VIEW": "VIEW"}
        wanted = [kinds[t] for t in types if t in kinds] or ["BASE TABLE"]
        if d == "sqlite":
            if not _sqlite_like("main", schema_pattern, catalog_pattern):
                return []
            sqlite_kinds = [{"BASE TABLE": "table", "VIEW": "view"}[k] for k in wanted]
            marks = ", ".join("?" for _ in sqlite_kinds)
            rows = self.fetch(f"SELECT name FROM sqlite_master WHERE type IN ({marks}) "
                              "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name",
                              sqlite_kinds)
            return [r[0] for r in rows]
        marks = ", ".join(ph for _ in wanted)
        params: list[Any] = list(wanted)
        if d == "mariadb":
            sql = ("SELECT table_name FROM information_schema.tables WHERE table_schema = "
                   f"DATABASE() AND table_type IN ({marks})")
            for pattern in (schema_pattern, catalog_pattern):
                if pattern is not None:
                    sql += f" AND table_schema LIKE {ph}"
                    params.append(pattern)
            rows = self.fetch(sql + " ORDER BY table_name", params)
            return [r[0] for r in rows]
        sql = ("SELECT table_schema, table_name, table_schema = current_schema() "
               f"FROM information_schema.tables WHERE table_type IN ({marks}) "
               "AND table_schema NOT IN ('pg_catalog', 'information_schema') "
               "AND table_schema NOT LIKE 'pg\\_toast%%'")
        if schema_pattern is not None:
            sql += f" AND table_schema LIKE {ph}"
            params.append(schema_pattern)
        if catalog_pattern is not None:
            sql += f" AND table_catalog LIKE {ph}"
            params.append(catalog_pattern)
        rows = self.fetch(sql + " ORDER BY 1, 2", params)
        return sorted(t if default else f"{s}.{t}" for s, t, default in rows)

    def _schema_and_name(self, table: str) -> tuple[str | None, str]:
        parts = split_table(table)
        return (parts[-2], parts[-1]) if len(parts) > 1 else (None, parts[-1])

    def columns(self, table: str) -> list[Column]:
        """The table's columns in order; empty when it does not exist."""
        d, ph = self.dialect.name, self.ph
        if d == "sqlite":
            rows = self.fetch(f"PRAGMA table_info({self.dialect.table(table)})")
            return [Column(r[1], (r[2] or "").lower(), not r[3] and not r[5],
                           "INT" in (r[2] or "").upper()) for r in rows]
        schema, name = self._schema_and_name(table)
        cols = ("SELECT column_name, data_type, is_nullable = 'YES', numeric_precision, "
                "numeric_scale FROM information_schema.columns WHERE table_schema = ")
        if d == "mariadb":
            rows = self.fetch(f"{cols}DATABASE() AND table_name = {ph} "
                              "ORDER BY ordinal_position", (name,))
        else:
            rows = self.fetch(f"{cols}COALESCE({ph}, current_schema()) AND table_name = {ph} "
                              "ORDER BY ordinal_position", (schema, name))
        ints = _INTEGER_TYPES[d]
        out = []
        for r in rows:
            type_name = str(r[1]).lower()
            numeric = type_name in ("numeric", "decimal", "bit")  # bit: its width
            out.append(Column(r[0], type_name, bool(r[2]), type_name in ints,
                              int(r[3]) if numeric and r[3] is not None else None,
                              int(r[4]) if numeric and r[4] is not None else None))
        return out

    def primary_key(self, table: str) -> list[str]:
        d, ph = self.dialect.name, self.ph
        if d == "sqlite":
            rows = self.fetch(f"PRAGMA table_info({self.dialect.table(table)})")
            return [r[1] for r in sorted((r for r in rows if r[5]), key=lambda r: r[5])]
        schema, name = self._schema_and_name(table)
        if d == "mariadb":
            rows = self.fetch("SELECT column_name FROM information_schema.key_column_usage "
                              f"WHERE table_schema = DATABASE() AND table_name = {ph} "
                              "AND constraint_name = 'PRIMARY' ORDER BY ordinal_position",
                              (name,))
        else:
            rows = self.fetch(
                "SELECT kcu.column_name FROM information_schema.table_constraints tc "
                "JOIN information_schema.key_column_usage kcu ON "
                "kcu.constraint_schema = tc.constraint_schema AND "
                "kcu.constraint_name = tc.constraint_name AND kcu.table_name = tc.table_name "
                "WHERE tc.constraint_type = 'PRIMARY KEY' AND tc.table_schema = "
                f"COALESCE({ph}, current_schema()) AND tc.table_name = {ph} "
                "ORDER BY kcu.ordinal_position", (schema, name))
        return [r[0] for r in rows]

    def exists(self, table: str) -> bool:
        return bool(self.columns(table))

    def now_micros(self) -> int:
        """The database's clock (Confluent compares with the database's time, not ours)."""
        d = self.dialect.name
        if d == "sqlite":  # embedded: the database's clock is this machine's
            return int(time.time() * 1_000_000)
        if d == "mariadb":
            value = self.fetch("SELECT UTC_TIMESTAMP(6)")[0][0]
        else:
            value = self.fetch("SELECT now()")[0][0]
        micros = micros_of(value)
        assert micros is not None
        return micros


def _sqlite_like(name: str, *patterns: str | None) -> bool:
    """SQL LIKE of `name` against each pattern given (case-insensitive, as SQLite's)."""
    import re

    for p in patterns:
        if p is None:
            continue
        rx = "".join(".*" if ch == "%" else "." if ch == "_" else re.escape(ch) for ch in p)
        if not re.fullmatch(rx, name, re.IGNORECASE | re.DOTALL):
            return False
    return True


def _is_auth_failure(text: str) -> bool:
    low = text.lower()
    return "password" in low or "access denied" in low or "authentication" in low

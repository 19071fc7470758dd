"""What the JDBC source and sink share: the connection settings, the dialect a
`connection.url` names, identifier quoting, and the driver checks.

Data moves through Spark's JDBC data source (the worker's session carries the driver
jars, `kctl.runtime.spark.driver_jars`). Statements Spark cannot run for us (DDL, the
per-batch MERGE of an upsert, the transaction that commits a batch with its offsets,
metadata queries) go through the database's Python DB-API driver (sqlite3, psycopg,
PyMySQL), opened from the same URL.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, unquote, urlsplit

from kctl.api import ConfigDef, ConfigError, ConfigType, ConnectError, Importance, Password

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

CONNECTION_GROUP = "Connection"


def connection_config_def() -> ConfigDef:
    """Confluent's connection settings; `connection.password` is a password (masked)."""
    return (
        ConfigDef()
        .define("connection.url", ConfigType.STRING, validator=_valid_url,
                importance=Importance.HIGH, group=CONNECTION_GROUP, doc=(
                    "JDBC URL: jdbc:postgresql://HOST:PORT/DB, jdbc:sqlite:PATH or "
                    "jdbc:mariadb://HOST:PORT/DB (jdbc:mysql:// is read as MariaDB)."))
        .define("connection.user", ConfigType.STRING, None, importance=Importance.HIGH,
                group=CONNECTION_GROUP, doc="Database user (or `user=` in the URL, or its `user:password@`; this key first, "
                    "then `user=`/`password=`, then `user:password@`).")
        .define("connection.password", ConfigType.PASSWORD, None, importance=Importance.HIGH,
                group=CONNECTION_GROUP,
                doc="Database password. Masked in every answer; give it as "
                    "${env:VAR} or ${file:PATH:KEY} to keep it out of the config store.")
        .define("connection.attempts", ConfigType.INT, 3, importance=Importance.LOW,
                group=CONNECTION_GROUP, doc="Attempts to open a connection.")
        .define("connection.backoff.ms", ConfigType.LONG, 10_000, importance=Importance.LOW,
                group=CONNECTION_GROUP, doc="Wait between connection attempts.")
    )


def _valid_url(name: str, value: Any) -> None:
    if value is not None:
        dialect_for(str(value), key=name)


@dataclass(frozen=True)
class ConnectionSpec:
    """Where a URL points, parsed once: what the DB-API driver needs."""

    host: str = ""
    port: int | None = None
    database: str = ""
    params: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Dialect:
    """One database family: its JDBC driver, how it quotes, how Python reaches it."""

    name: str
    schemes: tuple[str, ...]
    driver_class: str
    jar: str
    debian_package: str
    quote: str
    python_module: str
    quoting: bool = True  # quote.sql.identifiers=always (never: names written bare)

    def quote_identifier(self, name: str) -> str:
        """Quoted, with the quote character doubled: a table or column named like SQL
        (`x"; DROP TABLE t; --`) stays a name. Bare with quote.sql.identifiers=never."""
        if not self.quoting:
            return name
        return self.quote + name.replace(self.quote, self.quote * 2) + self.quote

    def table(self, name: str) -> str:
        """`schema.table` or `table`, each part quoted."""
        return ".".join(self.quote_identifier(p) for p in split_table(name))

    def parse(self, url: str) -> ConnectionSpec:
        """Host, port, database and parameters; a `user:password@` before the host counts
        as the `user` and `password` parameters (which win over it)."""
        rest = url.split(":", 2)[2] if url.count(":") >= 2 else ""
        if self.name == "sqlite":
            path, _, query = rest.partition("?")
            return ConnectionSpec(database=path, params=dict(parse_qsl(query)))
        parts = urlsplit(rest if rest.startswith("//") else "//" + rest)
        params = dict(parse_qsl(parts.query))
        user, password = url_login(url)
        if user is not None:
            params.setdefault("user", user)
        if password is not None:
            params.setdefault("password", password)
        return ConnectionSpec(host=parts.hostname or "localhost", port=parts.port,
                              database=unquote(parts.path.lstrip("/")), params=params)

    def connect(self, url: str, user: str | None = None,
                password: str | Password | None = None) -> Any:
        """A DB-API connection (autocommit off) for statements Spark cannot run."""
        spec = self.parse(url)
        if isinstance(password, Password):
            password = password.value()
        user = user or spec.params.get("user")
        password = password if password is not None else spec.params.get("password")
        try:
            if self.name == "sqlite":
                conn = sqlite3.connect(spec.database, timeout=30, isolation_level=None,
                                       check_same_thread=False)
                conn.execute("PRAGMA busy_timeout = 30000")
                return _SqliteTx(conn)
            if self.name == "postgresql":
                import psycopg

                return psycopg.connect(host=spec.host, port=spec.port or 5432,
                                       dbname=spec.database, user=user, password=password,
                                       connect_timeout=10)
            import pymysql

            return pymysql.connect(host=spec.host, port=spec.port or 3306,
                                   database=spec.database or None, user=user or "root",
                                   password=password or "", connect_timeout=10,
                                   autocommit=False)
        except ConnectError:
            raise
        except Exception as e:
            raise ConnectError(f"Cannot connect to {redact_url(url)}: {one_line(e)}") from e

    def spark_options(self, url: str, user: str | None = None,
                      password: str | Password | None = None) -> dict[str, str]:
        """Options for `spark.read/write.format("jdbc")`. The JDBC drivers do not read a
        URL's `user:password@`: it goes without it, the login as options."""
        opts = {"url": spark_url(url), "driver": self.driver_class}
        url_user, url_password = url_login(url)
        user = user or url_user
        if password is None:
            password = url_password
        if user:
            opts["user"] = user
        if password is not None:
            opts["password"] = password.value() if isinstance(password, Password) else password
        return opts

    def missing_driver_message(self) -> str:
        return (f"The {self.name} JDBC driver ({self.driver_class}) is not on the worker's "
                f"Spark classpath: install it (apt-get install {self.debian_package}, which "
                f"puts /usr/share/java/{self.jar} where workers look) or name its jar in the "
                f"worker's spark.jars, then restart the worker")


class _SqliteTx:
    """sqlite3 in autocommit mode with explicit BEGIN, so DDL joins the transaction as in
    PostgreSQL (the module's implicit transactions would commit it early)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self._open = False

    def cursor(self) -> Any:
        if not self._open:
            self._conn.execute("BEGIN")
            self._open = True
        return self._conn.cursor()

    def commit(self) -> None:
        if self._open:
            self._conn.execute("COMMIT")
            self._open = False

    def rollback(self) -> None:
        if self._open:
            self._conn.execute("ROLLBACK")
            self._open = False

    def close(self) -> None:
        self.rollback()
        self._conn.close()

    def __enter__(self) -> _SqliteTx:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.rollback()
        self.close()


DIALECTS = (
    Dialect("postgresql", ("postgresql",), "org.postgresql.Driver", "postgresql.jar",
            "libpostgresql-jdbc-java", '"', "psycopg"),
    Dialect("sqlite", ("sqlite",), "org.sqlite.JDBC", "sqlite-jdbc.jar",
            "libxerial-sqlite-jdbc-java", '"', "sqlite3"),
    Dialect("mariadb", ("mariadb", "mysql"), "org.mariadb.jdbc.Driver",
            "mariadb-java-client.jar", "libmariadb-java", "`", "pymysql"),
)


def dialect_for(url: str, *, key: str = "connection.url") -> Dialect:
    m = re.match(r"jdbc:([a-z0-9]+):", url.strip())
    if not m:
        raise ConfigError(f"Not a JDBC URL: {redact_url(url)!r} (expected jdbc:<database>:...)",
                          key=key)
    for d in DIALECTS:
        if m.group(1) in d.schemes:
            return d
    supported = ", ".join(s for d in DIALECTS for s in d.schemes)
    raise ConfigError(f"Unsupported database {m.group(1)!r} in {key}; kctl's JDBC connectors "
                      f"support {supported}", key=key)


_LOGIN = re.compile(r"^(jdbc:[a-z0-9]+://)([^/?#@\s]*)@")


def url_login(url: str) -> tuple[str | None, str | None]:
    """The `user:password@` of a URL (percent-decoded), each None when absent."""
    m = _LOGIN.match(url.strip())
    if m is None:
        return None, None
    user, colon, password = m.group(2).partition(":")
    return unquote(user) or None, unquote(password) if colon else None


def spark_url(url: str) -> str:
    """The URL as Spark should see it: without a `user:password@` (PostgreSQL's and
    MariaDB's JDBC drivers would read it as the host; `spark_options` passes the login).
    Spark picks its SQL dialect (quoting, types) from the URL's prefix and knows MariaDB
    only as `jdbc:mysql:`, which MariaDB's driver accepts with `permitMysqlScheme`."""
    url = _LOGIN.sub(r"\1", url.strip())
    if url.startswith(("jdbc:mariadb:", "jdbc:mysql:")):
        url = "jdbc:mysql:" + url.split(":", 2)[2]
        if "permitMysqlScheme" not in url:
            url += ("&" if "?" in url else "?") + "permitMysqlScheme"
    return url


def driver_loaded(spark: SparkSession, dialect: Dialect) -> bool:
    """Whether the session's JVM can load the driver class. Under Spark Connect there is no
    JVM here to ask; the first read or write reports a missing driver instead."""
    try:
        jvm = spark.sparkContext._jvm
    except Exception:
        return True
    if jvm is None:
        return True
    try:
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        jvm.java.lang.Class.forName(dialect.driver_class, True, loader)
        return True
    except Exception:
        return False


def split_table(name: str) -> list[str]:
    return [p for p in name.split(".") if p] or [name]


def redact_url(url: str) -> str:
    """A URL with its `password=` parameter and its `user:password@` hidden, for messages
    and logs."""
    url = re.sub(r"(://[^/?#@:\s]*:)[^/?#@\s]+@", r"\1" + Password.HIDDEN + "@", url)
    return re.sub(r"(?i)(password=)[^&;]*", r"\1" + Password.HIDDEN, url)


def one_line(e: BaseException) -> str:
    """The first line of a driver's message (Java traces and psycopg hints run long)."""
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0][:500]

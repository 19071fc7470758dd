"""JdbcSink's DB-API connection: opened on demand, statements run through the dialect, and
each failure read as passing (`Transient`: the batch is tried again) or the task's end."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from typing import Any

from kctl.api import ConnectError
from kctl.connectors.jdbc import _sink_sql as sql
from kctl.connectors.jdbc._catalog import SESSION_INIT
from kctl.connectors.jdbc._common import Dialect, redact_url
from kctl.connectors.jdbc._sink_config import JdbcSinkError
from kctl.connectors.jdbc._sink_sql import prepare


class Transient(Exception):
    """A passing failure (connection, deadlock, serialization): try the batch again."""

    def __init__(self, cause: BaseException):
        super().__init__(message(cause))
        self.cause = cause


def message(e: BaseException) -> str:
    return redact_url(sql.db_message(e))


_AUTH_FAILURE = ("authentication failed", "access denied", "does not exist", "no pg_hba.conf",
                 "unknown database", "role ")


def _unreachable(e: BaseException) -> bool:
    """A connection that failed for a passing reason (not a refused login)."""
    text = str(e).lower()
    return sql.classify(e) == sql.TRANSIENT and not any(t in text for t in _AUTH_FAILURE)


class Session:
    """The task's connection. Closing it ends its session locks, so whatever this task
    holds under them (its staging tables) is forgotten through `on_close`."""

    def __init__(self, dialect: Dialect, url: str, user: str | None, password: Any,
                 backoff_s: float) -> None:
        self.dialect = dialect
        self.url = url
        self.user = user
        self.password = password
        self.backoff_s = backoff_s
        self.conn: Any = None
        self.on_close: list[Callable[[], None]] = []

    def connect(self, attempts: int = 1) -> Any:
        """The DB-API connection. Opening it fails the task for a wrong login or a missing
        database; an unreachable server is retried `attempts` times, then (writes pass 1)
        is a passing failure the batch retries with backoff."""
        if self.conn is not None:
            return self.conn
        cause: BaseException | None = None
        for attempt in range(attempts):
            if attempt:
                time.sleep(self.backoff_s)
            try:
                self.conn = self.dialect.connect(self.url, self.user, self.password)
                if self.dialect.name in SESSION_INIT:
                    # a timestamp written to a column without a zone is its UTC wall
                    # clock (Confluent's db.timezone=UTC), whatever the server's zone
                    self.ddl(SESSION_INIT[self.dialect.name])
                return self.conn
            except ConnectError as e:
                cause = e.__cause__ or e
                if not _unreachable(cause):
                    break
        assert cause is not None
        if attempts == 1 and _unreachable(cause):
            raise Transient(cause)
        raise JdbcSinkError(f"Cannot connect to {redact_url(self.url)}: "
                            f"{message(cause)}") from None

    def close(self) -> None:
        """Close the connection; its session locks go with it, so another task may sweep
        this task's staging tables: they are made again on the next write."""
        for forget in self.on_close:
            forget()
        conn, self.conn = self.conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def run(self, cur: Any, statement: str, params: Sequence[Any] = ()) -> None:
        cur.execute(prepare(self.dialect, statement), tuple(params))

    def ddl(self, *statements: str) -> None:
        """Statements in their own transaction (MariaDB commits DDL by itself anyway)."""
        conn = self.connect()
        try:
            cur = conn.cursor()
            for s in statements:
                self.run(cur, s)
            conn.commit()
        except Exception as e:
            self.rollback(conn)
            if sql.classify(e) == sql.TRANSIENT:
                raise Transient(e) from None
            raise JdbcSinkError(f"{statements[-1].split('(')[0].strip()} failed: "
                                f"{message(e)}") from None

    def rollback(self, conn: Any) -> None:
        try:
            conn.rollback()
        except Exception:
            self.close()

    def query(self, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        conn = self.connect()
        try:
            cur = conn.cursor()
            self.run(cur, statement, params)
            rows = list(cur.fetchall())
            conn.commit()
            return rows
        except Exception as e:
            self.rollback(conn)
            if sql.classify(e) == sql.TRANSIENT:
                raise Transient(e) from None
            raise JdbcSinkError(f"Query failed: {message(e)}") from None

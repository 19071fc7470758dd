"""JdbcSource's SQL: the tables it reads (`_Table`, `_Snapshot`) and the statements per
mode (bulk, incrementing, timestamp, timestamp+incrementing; `query` as a subquery):
quoted names, timestamp expressions and literals, watermarks and snapshot key ranges."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from kctl.connectors.jdbc._catalog import Catalog, Column, micros_of, timestamp_text
from kctl.connectors.jdbc._common import Dialect
from kctl.connectors.jdbc._source_settings import (
    BULK,
    INCREMENTING,
    TIMESTAMP,
    TIMESTAMP_INCREMENTING,
    TS_COLUMN,
    _Settings,
)


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


class _Sql:
    """JdbcSourceTask's SQL building (a mixin: the task holds the settings and catalog)."""

    s: _Settings
    dialect: Dialect
    _catalog: Catalog

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

    def _follow_sql(self, t: _Table) -> str:
        """The next rows of a table being followed, in offset order, at most batch.max.rows."""
        s = self.s
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
        return f"SELECT {self._select(t)} FROM {t.base}{cond} ORDER BY {order} " \
               f"LIMIT {s.batch_rows}"

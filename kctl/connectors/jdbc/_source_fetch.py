"""JdbcSource's reads: the Spark JDBC job for a query (numeric.mapping casts, the
DB-API fallback that finds the rows Spark cannot convert), rows sorted into offset order
and converted, and Arrow columns cut into SourceBatches around the rows that failed."""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from kctl.api import ConnectError, DataError, Schema, SourceBatch, SourceRecord
from kctl.api.arrow import arrow_schema_to_connect
from kctl.api.data import STRING_SCHEMA
from kctl.connectors.jdbc._catalog import Catalog, Column
from kctl.connectors.jdbc._common import Dialect, one_line
from kctl.connectors.jdbc._source_settings import TS_COLUMN, _Settings
from kctl.connectors.jdbc._source_sql import _ddl_name, _Table
from kctl.connectors.jdbc._source_values import (
    _coerce,
    _granular,
    _is_identity,
    _micros_column,
    _sqlite_temporal,
    _time_of_day,
    _typed,
    with_column_types,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger("kctl.connectors.jdbc.source")

# a range read this many times in a row, its table's columns changing during each read,
# fails that read (retried later with the task's backoff)
_READS_PER_FETCH = 3


@dataclass(slots=True)
class _Errant:
    """A row that could not become a record, reported in its place in the order."""

    record: SourceRecord
    error: DataError


Item = SourceBatch | _Errant


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


class _Fetching:
    """JdbcSourceTask's reading and converting half (a mixin: the task holds the state)."""

    s: _Settings
    dialect: Dialect
    reads: int
    _catalog: Catalog
    _spark: SparkSession
    _opts: dict[str, str]
    _stop: threading.Event
    _schemas: dict[tuple[pa.Schema, str | None, str], Schema]

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
        conversion set aside; read again when the table's columns changed meanwhile
        (`_read_whole`). Nothing of the table's position moves before this returns, so
        a read set aside costs a Spark job and nothing else."""
        if self.s.suffix:
            sql = f"{sql} {self.s.suffix}"  # query.suffix: after the whole SELECT
        for _ in range(_READS_PER_FETCH):
            table, bad, raw = self._read_rows(t, sql, partition)
            if self._read_whole(t, table.column_names):
                return self._prepare(t, table, bad, sort, raw)
        raise ConnectError(f"The columns of {t.label} changed during each of "
                           f"{_READS_PER_FETCH} reads in a row")

    def _read_whole(self, t: _Table, read: list[str]) -> bool:
        """Whether a read just done had every column its rows had, as the task knows them.

        Spark's JDBC source asks for a query's columns with one statement and reads the
        rows with another that names those columns: a column added in between (and a row
        written with it) is read without it, silently. Spark cannot be made to take both
        from one result set, so the columns are asked for again after the read, with one
        metadata query (the table's catalog columns; a query's columns as the driver
        describes `SELECT * ... WHERE 1=0`, which is what Spark itself sends): a column
        there now that the read lacks was either added after the read (its rows came
        later too, and the next read has them) or before the rows were read, so the read
        is set aside and done again. A table whose columns differ from those the task
        typed it by (types, nullability, a column added or dropped) is described afresh
        first, so the new read has the right customSchema and the rows the right types.
        """
        got = {n for n in read if n != TS_COLUMN}
        if t.name is None:
            now = self._catalog.result_names(f"SELECT * FROM {t.base} WHERE 1=0")
            missing = sorted({n for n in now if n != TS_COLUMN} - got)
            if missing:
                log.info("%s gained %s while it was read; reading the same rows again",
                         t.label, ", ".join(missing))
            return not missing
        columns = self._catalog.columns(t.name)
        if not columns:  # dropped since: the next read finds it gone
            return True
        missing = sorted({c.name for c in columns} - got)
        if not missing and columns == t.columns:
            return True
        log.info("The columns of %s changed while it was read (now %s%s); reading the same "
                 "rows again", t.label, ", ".join(c.name for c in columns),
                 f"; the read lacked {', '.join(missing)}" if missing else "")
        self._redescribe(t, columns)
        return False

    def _redescribe(self, t: _Table, columns: list[Column]) -> None:
        raise NotImplementedError  # the task's

    def _read_rows(self, t: _Table, sql: str, partition: tuple[str, int, int, int] | None
                   ) -> tuple[pa.Table, dict[int, str], dict[int, dict[str, Any]]]:
        """One Spark read of `sql`. A Spark read that fails is read again through the
        DB-API driver, row by row: rows that convert are kept, the others are reported."""
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
        return table, bad, raw

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
        value_schema = self._connect_schema(good.schema, t.schema_name, t)
        key_schema, keys = None, None
        if t.key and all(k in good.column_names for k in t.key):
            kt = good.select(t.key)
            keys = kt.to_struct_array().combine_chunks()
            key_schema = self._connect_schema(kt.schema, None, t)
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

    def _connect_schema(self, schema: pa.Schema, name: str | None, t: _Table) -> Schema:
        """The Connect schema of rows of `t` (cached): Arrow's, with what the table's
        column types add (`with_column_types`); a table's value schemas are versioned in
        the order this task met them, so a column added while it is read (Spark's read
        takes the table's columns afresh each time) is the next version."""
        key = (schema, name, t.label)
        got = self._schemas.get(key)
        if got is None:
            got = with_column_types(arrow_schema_to_connect(schema, name), t.columns,
                                    self.dialect.name, self.s.granularity)
            if name is not None:
                version = 1 + sum(1 for _, n, _ in self._schemas if n == name)
                got = dataclasses.replace(got, version=version)
            self._schemas[key] = got
        return got

    def _errant(self, t: _Table, rows: _Rows, i: int, offset: dict[str, Any]) -> _Errant:
        raw = rows.raw.get(i) or rows.table.slice(i, 1).to_pylist()[0]
        text = json.dumps(raw, default=str, sort_keys=False)
        err = DataError(f"Row of {t.label} at {json.dumps(offset)} cannot be converted: "
                        f"{rows.bad[i]}")
        return _Errant(SourceRecord(t.topic, None, None, None, STRING_SCHEMA, text,
                                    source_partition=t.partition, source_offset=offset), err)

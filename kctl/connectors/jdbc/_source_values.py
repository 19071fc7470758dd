"""JdbcSource's value coercion: what Spark reads as text or cannot read becomes the
column's Connect type (times of day, exact decimals, SQLite's dates), timestamps take
timestamp.granularity's form, and a value that does not fit is its row's error."""

from __future__ import annotations

import datetime as _dt
import decimal
import json
import re
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from kctl.api import Schema, Type
from kctl.api.data import (
    TEMPORAL_ENCODING_PARAM,
    TEMPORAL_PARAM,
    TIME,
    TIMESTAMP,
    Field,
    variable_scale_decimal_schema,
)
from kctl.connectors.jdbc._catalog import (
    ARROW_DECIMAL_DIGITS,
    EPOCH,
    UTC,
    Column,
    timestamp_text,
)
from kctl.connectors.jdbc._source_settings import CONNECT_LOGICAL, NANOS_LONG, NANOS_STRING

# The user manual's table of what each column becomes (docs/configuration.md, JdbcSource)
TYPES_DOC = """### Column types

What a column becomes in the record's value (and key). The schema parameters below travel
with the schema (JsonConverter writes them in its envelope), so JdbcSink's `auto.create`
makes the same kind of column again.

| column | field | parameters |
| --- | --- | --- |
| `numeric(p,s)` / `decimal(p,s)`, p up to 76 | Connect's Decimal (bytes), scale s; `numeric.mapping` may make it an integer or a double | `scale`, `connect.decimal.precision` = p |
| `numeric` without a precision (PostgreSQL), or p above 76 | `io.debezium.data.VariableScaleDecimal` (Debezium's): a struct of `scale` (int32, each value's own: `12.50` keeps 2) and `value` (bytes: the unscaled value, big-endian two's complement, as Decimal's). NaN and infinities have no decimal form: that row goes to the dead letter queue | |
| `timestamp` (PostgreSQL), `datetime` (MariaDB), SQLite `DATETIME`/`TIMESTAMP` | Connect's Timestamp (epoch milliseconds) | `kctl.temporal` = `timestamp` (no time zone) |
| `timestamptz` (PostgreSQL), `timestamp` (MariaDB) | Connect's Timestamp | `kctl.temporal` = `timestamptz` |
| `time`, `timetz` (in UTC), SQLite `TIME` | Connect's Time (milliseconds of the day) | `kctl.temporal` = `time` |

With `timestamp.granularity` other than `connect_logical`, timestamps and times keep their
microseconds: `nanos_long` makes an int64 (epoch nanoseconds; for a time, nanoseconds of
the day), `nanos_string` the same as decimal text, `nanos_iso_datetime_string` ISO text
(`yyyy-MM-ddTHH:mm:ss.nnnnnnnnn` in UTC; a time `HH:mm:ss.nnnnnnnnn`). Their schemas
carry `kctl.temporal` and `kctl.temporal.encoding` (the granularity's name), so a sink
reads them as timestamps and times, not as numbers or text.
"""

# Debezium's VariableScaleDecimal as Arrow: each value's scale and unscaled bytes
VARIABLE_SCALE_ARROW = pa.struct([pa.field("scale", pa.int32(), False),
                                  pa.field("value", pa.binary(), False)])
_EXACT = decimal.Context(prec=decimal.MAX_PREC, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)


def variable_scale(text: str) -> dict[str, Any]:
    """A numeric's exact text as VariableScaleDecimal's fields: the scale its text has
    (12.50 keeps 2) and the unscaled value; ValueError for NaN and infinities."""
    d = decimal.Decimal(text.strip())
    if not d.is_finite():
        raise ValueError(f"{text.strip()!r} is not a finite number: a decimal cannot hold it")
    exponent = d.as_tuple().exponent
    assert isinstance(exponent, int)
    scale = max(0, -exponent)
    unscaled = int(d.scaleb(scale, _EXACT))
    return {"scale": scale, "value": unscaled.to_bytes(
        max(1, (unscaled + (unscaled < 0)).bit_length() // 8 + 1), "big", signed=True)}


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
    Connect's Time, MariaDB's BIT(n) as its bytes, numerics of a declared precision up to
    Arrow's 76 digits as exact decimals, unconstrained numerics (and wider ones) as
    VariableScaleDecimal. A value that does not convert is its row's error (the dead
    letter queue)."""
    for c in columns:
        if not c.read_as_text or c.name not in table.column_names:
            continue
        conv: Callable[[str], Any]
        if c.time_of_day:
            typ: pa.DataType = pa.time64("us")
            zoned = c.with_time_zone
            conv = lambda v, z=zoned: _time_of_day(v, z)  # noqa: E731
        elif c.bits is not None:
            typ, conv = pa.binary(), lambda v, n=c.bits: _bits(v, n)
        elif c.precision is not None and c.precision <= ARROW_DECIMAL_DIGITS:
            typ, conv = pa.decimal256(c.precision, c.scale or 0), decimal.Decimal
        elif c.numeric:
            typ, conv = VARIABLE_SCALE_ARROW, variable_scale
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


def temporal_kind_of(c: Column, dialect: str) -> str | None:
    """`timestamp`, `timestamptz` or `time` for a column that holds one (the
    `kctl.temporal` parameter, which tells a sink which column type to create)."""
    t = c.type_name
    if dialect == "sqlite":
        if not c.sqlite_temporal or c.sqlite_date:
            return None
        return "time" if c.sqlite_time else "timestamp"
    if t in ("timestamp without time zone", "datetime"):
        return "timestamp"
    if t == "timestamp with time zone" or (t == "timestamp" and dialect == "mariadb"):
        return "timestamptz"  # MariaDB's TIMESTAMP is an instant, kept in UTC
    if c.time_of_day:
        return "time"
    return None


def with_column_types(schema: Schema, columns: Sequence[Column], dialect: str,
                      granularity: str) -> Schema:
    """The value schema with what the source columns say and Arrow cannot: which kind of
    timestamp or time a field came from (and how timestamp.granularity encoded it), and
    that a struct of scale and bytes is a VariableScaleDecimal."""
    by_name = {c.name: c for c in columns}
    fields, changed = [], False
    for f in schema.fields:
        fs = f.schema
        c = by_name.get(f.name)
        kind = temporal_kind_of(c, dialect) if c is not None else None
        params: dict[str, str] | None = None
        if c is not None and c.numeric and fs.type is Type.STRUCT and \
                [x.name for x in fs.fields] == ["scale", "value"]:
            fs = variable_scale_decimal_schema(fs.optional)
        elif kind is not None and fs.name in (TIMESTAMP, TIME):
            params = {**(fs.parameters or {}), TEMPORAL_PARAM: kind}
        elif kind is not None and granularity != CONNECT_LOGICAL and fs.name is None and \
                fs.type in (Type.INT64, Type.STRING):
            params = {**(fs.parameters or {}), TEMPORAL_PARAM: kind,
                      TEMPORAL_ENCODING_PARAM: granularity}
        if params is not None:
            fs = Schema(fs.type, optional=fs.optional, name=fs.name, version=fs.version,
                        parameters=params)
        changed = changed or fs is not f.schema
        fields.append(Field(f.name, f.index, fs))
    if not changed:
        return schema
    return Schema(Type.STRUCT, optional=schema.optional, name=schema.name,
                  version=schema.version, doc=schema.doc, parameters=schema.parameters,
                  fields=tuple(fields))


def _bits(text: str, n: int) -> bytes:
    """BIT(n) read as its signed value: the n bits, big-endian, in whole bytes (what
    MariaDB's CAST(... AS BINARY) gives)."""
    return (int(text) & ((1 << n) - 1)).to_bytes((n + 7) // 8, "big")


_INT64 = (-(2**63), 2**63 - 1)


def _granular(table: pa.Table, granularity: str, bad: dict[int, str]) -> pa.Table:
    """Timestamp columns as timestamp.granularity asks (Confluent's meanings); a value the
    asked form cannot hold (nanos_long outside 1677..2262) is its row's error."""
    if granularity == CONNECT_LOGICAL:
        return table
    for idx, f in enumerate(table.schema):
        if pa.types.is_time(f.type):
            table = table.set_column(idx, *_granular_time(table.column(idx), f, granularity))
            continue
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


def _granular_time(col: Any, f: pa.Field, granularity: str) -> tuple[pa.Field, pa.Array]:
    """A time-of-day column in timestamp.granularity's form, so it keeps its microseconds
    as the timestamps do: nanoseconds of the day, as an int64 or decimal text, or
    HH:MM:SS.nnnnnnnnn."""
    micros = pc.cast(pc.cast(col, pa.time64("us")), pa.int64()).to_pylist()
    out: list[Any] = []
    for m in micros:
        if m is None:
            out.append(None)
        elif granularity == NANOS_LONG:
            out.append(m * 1000)
        elif granularity == NANOS_STRING:
            out.append(str(m * 1000))
        else:
            sec, us = divmod(m, 1_000_000)
            out.append(f"{sec // 3600:02d}:{sec // 60 % 60:02d}:{sec % 60:02d}.{us:06d}000")
    typ = pa.int64() if granularity == NANOS_LONG else pa.string()
    return pa.field(f.name, typ, f.nullable), pa.array(out, typ)


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

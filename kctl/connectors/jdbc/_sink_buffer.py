"""JdbcSink's buffered records: each table's records collected until written, and a buffer
made into the columns Spark stages (keys, delete flags, the last record of each key), with
the records that cannot become a row set aside as their own errors for the DLQ."""

from __future__ import annotations

import bisect
import datetime as dt
import decimal
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from kctl.api import DataError, Schema, SinkBatch, SinkRecord, Struct, TopicPartition, Type
from kctl.api.arrow import connect_to_arrow_type, structs_to_table
from kctl.api.data import (
    INT32_SCHEMA,
    INT64_SCHEMA,
    STRING_SCHEMA,
    VARIABLE_SCALE_DECIMAL,
    Field,
    temporal_encoding,
    temporal_kind,
)
from kctl.connectors.jdbc import _sink_sql as sql
from kctl.connectors.jdbc._common import Dialect
from kctl.connectors.jdbc._sink_config import (
    INSERT,
    KAFKA_PK_DEFAULTS,
    KEY_PK_DEFAULT,
    PK_KAFKA,
    PK_RECORD_KEY,
    PK_RECORD_VALUE,
    UPDATE,
    UPSERT,
    JdbcSinkError,
)
from kctl.connectors.jdbc._sink_sql import STAGING_DELETE, STAGING_ROW, STAGING_WINNER, Column


@dataclass
class Buffer:
    """A table's records not yet written, in arrival order: lists of SinkRecords and
    columnar SinkBatches, all of one value (and key) schema. Tombstones (value None) fit
    any schema."""

    table: str
    value_schema: Schema | None
    key_schema: Schema | None
    parts: list[list[SinkRecord] | SinkBatch] = field(default_factory=list)
    count: int = 0
    since: float = 0.0
    first: dict[TopicPartition, int] = field(default_factory=dict)
    last: dict[TopicPartition, int] = field(default_factory=dict)

    def add_record(self, r: SinkRecord) -> None:
        if self.parts and isinstance(self.parts[-1], list):
            self.parts[-1].append(r)
        else:
            self.parts.append([r])
        self._covers(r.topic_partition, r.kafka_offset, r.kafka_offset)
        self.count += 1

    def add_batch(self, b: SinkBatch) -> None:
        self.parts.append(b)
        self._covers(b.topic_partition, b.offsets[0], b.offsets[-1])
        self.count += len(b)

    def _covers(self, tp: TopicPartition, first: int, last: int) -> None:
        self.first.setdefault(tp, first)
        self.last[tp] = last

    def without(self, tps: set[TopicPartition]) -> Buffer:
        """The buffer minus the records of `tps` (partitions taken away)."""
        out = Buffer(self.table, self.value_schema, self.key_schema, since=self.since)
        for part in self.parts:
            if isinstance(part, SinkBatch):
                if part.topic_partition not in tps:
                    out.add_batch(part)
            else:
                for r in part:
                    if r.topic_partition not in tps:
                        out.add_record(r)
        return out


@dataclass
class Rows:
    """A buffer as the Arrow table Spark stages (c0.. in `columns` order, then the row
    index, the delete flag and the last-of-its-key flag), the runs of row indexes whose
    statements run in order, and the rows rejected before staging (a null key)."""

    columns: list[Column]
    table: pa.Table
    segments: list[list[int]]
    origin: Callable[[int], SinkRecord]
    rejected: dict[int, BaseException] = field(default_factory=dict)
    keys: list[str] = field(default_factory=list)  # set when some records were superseded

    def earlier(self) -> dict[int, list[int]]:
        """For the last row of each key, the key's earlier rows, latest first: when the
        database rejects the last record, the latest one it accepts is written instead."""
        if not self.keys:
            return {}
        by_key: dict[tuple[Any, ...], list[int]] = {}
        cols = [self.table[k].to_pylist() for k in self.keys]
        for r, *key in zip(self.table[STAGING_ROW].to_pylist(), *cols, strict=True):
            by_key.setdefault(tuple(key), []).append(r)
        return {rs[-1]: rs[-2::-1] for rs in by_key.values() if len(rs) > 1}


class RowBuilder:
    """How this task's records become rows: which records cannot, the columns a pair of
    value and key schemas gives (cached), and a buffer as those columns."""

    def __init__(self, dialect: Dialect, *, mode: str, pk_mode: str, pk_fields: list[str],
                 whitelist: set[str], delete_enabled: bool) -> None:
        self.dialect = dialect
        self.mode = mode
        self.pk_mode = pk_mode
        self.pk_fields = pk_fields
        self.whitelist = whitelist
        self.delete_enabled = delete_enabled
        self._layouts: dict[tuple[Any, ...], list[Column]] = {}

    def problem(self, r: SinkRecord) -> DataError | None:
        """Why a record cannot become a row or a delete, if it cannot."""
        where = f"{r.topic}-{r.kafka_partition}@{r.kafka_offset}"
        if r.value is None:
            if not self.delete_enabled:
                return DataError(f"Record {where} is a tombstone (null value) and "
                                 "delete.enabled is false")
            if r.key is None:
                return DataError(f"Tombstone {where} has no key to delete by")
            return None
        if not isinstance(r.value, Struct):
            return DataError(f"Record {where}: JdbcSink writes struct values with a schema "
                             f"(e.g. JsonConverter with schemas.enable=true), got "
                             f"{type(r.value).__name__}")
        if self.pk_mode == PK_RECORD_KEY and r.key is None:
            return DataError(f"Record {where} has no key, and pk.mode=record_key")
        if self.pk_mode == PK_RECORD_KEY and not isinstance(r.key, Struct) and \
                r.key_schema is None and not isinstance(r.key, int | str | bytes | float):
            return DataError(f"Record {where}: a key without a schema must be a number, "
                             f"string or bytes, got {type(r.key).__name__}")
        return None

    def _layout(self, value_schema: Schema | None, key_schema: Schema | None) -> list[Column]:
        cache_key = (value_schema, key_schema)
        cols = self._layouts.get(cache_key)
        if cols is None:
            cols = self._layouts[cache_key] = self._compute_layout(value_schema, key_schema)
        return cols

    def _compute_layout(self, value_schema: Schema | None,
                        key_schema: Schema | None) -> list[Column]:
        specs: list[tuple[str, Schema, bool]] = []
        value_fields: list[Field] = list(value_schema.fields) if value_schema else []
        if self.pk_mode == PK_KAFKA:
            names = self.pk_fields or list(KAFKA_PK_DEFAULTS)
            specs += [(n, s, True) for n, s in zip(names, (STRING_SCHEMA, INT32_SCHEMA,
                                                            INT64_SCHEMA), strict=True)]
        elif self.pk_mode == PK_RECORD_KEY:
            if key_schema is None:
                raise JdbcSinkError("pk.mode=record_key, but the records have no key schema")
            if key_schema.type is Type.STRUCT:
                wanted = self.pk_fields or [f.name for f in key_schema.fields]
                for n in wanted:
                    f = key_schema.field(n)
                    if f is None:
                        raise JdbcSinkError(f"pk.fields names {n!r}, which is not a field of "
                                            "the record key")
                    specs.append((n, f.schema, True))
            else:
                if len(self.pk_fields) > 1:
                    raise JdbcSinkError("The record key is a primitive: pk.fields takes one "
                                        f"column name, got {len(self.pk_fields)}")
                specs.append(((self.pk_fields or [KEY_PK_DEFAULT])[0], key_schema, True))
        elif self.pk_mode == PK_RECORD_VALUE and value_schema is not None:
            wanted = self.pk_fields or [f.name for f in value_fields]
            for n in wanted:
                f = value_schema.field(n)
                if f is None:
                    raise JdbcSinkError(f"pk.fields names {n!r}, which is not a field of the "
                                        "record value")
                specs.append((n, f.schema, True))
        key_names = {n for n, _, _ in specs}
        for f in value_fields:
            if f.name in key_names or (self.whitelist and f.name not in self.whitelist):
                continue
            specs.append((f.name, f.schema, False))
        cols = [Column(n, s, k, f"c{i}") for i, (n, s, k) in enumerate(specs)]
        for c in cols:  # fail on an unwritable type now, naming the field
            sql.column_type(self.dialect, c.schema, key=c.key, staging=True, field=c.name)
        return cols

    def rows(self, buf: Buffer) -> Rows | None:
        """The buffer as columns: rows with a null key are dead-lettered, and upserts and
        updates mark the last record of each key, the one their statement writes (a
        statement must not touch a row twice)."""
        columns = self._layout(buf.value_schema, buf.key_schema)
        arrow_schema = pa.schema([pa.field(c.staging, _stage_type(c.schema)) for c in columns])
        pieces: list[pa.Table] = []
        starts: list[int] = []
        unfit: dict[int, DataError] = {}  # values their own type cannot hold
        n = 0
        for part in buf.parts:
            starts.append(n)
            piece_unfit: dict[int, DataError] = {}
            piece = self._piece(part, columns, buf.value_schema, buf.key_schema, piece_unfit)
            unfit.update({n + i: e for i, e in piece_unfit.items()})
            pieces.append(piece.cast(arrow_schema.append(pa.field(STAGING_DELETE, pa.bool_()))))
            n += piece.num_rows
        table = pa.concat_tables(pieces) if pieces else pa.table({})
        table = table.append_column(STAGING_ROW, pa.array(range(n), pa.int64()))
        table = table.select([c.staging for c in columns] + [STAGING_ROW, STAGING_DELETE])
        for r, e in _unstorable(self.dialect, table, columns).items():
            unfit.setdefault(r, e)
        if unfit:
            bad = pa.array(sorted(unfit), pa.int64())
            table = table.filter(pc.invert(pc.is_in(table[STAGING_ROW], value_set=bad)))

        parts = buf.parts

        def origin(r: int) -> SinkRecord:
            i = bisect.bisect_right(starts, r) - 1
            part = parts[i]
            j = r - starts[i]
            return part.slice(j, j + 1).records()[0] if isinstance(part, SinkBatch) else part[j]

        rejected: dict[int, BaseException] = dict(unfit)
        keys = [c.staging for c in columns if c.key]
        if keys:
            null_key = pc.is_null(table[keys[0]])
            for k in keys[1:]:
                null_key = pc.or_(null_key, pc.is_null(table[k]))
            if pc.any(null_key).as_py():
                names = ", ".join(c.name for c in columns if c.key)
                for r in table.filter(null_key)[STAGING_ROW].to_pylist():
                    rejected[r] = DataError(f"The primary key ({names}) of this record has a "
                                            "null field")
                table = table.filter(pc.invert(null_key))
        winner = pa.array([True] * table.num_rows, pa.bool_())
        deduped = False
        if keys and self.mode in (UPSERT, UPDATE) and table.num_rows:
            last = table.group_by(keys, use_threads=False).aggregate([(STAGING_ROW, "max")])
            wanted = last[f"{STAGING_ROW}_max"].combine_chunks()
            if len(wanted) != table.num_rows:
                winner = pc.is_in(table[STAGING_ROW], value_set=wanted)
                deduped = True
        table = table.append_column(STAGING_WINNER, winner)
        winners = table.filter(winner) if deduped else table
        rs = winners[STAGING_ROW].to_pylist()
        deletes = winners[STAGING_DELETE].to_pylist()
        return Rows(columns, table, self._segments(rs, deletes), origin, rejected,
                     keys if deduped else [])

    def _segments(self, rs: list[int], deletes: list[bool]) -> list[list[int]]:
        """Runs of rows whose statements may run together: a row after a delete starts a new
        run (in insert and update modes the order of a key's delete and insert matters;
        upserts keep one record per key, so order within the batch does not)."""
        if not rs:
            return []
        if self.mode != INSERT or not self.delete_enabled:
            return [rs]
        out: list[list[int]] = [[]]
        prev_delete = False
        for r, d in zip(rs, deletes, strict=True):
            if prev_delete and not d and out[-1]:
                out.append([])
            out[-1].append(r)
            prev_delete = d
        return out

    def _piece(self, part: list[SinkRecord] | SinkBatch, columns: list[Column],
               value_schema: Schema | None, key_schema: Schema | None,
               unfit: dict[int, DataError]) -> pa.Table:
        """One part's rows as columns named c0.., plus the delete flag; a record with a value
        its field's type cannot hold exactly (a decimal wider than its precision) is put in
        `unfit` by its index in the part."""
        arrays: dict[str, Any] = {}
        if isinstance(part, SinkBatch):
            n = len(part)
            values = pa.Table.from_struct_array(part.values)
            batch_keys = None
            if self.pk_mode == PK_RECORD_KEY and part.keys is not None:
                batch_keys = pa.Table.from_struct_array(part.keys) \
                    if pa.types.is_struct(part.keys.type) else part.keys
            for c in columns:
                if self.pk_mode == PK_KAFKA and c.key:
                    arrays[c.staging] = _kafka_column(c, [part.topic] * n, [part.partition] * n,
                                                      list(part.offsets))
                elif batch_keys is not None and c.key:
                    arrays[c.staging] = batch_keys.column(c.name) \
                        if isinstance(batch_keys, pa.Table) else batch_keys
                else:
                    arrays[c.staging] = values.column(c.name)
            arrays[STAGING_DELETE] = pa.array([False] * n, pa.bool_())
            _convert(arrays, columns, unfit)
            return pa.table(arrays)
        records = part
        n = len(records)
        vals = None
        if value_schema is not None:
            vals = structs_to_table([r.value for r in records], value_schema, nullable=True,
                                    rejects=unfit)
        keys = None
        if self.pk_mode == PK_RECORD_KEY and key_schema is not None:
            if key_schema.type is Type.STRUCT:
                keys = structs_to_table([r.key for r in records], key_schema, nullable=True,
                                        rejects=unfit)
            else:
                key_array = pa.array([r.key for r in records],
                                     connect_to_arrow_type(key_schema))
        for c in columns:
            if self.pk_mode == PK_KAFKA and c.key:
                arrays[c.staging] = _kafka_column(c, [r.topic for r in records],
                                                  [r.kafka_partition or 0 for r in records],
                                                  [r.kafka_offset for r in records])
            elif self.pk_mode == PK_RECORD_KEY and c.key:
                arrays[c.staging] = keys.column(c.name) if keys is not None else key_array
            elif vals is not None:
                arrays[c.staging] = vals.column(c.name)
            else:
                arrays[c.staging] = pa.nulls(n, connect_to_arrow_type(c.schema))
        arrays[STAGING_DELETE] = pa.array([r.value is None for r in records], pa.bool_())
        _convert(arrays, columns, unfit)
        return pa.table(arrays)


def key_schema_of(r: SinkRecord) -> Schema | None:
    """The schema of a record's key, a primitive without one typed by its value."""
    if isinstance(r.key, Struct):
        return r.key.schema
    if r.key_schema is not None:
        return r.key_schema
    if r.key is None:
        return None
    return Schema({bool: Type.BOOLEAN, int: Type.INT64, float: Type.FLOAT64,
                   bytes: Type.BYTES}.get(type(r.key), Type.STRING))


def _stage_type(schema: Schema) -> pa.DataType:
    """The Arrow type a column is staged as: decimals and times as their exact text,
    timestamps in an encoding (`kctl.temporal.encoding`) as instants."""
    if sql.staged_as_text(schema):
        return pa.string()
    if temporal_encoding(schema) is not None:
        return pa.timestamp("us", tz="UTC")
    return connect_to_arrow_type(schema)


def _convert(arrays: dict[str, Any], columns: Sequence[Column],
             unfit: dict[int, DataError]) -> None:
    """Columns whose values Arrow's cast cannot stage, converted in place: variable-scale
    decimals to their exact text, encoded timestamps and times (timestamp.granularity's
    forms) to instants and time text. A value that does not convert (nanoseconds a column
    cannot hold, text that is no time) is its row's error."""
    for c in columns:
        encoding = temporal_encoding(c.schema)
        if c.schema.name != VARIABLE_SCALE_DECIMAL and encoding is None:
            continue
        col = arrays[c.staging]
        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks()
        out: list[Any] = []
        if c.schema.name == VARIABLE_SCALE_DECIMAL:
            convert: Callable[[Any], Any] = _variable_scale_text
            typ = pa.string()
        else:
            assert encoding is not None
            time = temporal_kind(c.schema) == "time"
            convert = _time_text(encoding) if time else _instant(encoding)
            typ = pa.string() if time else pa.timestamp("us", tz="UTC")
        for i, v in enumerate(col.to_pylist()):
            try:
                out.append(None if v is None else convert(v))
            except (ValueError, TypeError, ArithmeticError, KeyError) as e:
                out.append(None)
                unfit.setdefault(i, DataError(f"Field {c.name!r}: {v!r} {e}"))
        arrays[c.staging] = pa.array(out, typ)


def _variable_scale_text(v: Any) -> str:
    """A VariableScaleDecimal (struct of scale and unscaled bytes) as its exact text."""
    unscaled = int.from_bytes(v["value"], "big", signed=True)
    return format(decimal.Decimal(unscaled).scaleb(-int(v["scale"]), _EXACT), "f")


_EXACT = decimal.Context(prec=decimal.MAX_PREC, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)


def _micros_of_nanos(nanos: int) -> int:
    micros, rest = divmod(nanos, 1000)
    if rest:
        raise ValueError("has nanoseconds: the column holds microseconds")
    return micros


_ISO = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?")
_ISO_TIME = re.compile(r"(\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?")


def _fraction_micros(frac: str | None) -> int:
    frac = (frac or "").ljust(9, "0")
    if frac[6:].strip("0"):
        raise ValueError("has nanoseconds: the column holds microseconds")
    return int(frac[:6])


def _instant(encoding: str) -> Callable[[Any], dt.datetime]:
    def convert(v: Any) -> dt.datetime:
        if encoding == "nanos_iso_datetime_string":
            m = _ISO.fullmatch(str(v).rstrip("Z"))
            if m is None:
                raise ValueError("is no yyyy-MM-ddTHH:mm:ss.nnnnnnnnn timestamp")
            base = dt.datetime.fromisoformat(m.group(1)).replace(tzinfo=dt.UTC)
            return base + dt.timedelta(microseconds=_fraction_micros(m.group(2)))
        nanos = int(v) if encoding == "nanos_long" else int(str(v), 10)
        return _EPOCH + dt.timedelta(microseconds=_micros_of_nanos(nanos))
    return convert


def _time_text(encoding: str) -> Callable[[Any], str]:
    def convert(v: Any) -> str:
        if encoding == "nanos_iso_datetime_string":
            m = _ISO_TIME.fullmatch(str(v))
            if m is None:
                raise ValueError("is no HH:mm:ss.nnnnnnnnn time")
            micros = ((int(m.group(1)) * 60 + int(m.group(2))) * 60 + int(m.group(3))) \
                * 1_000_000 + _fraction_micros(m.group(4))
        else:
            micros = _micros_of_nanos(int(v) if encoding == "nanos_long" else int(str(v), 10))
        if not 0 <= micros < 86_400_000_000:
            raise ValueError("is outside a day")
        sec, us = divmod(micros, 1_000_000)
        return f"{sec // 3600:02d}:{sec // 60 % 60:02d}:{sec % 60:02d}.{us:06d}"
    return convert


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


# doubles a database cannot store: it would refuse the whole batch (MariaDB's driver writes
# NaN into the statement as a name: "Unknown column 'NaN'") or keep something else (SQLite
# stores NaN as NULL), so they are the record's error instead
_NO_NAN = {"mariadb": "MariaDB cannot store NaN or infinite doubles",
           "sqlite": "SQLite stores NaN as NULL"}


def _unstorable(dialect: Dialect, table: pa.Table, columns: Sequence[Column]
                ) -> dict[int, DataError]:
    """Rows (by STAGING_ROW) holding a double the database cannot store as it is."""
    why = _NO_NAN.get(dialect.name)
    out: dict[int, DataError] = {}
    if why is None:
        return out
    for c in columns:
        if c.schema.type not in (Type.FLOAT32, Type.FLOAT64) or c.schema.name is not None:
            continue
        col = table[c.staging]
        bad = pc.is_nan(col) if dialect.name == "sqlite" else pc.invert(pc.is_finite(col))
        bad = pc.fill_null(bad, False)
        if not pc.any(bad).as_py():
            continue
        for r, x in zip(table[STAGING_ROW].filter(bad).to_pylist(), col.filter(bad).to_pylist(),
                        strict=True):
            out.setdefault(r, DataError(f"Field {c.name!r} is {x}: {why}"))
    return out


def _kafka_column(c: Column, topics: list[str], partitions: list[int],
                  offsets: list[int]) -> pa.Array:
    values = {STRING_SCHEMA: topics, INT32_SCHEMA: partitions, INT64_SCHEMA: offsets}[c.schema]
    return pa.array(values, connect_to_arrow_type(c.schema))


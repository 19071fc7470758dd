"""Arrow <-> Connect schemas and values.

Data moves between Python and Spark as Arrow, and between connectors and the runtime
as Connect Structs; connectors may import only `kctl.api`, so the bridge lives here.
Values are converted column by column with per-schema converter closures compiled once,
because a per-value type dispatch dominates the cost at 100k rows per batch.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pyarrow as pa

from kctl.api.data import (
    DATE,
    DECIMAL,
    TIME,
    TIMESTAMP,
    Field,
    Schema,
    Struct,
    Type,
    date_schema,
    decimal_schema,
    time_schema,
    timestamp_schema,
)
from kctl.errors import DataError

PRECISION_PARAM = "connect.decimal.precision"  # the name Kafka Connect's converters use

_ARROW_INTS: dict[Type, pa.DataType] = {
    Type.INT8: pa.int8(), Type.INT16: pa.int16(), Type.INT32: pa.int32(), Type.INT64: pa.int64(),
}
_PRIMITIVE_TO_ARROW: dict[Type, pa.DataType] = {
    **_ARROW_INTS,
    Type.FLOAT32: pa.float32(), Type.FLOAT64: pa.float64(), Type.BOOLEAN: pa.bool_(),
    Type.STRING: pa.string(), Type.BYTES: pa.binary(),
}
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)


# --- schemas ------------------------------------------------------------------------------


def _primitive(t: Type, optional: bool) -> Schema:
    return Schema(t, optional=optional)


def arrow_type_to_connect(t: pa.DataType, optional: bool = True) -> Schema:
    """The Connect schema for one Arrow type (timestamps, dates, times, decimals logical)."""
    if pa.types.is_dictionary(t):
        return arrow_type_to_connect(t.value_type, optional)
    if pa.types.is_boolean(t):
        return _primitive(Type.BOOLEAN, optional)
    if pa.types.is_integer(t):
        width = t.bit_width + (1 if pa.types.is_unsigned_integer(t) else 0)
        for bits, ct in ((8, Type.INT8), (16, Type.INT16), (32, Type.INT32)):
            if width <= bits:
                return _primitive(ct, optional)
        return _primitive(Type.INT64, optional)  # uint64 above 2**63 will not fit; rare
    if pa.types.is_floating(t):
        return _primitive(Type.FLOAT64 if t.bit_width == 64 else Type.FLOAT32, optional)
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_null(t) or \
            getattr(pa.types, "is_string_view", lambda _: False)(t):
        return _primitive(Type.STRING, True if pa.types.is_null(t) else optional)
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return _primitive(Type.BYTES, optional)
    if pa.types.is_timestamp(t):
        return timestamp_schema(optional)
    if pa.types.is_date(t):
        return date_schema(optional)
    if pa.types.is_time(t):
        return time_schema(optional)
    if pa.types.is_decimal(t):
        s = decimal_schema(t.scale, optional)
        return Schema(s.type, optional=optional, name=s.name, version=s.version,
                      parameters={"scale": str(t.scale), PRECISION_PARAM: str(t.precision)})
    if pa.types.is_map(t):
        return Schema(Type.MAP, optional=optional,
                      key_schema=arrow_type_to_connect(t.key_type, False),
                      value_schema=arrow_type_to_connect(t.item_type, t.item_field.nullable))
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return Schema(Type.ARRAY, optional=optional,
                      value_schema=arrow_type_to_connect(t.value_type, t.value_field.nullable))
    if pa.types.is_struct(t):
        return _struct_schema([t.field(i) for i in range(t.num_fields)], optional, None)
    raise DataError(f"Arrow type {t} has no Connect equivalent")


def _struct_schema(fields: Sequence[pa.Field], optional: bool, name: str | None) -> Schema:
    cfields = tuple(Field(f.name, i, arrow_type_to_connect(f.type, f.nullable))
                    for i, f in enumerate(fields))
    return Schema(Type.STRUCT, optional=optional, name=name, fields=cfields)


def arrow_schema_to_connect(schema: pa.Schema, name: str | None = None,
                            optional: bool = False) -> Schema:
    """A Connect STRUCT schema with one field per Arrow column."""
    return _struct_schema(list(schema), optional, name)


def connect_to_arrow_type(schema: Schema) -> pa.DataType:
    """The Arrow type that holds values of `schema` (logical types as Arrow temporals)."""
    if schema.name == TIMESTAMP:
        return pa.timestamp("us", tz="UTC")
    if schema.name == DATE:
        return pa.date32()
    if schema.name == TIME:
        return pa.time64("us")
    if schema.name == DECIMAL:
        params = schema.parameters or {}
        scale = int(params.get("scale", "0"))
        precision = max(int(params.get(PRECISION_PARAM, "38")), scale, 1)
        if precision <= 38:
            return pa.decimal128(precision, scale)
        # wider than Spark's 38 digits (PostgreSQL's numeric(p,s) goes to 1000): Arrow holds
        # 76; each sink decides how it writes them (JdbcSink and FileSink as exact text)
        return pa.decimal256(min(precision, 76), min(scale, 76))
    if schema.type in _PRIMITIVE_TO_ARROW:
        return _PRIMITIVE_TO_ARROW[schema.type]
    if schema.type is Type.ARRAY:
        vs = _require(schema.value_schema, "array value")
        return pa.list_(pa.field("element", connect_to_arrow_type(vs), nullable=vs.optional))
    if schema.type is Type.MAP:
        ks = _require(schema.key_schema, "map key")
        vs = _require(schema.value_schema, "map value")
        return pa.map_(connect_to_arrow_type(ks),
                       pa.field("value", connect_to_arrow_type(vs), nullable=vs.optional))
    return pa.struct([_arrow_field(f) for f in schema.fields])


def _require(s: Schema | None, what: str) -> Schema:
    if s is None:
        raise DataError(f"Schema has no {what} schema")
    return s


def _arrow_field(f: Field) -> pa.Field:
    return pa.field(f.name, connect_to_arrow_type(f.schema), nullable=f.schema.optional)


def connect_to_arrow_schema(schema: Schema) -> pa.Schema:
    """An Arrow schema with one column per field of a Connect STRUCT schema."""
    if schema.type is not Type.STRUCT:
        raise DataError(f"Only struct schemas map to Arrow tables, got {schema.type.value}")
    return pa.schema([_arrow_field(f) for f in schema.fields])


# --- values: Arrow -> Connect -------------------------------------------------------------

Conv = Callable[[Any], Any] | None  # None means identity, the common case, kept free


def _new_struct(schema: Schema, values: list[Any]) -> Struct:
    """A Struct from values already known to fit (they came typed from Arrow)."""
    s = object.__new__(Struct)
    s.schema = schema
    s._values = values
    return s


def _to_connect_conv(schema: Schema) -> Conv:
    if schema.type is Type.STRUCT:
        convs = [(f.name, _to_connect_conv(f.schema)) for f in schema.fields]

        def struct(v: Any) -> Any:
            if v is None:
                return None
            return _new_struct(schema, [v.get(n) if c is None or v.get(n) is None else c(v[n])
                                        for n, c in convs])
        return struct
    if schema.type is Type.ARRAY:
        ec = _to_connect_conv(_require(schema.value_schema, "array value"))
        if ec is None:
            return None
        return lambda v: None if v is None else [None if e is None else ec(e) for e in v]
    if schema.type is Type.MAP:
        kc = _to_connect_conv(_require(schema.key_schema, "map key"))
        vc = _to_connect_conv(_require(schema.value_schema, "map value"))

        def mapping(v: Any) -> Any:
            if v is None:
                return None
            items = v.items() if isinstance(v, Mapping) else v
            return {(k if kc is None else kc(k)): (x if vc is None or x is None else vc(x))
                    for k, x in items}
        return mapping
    return None


def table_to_structs(table: pa.Table | pa.RecordBatch, schema: Schema | None = None) -> list[Struct]:
    """One Struct per row; `schema` (from arrow_schema_to_connect) may be passed to reuse it."""
    schema = schema or arrow_schema_to_connect(table.schema)
    columns = []
    for f in schema.fields:
        col = table.column(f.name).to_pylist()
        conv = _to_connect_conv(f.schema)
        if conv is not None:
            col = [None if v is None else conv(v) for v in col]
        columns.append(col)
    return [_new_struct(schema, list(row)) for row in zip(*columns, strict=True)] \
        if columns else [_new_struct(schema, []) for _ in range(table.num_rows)]


def array_to_connect(values: pa.Array | pa.ChunkedArray, schema: Schema) -> list[Any]:
    """The Connect value of each row of one Arrow column of `schema` (None for null rows)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if schema.type is Type.STRUCT:
        structs: list[Any] = table_to_structs(pa.Table.from_struct_array(values), schema)
        if values.null_count:
            valid = values.is_valid().to_pylist()
            structs = [s if ok else None for s, ok in zip(structs, valid, strict=True)]
        return structs
    conv = _to_connect_conv(schema)
    col = values.to_pylist()
    return col if conv is None else [None if v is None else conv(v) for v in col]


# --- values: Connect -> Arrow -------------------------------------------------------------


def _timestamp_in(v: Any) -> Any:
    if isinstance(v, int) and not isinstance(v, bool):
        return _EPOCH + _dt.timedelta(milliseconds=v)
    return v


def _date_in(v: Any) -> Any:
    if isinstance(v, int) and not isinstance(v, bool):
        return (_EPOCH + _dt.timedelta(days=v)).date()
    if isinstance(v, _dt.datetime):
        return v.date()
    return v


def _time_in(v: Any) -> Any:
    if isinstance(v, int) and not isinstance(v, bool):
        return (_EPOCH + _dt.timedelta(milliseconds=v)).time()
    if isinstance(v, _dt.datetime):
        return v.time()
    return v


def _to_arrow_conv(schema: Schema) -> Conv:
    if schema.name == TIMESTAMP:
        return _timestamp_in
    if schema.name == DATE:
        return _date_in
    if schema.name == TIME:
        return _time_in
    if schema.type is Type.STRUCT:
        convs = [(f.name, f.schema.default, _to_arrow_conv(f.schema)) for f in schema.fields]

        def struct(v: Any) -> Any:
            if v is None:
                return None
            get = v.get_without_default if isinstance(v, Struct) else v.get
            out = {}
            for n, d, c in convs:
                x = get(n)
                if x is None:
                    x = d
                out[n] = x if c is None or x is None else c(x)
            return out
        return struct
    if schema.type is Type.ARRAY:
        ec = _to_arrow_conv(_require(schema.value_schema, "array value"))
        if ec is None:
            return None
        return lambda v: [None if e is None else ec(e) for e in v]
    if schema.type is Type.MAP:
        kc = _to_arrow_conv(_require(schema.key_schema, "map key"))
        vc = _to_arrow_conv(_require(schema.value_schema, "map value"))
        return lambda v: [(k if kc is None else kc(k), x if vc is None or x is None else vc(x))
                          for k, x in v.items()]
    return None


# what pa.array raises for a value its type cannot hold: a decimal too wide, a str with a
# lone surrogate (Python's json decodes "\ud800" into one; no UTF-8 holds it)
_ARROW_VALUE_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError,
                       UnicodeEncodeError)


def structs_to_table(values: Sequence[Struct | Mapping[str, Any] | None], schema: Schema,
                     nullable: bool = False,
                     rejects: dict[int, DataError] | None = None) -> pa.Table:
    """An Arrow table of `values` (Structs of `schema`, or dicts shaped like it).

    A None value becomes a row of nulls; pass nullable=True when that may happen to
    required fields (e.g. tombstones among the rows a sink writes). A value its column's
    type cannot hold exactly (a decimal wider than its precision, a lone surrogate) fails
    the whole table, or, given `rejects`, only its row: the row's error is put there (by row
    index) and the value left null, for the caller to set the row aside.
    """
    arrow_schema = connect_to_arrow_schema(schema)
    if nullable:
        arrow_schema = pa.schema([f.with_nullable(True) for f in arrow_schema])
    arrays = []
    for f, af in zip(schema.fields, arrow_schema, strict=True):
        conv = _to_arrow_conv(f.schema)
        default = f.schema.default
        col = []
        for v in values:
            if v is None:
                x = None
            elif isinstance(v, Struct):
                x = v.get_without_default(f.name)
            else:
                x = v.get(f.name)
            if x is None:
                x = default
            col.append(x if conv is None or x is None else conv(x))
        try:
            arrays.append(pa.array(col, type=af.type))
        except _ARROW_VALUE_ERRORS as e:
            if rejects is None:
                raise DataError(f"Field {f.name!r} cannot be written as {af.type}: {e}") from e
            arrays.append(pa.array(_isolate(col, af.type, f.name, rejects), type=af.type))
    return pa.Table.from_arrays(arrays, schema=arrow_schema)




def _isolate(col: list[Any], t: pa.DataType, name: str,
             rejects: dict[int, DataError]) -> list[Any]:
    """`col` with each value `t` cannot hold replaced by None, its error in `rejects`."""
    out = list(col)
    for i, x in enumerate(col):
        if x is None:
            continue
        try:
            pa.array([x], type=t)
        except _ARROW_VALUE_ERRORS as e:
            out[i] = None
            rejects.setdefault(i, DataError(f"Field {name!r}: {x!r} does not fit {t}: {e}"))
    return out

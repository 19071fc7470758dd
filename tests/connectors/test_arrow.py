"""Arrow <-> Connect: schemas and values survive the trip both ways (no Spark needed)."""

from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kctl.api import DataError, Schema, SchemaBuilder, Struct, Type
from kctl.api.arrow import (
    arrow_schema_to_connect,
    arrow_type_to_connect,
    connect_to_arrow_schema,
    connect_to_arrow_type,
    structs_to_table,
    table_to_structs,
)
from kctl.api.data import DATE, DECIMAL, TIME, TIMESTAMP, validate_value

PRIMITIVES = [Type.INT8, Type.INT16, Type.INT32, Type.INT64, Type.FLOAT32, Type.FLOAT64,
              Type.BOOLEAN, Type.STRING, Type.BYTES]
names = st.text("abcdefghij_", min_size=1, max_size=6)


def logical(name: str, t: Type, optional: bool, **params: str) -> Schema:
    return Schema(t, optional=optional, name=name, version=1, parameters=params or None)


leaf = st.one_of(
    st.builds(lambda t, o: Schema(t, optional=o), st.sampled_from(PRIMITIVES), st.booleans()),
    st.builds(lambda o: logical(TIMESTAMP, Type.INT64, o), st.booleans()),
    st.builds(lambda o: logical(DATE, Type.INT32, o), st.booleans()),
    st.builds(lambda o: logical(TIME, Type.INT32, o), st.booleans()),
    st.builds(lambda s, o: logical(DECIMAL, Type.BYTES, o, scale=str(s),
                                   **{"connect.decimal.precision": "20"}),
              st.integers(0, 6), st.booleans()),
)


def struct_of(children):
    return st.builds(
        lambda fields, o: _build_struct(fields, o),
        st.dictionaries(names, children, min_size=1, max_size=4), st.booleans())


def _build_struct(fields: dict, optional: bool) -> Schema:
    b = SchemaBuilder.struct()
    for n, s in fields.items():
        b.field(n, s)
    return b.optional().build() if optional else b.build()


schemas = st.recursive(
    leaf,
    lambda children: st.one_of(
        st.builds(lambda v, o: Schema(Type.ARRAY, optional=o, value_schema=v), children,
                  st.booleans()),
        st.builds(lambda v, o: Schema(Type.MAP, optional=o, key_schema=Schema(Type.STRING),
                                      value_schema=v), children, st.booleans()),
        struct_of(children),
    ),
    max_leaves=6,
)


@settings(max_examples=150, deadline=None)
@given(schemas)
def test_schemas_round_trip_through_arrow(schema):
    assert arrow_type_to_connect(connect_to_arrow_type(schema), schema.optional) == schema


def value_for(schema: Schema):
    """A strategy of values that fit `schema` (what a connector would put in a Struct)."""
    if schema.name == TIMESTAMP:
        base = st.datetimes(min_value=dt.datetime(1971, 1, 1), max_value=dt.datetime(2100, 1, 1),
                            timezones=st.just(dt.UTC)).map(lambda d: d.replace(microsecond=0))
    elif schema.name == DATE:
        base = st.dates(min_value=dt.date(1900, 1, 1))
    elif schema.name == TIME:
        base = st.times().map(lambda t: t.replace(microsecond=0))
    elif schema.name == DECIMAL:
        scale = int(schema.parameters["scale"])
        base = st.integers(-(10**12), 10**12).map(lambda n: decimal.Decimal(n).scaleb(-scale))
    elif schema.type in (Type.INT8, Type.INT16, Type.INT32, Type.INT64):
        bits = {Type.INT8: 7, Type.INT16: 15, Type.INT32: 31, Type.INT64: 63}[schema.type]
        base = st.integers(-(2**bits), 2**bits - 1)
    elif schema.type is Type.FLOAT32:
        base = st.floats(width=32, allow_nan=False)
    elif schema.type is Type.FLOAT64:
        base = st.floats(allow_nan=False)
    elif schema.type is Type.BOOLEAN:
        base = st.booleans()
    elif schema.type is Type.STRING:
        base = st.text(max_size=5)
    elif schema.type is Type.BYTES:
        base = st.binary(max_size=5)
    elif schema.type is Type.ARRAY:
        base = st.lists(value_for(schema.value_schema), max_size=3)
    elif schema.type is Type.MAP:
        base = st.dictionaries(st.text(max_size=3), value_for(schema.value_schema), max_size=3)
    else:
        base = st.fixed_dictionaries({f.name: value_for(f.schema) for f in schema.fields}) \
            .map(lambda d: Struct(schema, d))
    return st.one_of(st.none(), base) if schema.optional else base


@st.composite
def rows(draw):
    schema = draw(struct_of(schemas).map(lambda s: _build_struct(
        {f.name: f.schema for f in s.fields}, False)))
    values = draw(st.lists(value_for(schema), min_size=0, max_size=4))
    return schema, values


@settings(max_examples=150, deadline=None)
@given(rows())
def test_structs_round_trip_through_an_arrow_table(case):
    schema, values = case
    table = structs_to_table(values, schema)
    assert table.num_rows == len(values)
    back = table_to_structs(table, schema)
    assert back == values
    for v in back:
        v.validate()  # what comes back obeys its schema


def test_arrow_columns_get_connect_logical_types():
    table = pa.table({
        "ts": pa.array([dt.datetime(2024, 1, 1, tzinfo=dt.UTC)], pa.timestamp("us", tz="UTC")),
        "day": pa.array([dt.date(2024, 1, 2)], pa.date32()),
        "price": pa.array([decimal.Decimal("1.25")], pa.decimal128(10, 2)),
        "tags": pa.array([{"a": 1}], pa.map_(pa.string(), pa.int32())),
        "small": pa.array([3], pa.uint8()),
        "nothing": pa.array([None], pa.null()),
    })
    schema = arrow_schema_to_connect(table.schema, name="Row")
    assert schema.name == "Row" and schema.type is Type.STRUCT
    assert schema.field("ts").schema.name == TIMESTAMP
    assert schema.field("day").schema.name == DATE
    assert schema.field("price").schema.parameters["scale"] == "2"
    assert schema.field("small").schema.type is Type.INT16  # uint8 needs a wider signed int
    [row] = table_to_structs(table, schema)
    assert row["tags"] == {"a": 1}
    assert row["price"] == decimal.Decimal("1.25")
    validate_value(schema, row)


def test_epoch_numbers_are_accepted_for_logical_types_on_the_way_to_arrow():
    schema = (SchemaBuilder.struct()
              .field("ts", Schema(Type.INT64, name=TIMESTAMP, version=1)).build())
    table = structs_to_table([{"ts": 86_400_000}], schema)
    assert table.column("ts").to_pylist()[0] == dt.datetime(1970, 1, 2, tzinfo=dt.UTC)


def test_only_struct_schemas_make_tables():
    with pytest.raises(DataError):
        connect_to_arrow_schema(Schema(Type.STRING))
    assert connect_to_arrow_schema(SchemaBuilder.struct().field("a", Schema(Type.STRING)).build())\
        .field("a").nullable is False

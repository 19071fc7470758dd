"""The JSON converter speaks Kafka Connect's wire format: a Java worker and kctl can share topics."""

from __future__ import annotations

import datetime as dt
import decimal
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kctl.api.data import (
    BOOLEAN_SCHEMA,
    BYTES_SCHEMA,
    FLOAT32_SCHEMA,
    FLOAT64_SCHEMA,
    INT8_SCHEMA,
    INT16_SCHEMA,
    INT32_SCHEMA,
    INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    Schema,
    SchemaBuilder,
    Struct,
    Type,
    date_schema,
    decimal_schema,
    time_schema,
    timestamp_schema,
)
from kctl.errors import ConfigError, DataError
from kctl.runtime.converters import JsonConverter, load_converter

UTC = dt.UTC


def conv(**cfg: str) -> JsonConverter:
    c = load_converter("json", cfg, False)
    assert isinstance(c, JsonConverter)
    return c


def roundtrip(c: JsonConverter, schema: Schema | None, value: object) -> object:
    raw = c.from_connect_data("t", schema, value)
    back = c.to_connect_data("t", raw)
    assert back.schema == schema
    return back.value


# --- what Kafka writes, byte for byte ---------------------------------------------------------

KAFKA_LITERALS = [
    (BOOLEAN_SCHEMA, True, '{"schema":{"type":"boolean","optional":false},"payload":true}'),
    (INT8_SCHEMA, 12, '{"schema":{"type":"int8","optional":false},"payload":12}'),
    (INT16_SCHEMA, 12, '{"schema":{"type":"int16","optional":false},"payload":12}'),
    (INT32_SCHEMA, 12, '{"schema":{"type":"int32","optional":false},"payload":12}'),
    (INT64_SCHEMA, 4398046511104,
     '{"schema":{"type":"int64","optional":false},"payload":4398046511104}'),
    (FLOAT32_SCHEMA, 12.5, '{"schema":{"type":"float","optional":false},"payload":12.5}'),
    (FLOAT64_SCHEMA, 12.5, '{"schema":{"type":"double","optional":false},"payload":12.5}'),
    (STRING_SCHEMA, "foo-bar-baz",
     '{"schema":{"type":"string","optional":false},"payload":"foo-bar-baz"}'),
    (BYTES_SCHEMA, b"test-string",
     '{"schema":{"type":"bytes","optional":false},"payload":"dGVzdC1zdHJpbmc="}'),
    (SchemaBuilder.array(INT32_SCHEMA).build(), [1, 2, 3],
     '{"schema":{"type":"array","items":{"type":"int32","optional":false},"optional":false},'
     '"payload":[1,2,3]}'),
    (SchemaBuilder.map(STRING_SCHEMA, INT32_SCHEMA).build(), {"key1": 12, "key2": 15},
     '{"schema":{"type":"map","keys":{"type":"string","optional":false},'
     '"values":{"type":"int32","optional":false},"optional":false},'
     '"payload":{"key1":12,"key2":15}}'),
    (SchemaBuilder.map(INT32_SCHEMA, INT32_SCHEMA).build(), {1: 12, 2: 15},
     '{"schema":{"type":"map","keys":{"type":"int32","optional":false},'
     '"values":{"type":"int32","optional":false},"optional":false},'
     '"payload":[[1,12],[2,15]]}'),
    (decimal_schema(2), decimal.Decimal("1.56"),
     '{"schema":{"type":"bytes","optional":false,"name":"org.apache.kafka.connect.data.Decimal",'
     '"version":1,"parameters":{"scale":"2"}},"payload":"AJw="}'),
    (date_schema(), dt.date(1970, 1, 1) + dt.timedelta(days=10000),
     '{"schema":{"type":"int32","optional":false,"name":"org.apache.kafka.connect.data.Date",'
     '"version":1},"payload":10000}'),
    (time_schema(), dt.time(0, 0, 14, 400000),
     '{"schema":{"type":"int32","optional":false,"name":"org.apache.kafka.connect.data.Time",'
     '"version":1},"payload":14400}'),
    (timestamp_schema(), dt.datetime(1970, 1, 1, tzinfo=UTC) + dt.timedelta(milliseconds=4000000000),
     '{"schema":{"type":"int64","optional":false,'
     '"name":"org.apache.kafka.connect.data.Timestamp","version":1},"payload":4000000000}'),
]


@pytest.mark.parametrize(("schema", "value", "literal"), KAFKA_LITERALS,
                         ids=[lit[0].name or lit[0].type.value for lit in KAFKA_LITERALS])
def test_envelopes_are_byte_identical_to_kafkas_and_read_back(schema, value, literal):
    c = conv()
    assert c.from_connect_data("t", schema, value) == literal.encode()
    back = c.to_connect_data("t", literal.encode())
    assert back.schema == schema
    assert back.value == value


def test_a_struct_with_every_feature_matches_kafkas_layout():
    address = (SchemaBuilder.struct().name("com.acme.Address").optional()
               .field("city", STRING_SCHEMA).build())
    schema = (SchemaBuilder.struct().name("com.acme.Customer").version(3).doc("a customer")
              .parameter("source", "crm")
              .field("id", INT64_SCHEMA)
              .field("nick", OPTIONAL_STRING_SCHEMA)
              .field("tier", Schema(Type.STRING, default="basic"))
              .field("address", address)
              .build())
    value = Struct(schema, {"id": 7, "nick": None, "address": Struct(address, {"city": "Kyoto"})})
    raw = conv().from_connect_data("customers", schema, value)
    assert raw == (
        b'{"schema":{"type":"struct","fields":['
        b'{"type":"int64","optional":false,"field":"id"},'
        b'{"type":"string","optional":true,"field":"nick"},'
        b'{"type":"string","optional":false,"default":"basic","field":"tier"},'
        b'{"type":"struct","fields":[{"type":"string","optional":false,"field":"city"}],'
        b'"optional":true,"name":"com.acme.Address","field":"address"}],'
        b'"optional":false,"name":"com.acme.Customer","version":3,"doc":"a customer",'
        b'"parameters":{"source":"crm"}},'
        b'"payload":{"id":7,"nick":null,"tier":"basic","address":{"city":"Kyoto"}}}'
    )
    back = conv().to_connect_data("customers", raw)
    assert back.schema == schema
    assert back.value["address"]["city"] == "Kyoto"
    assert back.value.get_without_default("tier") == "basic"  # the default was written out


def test_kafka_written_envelopes_with_whitespace_and_reordered_keys_are_read():
    raw = b'{ "payload": {"a": 1, "b": [1, 2]},\n  "schema": {"type": "struct", "fields": [' \
          b'{"field": "a", "type": "int32"}, {"field": "b", "type": "array", ' \
          b'"items": {"type": "int64"}, "optional": true}]} }'
    sv = conv().to_connect_data("t", raw)
    assert sv.schema.field("a").schema == INT32_SCHEMA
    assert sv.value["b"] == [1, 2]


def test_schemas_disabled_writes_and_reads_plain_json():
    c = conv(**{"schemas.enable": "false"})
    schema = SchemaBuilder.struct().field("n", INT32_SCHEMA).field("s", STRING_SCHEMA).build()
    assert c.from_connect_data("t", schema, Struct(schema, {"n": 1, "s": "x"})) == b'{"n":1,"s":"x"}'
    assert c.from_connect_data("t", None, {"a": [1, 2.5, None, True]}) == b'{"a":[1,2.5,null,true]}'
    sv = c.to_connect_data("t", b'{"a": {"b": 1}}')
    assert sv.schema is None and sv.value == {"a": {"b": 1}}


def test_schemaless_maps_with_non_string_keys_become_pairs_as_in_kafka():
    c = conv(**{"schemas.enable": "false"})
    assert c.from_connect_data("t", None, {1: "a", 2: "b"}) == b'[[1,"a"],[2,"b"]]'
    assert c.from_connect_data("t", None, {"k": b"\x00\x01"}) == b'{"k":"AAE="}'
    enveloped = conv().from_connect_data("t", None, {"k": 1})
    assert enveloped == b'{"schema":null,"payload":{"k":1}}'


def test_numeric_decimal_format_writes_exact_numbers_and_reads_them_back_exactly():
    c = conv(**{"decimal.format": "NUMERIC"})
    schema = SchemaBuilder.struct().field("price", decimal_schema(3)).build()
    value = Struct(schema, {"price": decimal.Decimal("12345678901234567.891")})
    raw = c.from_connect_data("t", schema, value)
    assert b'"payload":{"price":12345678901234567.891}' in raw
    assert c.to_connect_data("t", raw).value == value
    # a BASE64 converter still reads numeric decimals, as Kafka's does
    assert conv().to_connect_data("t", raw).value == value


def test_nulls_defaults_and_optional_values():
    c = conv()
    assert c.from_connect_data("t", None, None) is None
    assert c.to_connect_data("t", None).value is None
    opt = Schema(Type.INT32, optional=True)
    assert c.from_connect_data("t", opt, None) == b'{"schema":{"type":"int32","optional":true},"payload":null}'
    with_default = Schema(Type.INT32, default=42)
    raw = c.from_connect_data("t", with_default, None)
    assert json.loads(raw)["payload"] == 42
    assert c.to_connect_data("t", b'{"schema":{"type":"int32","default":42},"payload":null}').value == 42
    keep_null = conv(**{"replace.null.with.default": "false"})
    assert keep_null.to_connect_data(
        "t", b'{"schema":{"type":"int32","optional":true,"default":42},"payload":null}').value is None


def test_second_record_with_the_same_schema_reuses_the_parsed_schema():
    c = conv()
    schema = SchemaBuilder.struct().field("n", INT32_SCHEMA).build()
    first = c.to_connect_data("t", c.from_connect_data("t", schema, Struct(schema, {"n": 1})))
    second = c.to_connect_data("t", c.from_connect_data("t", schema, Struct(schema, {"n": 2})))
    assert second.schema is first.schema
    assert (first.value["n"], second.value["n"]) == (1, 2)


# --- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("raw", "fragment"), [
    (b"not json", "serialization error"),
    (b'{"payload": 1}', 'requires "schema" and "payload"'),
    (b'{"schema": null, "payload": 1, "extra": 2}', "may not contain additional fields"),
    (b'{"schema": {"type": "int8"}, "payload": 300}', "out of range for INT8"),
    (b'{"schema": {"type": "int32"}, "payload": "12"}', "Invalid value for INT32"),
    (b'{"schema": {"type": "int32"}, "payload": null}', "Invalid null value for required INT32"),
    (b'{"schema": {"type": "wat"}, "payload": 1}', "Unknown schema type: wat"),
    (b'{"schema": {"type": "bytes"}, "payload": "***"}', "Invalid bytes field"),
    (b'{"schema": {"type": "map", "keys": {"type": "int32"}, "values": {"type": "int32"}},'
     b' "payload": [[1]]}', "expected length 2"),
    (b'{"schema": {"type": "struct", "fields": [{"type": "int32"}]}, "payload": {}}',
     "field name not specified"),
])
def test_bad_input_raises_a_data_error_that_says_why(raw, fragment):
    with pytest.raises(DataError, match=fragment):
        conv().to_connect_data("t", raw)


def test_values_that_do_not_fit_their_schema_are_rejected_on_write():
    c = conv()
    with pytest.raises(DataError, match="Invalid type for INT32"):
        c.from_connect_data("t", INT32_SCHEMA, "12")
    with pytest.raises(DataError, match="null value for field that is required"):
        c.from_connect_data("t", STRING_SCHEMA, None)
    other = SchemaBuilder.struct().field("x", INT32_SCHEMA).build()
    mine = SchemaBuilder.struct().field("y", INT32_SCHEMA).build()
    with pytest.raises(DataError, match="Mismatching schema"):
        c.from_connect_data("t", mine, Struct(other, {"x": 1}))
    with pytest.raises(DataError, match="mismatching scale"):
        c.from_connect_data("t", decimal_schema(1), decimal.Decimal("1.25"))


def test_invalid_converter_config_names_the_key():
    with pytest.raises(ConfigError, match=r"value\.converter\.decimal\.format") as e:
        load_converter("json", {"decimal.format": "HEX"}, False)
    assert e.value.key == "value.converter.decimal.format"


# --- round trips ------------------------------------------------------------------------------

_i = st.integers


@settings(max_examples=60, deadline=None)
@given(
    st.tuples(_i(-(2**7), 2**7 - 1), _i(-(2**15), 2**15 - 1), _i(-(2**31), 2**31 - 1),
              _i(-(2**63), 2**63 - 1)),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(), st.text(), st.binary(), st.none() | st.text(),
    st.lists(_i(-5, 5)), st.dictionaries(_i(-(2**31), 2**31 - 1), st.text(max_size=3), max_size=4),
    st.decimals(allow_nan=False, allow_infinity=False, places=4,
                min_value=-(10**12), max_value=10**12),
    st.datetimes(min_value=dt.datetime(1900, 1, 1), max_value=dt.datetime(2200, 1, 1)),
    st.booleans(),
)
def test_every_type_round_trips_through_both_envelope_modes(ints, f, b, s, raw, opt, arr, m, d,
                                                            when, numeric):
    schema = (SchemaBuilder.struct().name("rt")
              .field("i8", INT8_SCHEMA).field("i16", INT16_SCHEMA).field("i32", INT32_SCHEMA)
              .field("i64", INT64_SCHEMA).field("f", FLOAT64_SCHEMA).field("b", BOOLEAN_SCHEMA)
              .field("s", STRING_SCHEMA).field("raw", BYTES_SCHEMA).field("opt", OPTIONAL_STRING_SCHEMA)
              .field("arr", SchemaBuilder.array(INT32_SCHEMA).build())
              .field("m", SchemaBuilder.map(INT32_SCHEMA, STRING_SCHEMA).build())
              .field("d", decimal_schema(4)).field("ts", timestamp_schema())
              .field("day", date_schema()).field("tod", time_schema())
              .build())
    ts = when.replace(tzinfo=UTC, microsecond=when.microsecond // 1000 * 1000)
    value = Struct(schema, {
        "i8": ints[0], "i16": ints[1], "i32": ints[2], "i64": ints[3], "f": f, "b": b, "s": s,
        "raw": raw, "opt": opt, "arr": arr, "m": m, "d": d.quantize(decimal.Decimal("0.0001")),
        "ts": ts, "day": ts.date(), "tod": ts.time().replace(tzinfo=None),
    })
    c = conv(**{"decimal.format": "NUMERIC" if numeric else "BASE64"})
    assert roundtrip(c, schema, value) == value
    plain = conv(**{"schemas.enable": "false"})
    assert json.loads(plain.from_connect_data("t", schema, value))["s"] == s


@settings(max_examples=40, deadline=None)
@given(st.recursive(
    st.none() | st.booleans() | st.integers() | st.text()
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=10))
def test_schemaless_json_values_round_trip(value):
    c = conv()
    raw = c.from_connect_data("t", None, value)
    if value is None:
        assert raw is None
    else:
        assert c.to_connect_data("t", raw).value == value

"""TimestampConverter between string, unix, Date, Time and Timestamp, after Kafka's
TimestampConverterTest: every source representation to every target, with a schema (the
source kind read from the schema) and without (inferred from the Python type), for a whole
key/value and for a field of a Struct/map, with nulls.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from kctl.api.data import (
    INT64_SCHEMA,
    OPTIONAL_INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    Schema,
    SchemaBuilder,
    Struct,
    Type,
    date_schema,
    time_schema,
    timestamp_schema,
)
from kctl.api.records import SourceRecord
from kctl.errors import ConfigError, ConnectError, DataError, ValidationError

UTC = dt.UTC
FORMAT = "yyyy MM dd HH mm ss SSS z"  # Kafka's STRING_DATE_FMT

# Kafka's DATE_PLUS_TIME: a day and 1234 ms after the epoch, and what each kind makes of it.
DATE_PLUS_TIME = dt.datetime(1970, 1, 2, 0, 0, 1, 234000, tzinfo=UTC)
DATE_PLUS_TIME_UNIX = 86_401_234
DATE_PLUS_TIME_STRING = "1970 01 02 00 00 01 234 UTC"
DATE = dt.date(1970, 1, 2)
TIME = dt.time(0, 0, 1, 234000)

# The same instant in each source representation; Date and Time only hold part of it.
SOURCES: dict[str, tuple[Schema, Schema, Any]] = {  # kind: (schema, optional schema, value)
    "unix": (INT64_SCHEMA, OPTIONAL_INT64_SCHEMA, DATE_PLUS_TIME_UNIX),
    "string": (STRING_SCHEMA, OPTIONAL_STRING_SCHEMA, DATE_PLUS_TIME_STRING),
    "Timestamp": (timestamp_schema(), timestamp_schema(True), DATE_PLUS_TIME),
    "Date": (date_schema(), date_schema(True), DATE),  # 1970-01-02T00:00:00.000
    "Time": (time_schema(), time_schema(True), TIME),  # 1970-01-01T00:00:01.234
}
TARGET_SCHEMAS: dict[str, tuple[Schema, Schema]] = {
    "unix": (INT64_SCHEMA, OPTIONAL_INT64_SCHEMA),
    "string": (STRING_SCHEMA, OPTIONAL_STRING_SCHEMA),
    "Timestamp": (timestamp_schema(), timestamp_schema(True)),
    "Date": (date_schema(), date_schema(True)),
    "Time": (time_schema(), time_schema(True)),
}
# What each target makes of each source.
FULL = {"unix": DATE_PLUS_TIME_UNIX, "string": DATE_PLUS_TIME_STRING,
        "Timestamp": DATE_PLUS_TIME, "Date": DATE, "Time": TIME}
EXPECTED: dict[str, dict[str, Any]] = {
    "unix": FULL,
    "string": FULL,
    "Timestamp": FULL,
    "Date": {"unix": 86_400_000, "string": "1970 01 02 00 00 00 000 UTC",
             "Timestamp": dt.datetime(1970, 1, 2, tzinfo=UTC), "Date": DATE, "Time": dt.time(0)},
    "Time": {"unix": 1234, "string": "1970 01 01 00 00 01 234 UTC",
             "Timestamp": dt.datetime(1970, 1, 1, 0, 0, 1, 234000, tzinfo=UTC),
             "Date": dt.date(1970, 1, 1), "Time": TIME},
}
PAIRS = [(s, t) for s in SOURCES for t in TARGET_SCHEMAS]
EACH_PAIR = pytest.mark.parametrize(("source_kind", "target"), PAIRS,
                                    ids=[f"{s}-to-{t}" for s, t in PAIRS])
VARIANTS = pytest.mark.parametrize("variant", ["Key", "Value"])


def converter(make, variant: str, target: str, **extra: str) -> Any:
    return make(f"TimestampConverter${variant}",
                **{"target.type": target, "format": FORMAT, **extra})


def on(variant: str, schema: Schema | None, value: Any) -> SourceRecord:
    if variant == "Key":
        return SourceRecord("topic", 0, schema, value, STRING_SCHEMA, "value")
    return SourceRecord("topic", 0, STRING_SCHEMA, "key", schema, value)


def payload(rec: Any, variant: str) -> tuple[Schema | None, Any]:
    return (rec.key_schema, rec.key) if variant == "Key" else (rec.value_schema, rec.value)


# --- whole key/value --------------------------------------------------------------------------

@VARIANTS
@EACH_PAIR
def test_whole_value_with_schema(make, variant, source_kind, target):
    # testWithSchemaIdentity, testWithSchema{Timestamp,Date,Time,Unix,String}To*, testKey
    schema, _, value = SOURCES[source_kind]
    out = converter(make, variant, target).apply(on(variant, schema, value))
    assert payload(out, variant) == (TARGET_SCHEMAS[target][0], EXPECTED[source_kind][target])


@VARIANTS
@EACH_PAIR
def test_whole_value_schemaless(make, variant, source_kind, target):
    # testSchemalessIdentity, testSchemaless{Timestamp,Date,Time,Unix,String}To*, testKey
    _, _, value = SOURCES[source_kind]
    out = converter(make, variant, target).apply(on(variant, None, value))
    assert payload(out, variant) == (None, EXPECTED[source_kind][target])


@VARIANTS
@EACH_PAIR
def test_whole_null_value_with_an_optional_schema(make, variant, source_kind, target):
    # testWithSchemaNullValueTo{Timestamp,Unix,Time,Date,String}
    _, optional_schema, _ = SOURCES[source_kind]
    out = converter(make, variant, target).apply(on(variant, optional_schema, None))
    assert payload(out, variant) == (TARGET_SCHEMAS[target][1], None)


@pytest.mark.parametrize("target", list(TARGET_SCHEMAS))
def test_whole_null_value_schemaless(make, target):  # testSchemalessNullValueTo*
    out = converter(make, "Value", target).apply(on("Value", None, None))
    assert payload(out, "Value") == (None, None)


# --- a field of a Struct or map ---------------------------------------------------------------

def struct_with(ts_schema: Schema, optional: bool = False) -> Schema:
    b = SchemaBuilder.struct().name("Event").version(2).field("ts", ts_schema) \
        .field("other", STRING_SCHEMA)
    if optional:
        b.optional()
    return b.build()


@VARIANTS
@EACH_PAIR
def test_field_with_schema(make, variant, source_kind, target):  # testWithSchemaFieldConversion
    schema, _, value = SOURCES[source_kind]
    in_schema = struct_with(schema)
    out = converter(make, variant, target, field="ts").apply(
        on(variant, in_schema, Struct(in_schema, {"ts": value, "other": "test"})))
    expected_schema = struct_with(TARGET_SCHEMAS[target][0])
    assert payload(out, variant) == (expected_schema, Struct(expected_schema, {
        "ts": EXPECTED[source_kind][target], "other": "test"}))


@VARIANTS
@EACH_PAIR
def test_field_schemaless(make, variant, source_kind, target):  # testSchemalessFieldConversion
    _, _, value = SOURCES[source_kind]
    original = {"ts": value, "other": "test"}
    out = converter(make, variant, target, field="ts").apply(on(variant, None, original))
    assert payload(out, variant) == (None, {"ts": EXPECTED[source_kind][target], "other": "test"})
    assert original["ts"] == value  # the input map is not changed


@EACH_PAIR
def test_null_field_and_null_struct_with_schema(make, source_kind, target):
    # testWithSchemaNullFieldTo{Timestamp,Unix,Time,Date,String}
    _, optional_schema, _ = SOURCES[source_kind]
    t = converter(make, "Value", target, field="ts")
    in_schema = struct_with(optional_schema)
    out = t.apply(on("Value", in_schema, Struct(in_schema, {"other": "test"})))
    expected_schema = struct_with(TARGET_SCHEMAS[target][1])
    assert out.value_schema == expected_schema
    assert out.value == Struct(expected_schema, {"other": "test"})

    # the entire (optional) Struct is null
    in_schema = struct_with(optional_schema, optional=True)
    out = t.apply(on("Value", in_schema, None))
    assert (out.value_schema, out.value) == (struct_with(TARGET_SCHEMAS[target][1], True), None)


@pytest.mark.parametrize(("replace_null", "expected"), [
    (False, None), (True, dt.datetime(1970, 1, 1, tzinfo=UTC))])
def test_null_field_with_a_default(make, replace_null, expected):
    # testWithSchemaNullFieldWithDefaultConversion (Kafka's test sets the option to false for
    # both of its cases; here each case runs with its own value)
    schema = SchemaBuilder.struct().field("ts", Schema(Type.INT64, optional=True, default=0)) \
        .field("other", STRING_SCHEMA).build()
    out = make("TimestampConverter$Value", field="ts", **{
        "target.type": "Timestamp", "replace.null.with.default": str(replace_null).lower()}).apply(
        on("Value", schema, Struct(schema, {"other": "test"})))
    expected_schema = SchemaBuilder.struct().field("ts", timestamp_schema(True)) \
        .field("other", STRING_SCHEMA).build()
    assert out.value_schema == expected_schema
    assert out.value.get_without_default("ts") == expected
    assert out.value["other"] == "test"


@VARIANTS
def test_a_missing_field_in_a_map_becomes_null(make, variant):
    out = converter(make, variant, "unix", field="ts").apply(on(variant, None, {"other": 1}))
    assert payload(out, variant) == (None, {"other": 1, "ts": None})


# --- unix precision ---------------------------------------------------------------------------

@pytest.mark.parametrize(("precision", "unix"), [
    ("seconds", 86_401),
    ("milliseconds", DATE_PLUS_TIME_UNIX),
    ("microseconds", DATE_PLUS_TIME_UNIX * 1000 + 123),
    ("nanoseconds", (DATE_PLUS_TIME_UNIX * 1000 + 123) * 1000 + 456),
])
def test_unix_field_with_precision_to_timestamp(make, precision, unix):
    # testWithSchemaFieldConversion_{Seconds,Micros,Nanos}: sub-millisecond parts are dropped
    schema = SchemaBuilder.struct().field("ts", INT64_SCHEMA).build()
    out = make("TimestampConverter$Value", field="ts", **{
        "target.type": "Timestamp", "unix.precision": precision}).apply(
        on("Value", schema, Struct(schema, {"ts": unix})))
    assert out.value_schema == SchemaBuilder.struct().field("ts", timestamp_schema()).build()
    expected = dt.datetime(1970, 1, 2, 0, 0, 1, tzinfo=UTC) if precision == "seconds" \
        else DATE_PLUS_TIME
    assert out.value["ts"] == expected


@pytest.mark.parametrize(("precision", "unix"), [
    ("seconds", 86_401),
    ("milliseconds", DATE_PLUS_TIME_UNIX),
    ("microseconds", 86_401_234_000),
    ("nanoseconds", 86_401_234_000_000),
])
@pytest.mark.parametrize("with_schema", [True, False], ids=["with-schema", "schemaless"])
def test_string_to_unix_with_precision(make, precision, unix, with_schema):
    # testSchemalessStringToUnix_{Micros,Nanos,Seconds}, and the same with a schema
    out = converter(make, "Value", "unix", **{"unix.precision": precision}).apply(
        on("Value", STRING_SCHEMA if with_schema else None, DATE_PLUS_TIME_STRING))
    assert out.value == unix
    assert out.value_schema == (INT64_SCHEMA if with_schema else None)


def test_negative_unix_values_round_toward_zero_as_java_does(make):
    before_epoch = dt.datetime(1969, 12, 31, 23, 59, 58, 500000, tzinfo=UTC)  # -1500 ms
    out = make("TimestampConverter$Value", **{"target.type": "unix", "unix.precision": "seconds"}) \
        .apply(on("Value", timestamp_schema(), before_epoch))
    assert out.value == -1


# --- schemas that are no timestamp, values that do not fit, config ---------------------------

def test_a_schema_that_is_no_timestamp_kind(make):
    schema = SchemaBuilder.struct().field("ts", Schema(Type.INT32)).build()
    with pytest.raises(ConnectError, match="does not correspond to a known timestamp type"):
        converter(make, "Value", "unix", field="ts").apply(
            on("Value", schema, Struct(schema, {"ts": 5})))


def test_values_that_do_not_parse_or_are_not_timestamps(make):
    with pytest.raises(DataError, match="does not match pattern"):
        converter(make, "Value", "unix").apply(on("Value", STRING_SCHEMA, "yesterday"))
    with pytest.raises(DataError, match="does not support"):
        converter(make, "Value", "unix").apply(on("Value", None, 1.5))


def test_config_errors():
    # testConfigNoTargetType, testConfigInvalidTargetType, testConfigInvalidUnixPrecision,
    # testConfigValidUnixPrecision, testConfigMissingFormat, testConfigInvalidFormat
    from kctl.transforms import TimestampConverterValue

    def configure(**props: str) -> None:
        TimestampConverterValue().configure(props)

    with pytest.raises(ValidationError) as e:
        configure()
    assert "target.type" in e.value.errors
    with pytest.raises(ValidationError) as e:
        configure(**{"target.type": "invalid"})
    assert "target.type" in e.value.errors
    with pytest.raises(ValidationError) as e:
        configure(**{"target.type": "unix", "unix.precision": "invalid"})
    assert "unix.precision" in e.value.errors
    configure(**{"target.type": "unix", "unix.precision": "seconds"})
    with pytest.raises(ConfigError, match="requires format option"):
        configure(**{"target.type": "string"})
    with pytest.raises(ValidationError) as e:
        configure(**{"target.type": "string", "format": "bad-format"})
    assert "format" in e.value.errors
